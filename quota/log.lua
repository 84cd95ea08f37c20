-- The functions both scripts share, after the layout's constants (see
-- layout.go for the layout of the log).
local call, unpack_, pack = redis.call, struct.unpack, struct.pack

-- headerFormat is the struct format of the header of n windows.
local function headerFormat(n)
  return '>' .. string.rep('d', SHARED + PER * n + 1)
end

-- readHeader returns the header of the log at key as a table of numbers
-- (and its number of windows), or nil if there is no log. It reads the size
-- a header of n windows takes (fmt its format): a header written under a
-- plan of another number of windows, whose count ends it, is read again at
-- its own size.
local function readHeader(key, n, fmt)
  local size = 8 * (SHARED + PER * n + 1)
  local raw = call('GETRANGE', key, -size, -1)
  if #raw < 8 then return nil end
  local m = unpack_('>d', raw, #raw - 7)
  if m ~= n or #raw ~= size then
    fmt = headerFormat(m)
    raw = call('GETRANGE', key, -8 * (SHARED + PER * m + 1), -1)
  end
  return {unpack_(fmt, raw)}, m
end

-- seek walks the log at key from string index k (records of the struct
-- format rfmt, width bytes, times counted from base) to the first record
-- admitted after cut whose cost is not zero, reading in growing batches:
-- O(1 + records passed). It returns that record's index (tail if none), the
-- cost of the records passed, and its admit time (-1 if none).
local function seek(key, rfmt, width, base, k, tail, cut)
  local passed, batch = 0, 4
  while k < tail do
    local stop = math.min(k + batch, tail)
    local bytes = call('GETRANGE', key, k * width, stop * width - 1)
    for p = 1, #bytes, width do
      local off, c = unpack_(rfmt, bytes, p)
      if c > 0 and base + off > cut then return k, passed, base + off end
      passed, k = passed + c, k + 1
    end
    batch = batch * 4
  end
  return k, passed, -1
end
