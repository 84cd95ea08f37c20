-- log.lua: the functions the scripts that read a log share. layout.lua
-- (the layout's names, generated from the Go constants) runs before it,
-- the script after it (layout.go). Every Lua C call, table and string
-- costs Redis about a thousand instructions, a command several thousand:
-- these functions read the log with as few as they can.
local call, unpack_, pack = redis.call, struct.unpack, struct.pack

-- headerFields returns the number of doubles in the header of n windows
-- (redislayout.HeaderFields).
local function headerFields(n) return Shared + Per * n + 1 end

-- win returns the field before the first of window i (from 1): its field f
-- is h[win(i) + f], field redislayout.WindowField(i-1, f) in Go.
local function win(i) return Shared + Per * (i - 1) end

-- The log the script works on: its key; raw, the chunk read from its end,
-- whose first byte is byte start (from 0) of the log; its header h (nil if
-- there is no log) with m windows; and the width and struct format of its
-- records.
local key, raw, start, h, m, width, rfmt

-- openLog reads the end of the log at k (from chunkStart): its header and
-- newest records, and the whole of a small log. A header is most likely of
-- n windows (struct format fmt) and records of tb + cb bytes (format
-- recfmt); others are read at their own sizes.
local function openLog(k, n, fmt, tb, cb, recfmt)
  key, h = k, nil
  raw = call('GETRANGE', key, chunkStart, '-1')
  if #raw < 8 then return end
  m = unpack_('>d', raw, #raw - 7)
  local fields = headerFields(m)
  if m ~= n then fmt = '>' .. string.rep('d', fields) end
  local size = 8 * fields
  if size > #raw then raw = call('GETRANGE', key, -size, -1) end
  h = {unpack_(fmt, raw, #raw - size + 1)}
  width, rfmt = h[TB] + h[CB], recfmt
  if h[TB] ~= tb or h[CB] ~= cb then rfmt = string.format(recordPattern, h[TB], h[CB]) end
  start = h[Cap] * width + size - #raw
end

-- records returns a string that holds the log's records k to stop - 1
-- (stop at most h[Tail]), and the position of record k in it: the chunk
-- when it holds them, else what GETRANGE reads.
local function records(k, stop)
  if k * width >= start then return raw, k * width - start + 1 end
  return call('GETRANGE', key, k * width, stop * width - 1), 1
end

-- seek walks from record k to the first admitted after cut whose cost is
-- not zero. It returns that record's index (h[Tail] if none), the cost of
-- the records passed, its admit time (-1 if none) and its cost: O(1 +
-- records passed), read in growing batches where the chunk does not hold
-- them.
local function seek(k, cut)
  local passed, batch, tail, base = 0, 4, h[Tail], h[Base]
  while k < tail do
    local stop = k + batch
    if stop > tail then stop = tail end
    local s, p = records(k, stop)
    for _ = k, stop - 1 do
      local off, c = unpack_(rfmt, s, p)
      if c > 0 and base + off > cut then return k, passed, base + off, c end
      passed, k, p = passed + c, k + 1, p + width
    end
    batch = batch * 4
  end
  return k, passed, -1, 0
end
