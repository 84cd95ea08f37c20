-- log.lua: the functions the scripts that read a log share. layout.lua
-- (the layout's names, generated from the Go constants) runs before it,
-- the script after it (layout.go). Every Lua C call, table and string
-- costs Redis about a thousand instructions, a command several thousand:
-- these functions read the log with as few as they can.
-- Redis's own functions, set by each function of the library as it
-- starts (library.go): a library's text may not read them as it loads.
local call, unpack_, pack

-- A header of n windows holds Shared + Per * n + 1 doubles
-- (redislayout.HeaderFields), and window i's (from 1) field f is
-- h[Shared + Per * (i - 1) + f] (redislayout.WindowField(i-1, f) in Go).
-- The scripts spell these out rather than call functions for them: Redis
-- runs a script's body on every call, creating each of its functions anew.

-- text returns the decimal text of n, a whole number, for a command's
-- argument. Redis formats a Lua number argument with snprintf's %.17g,
-- some 2,500 of its instructions; string.format's %d costs less, and a
-- text made once is kept in texts, a local of the library that outlives
-- its calls (library.go), for the next call to find: below textsBelow,
-- so that the offsets of logs up to that size and the leases of plans
-- are kept, at most 65,536 texts (some 5 MB of Lua memory at worst:
-- docs/quota.md). Run as a script (EVALSHA), the library starts anew at
-- each call, and only the %d is spared.
local texts, textsBelow = {}, 65536
local function text(n)
  local s = texts[n]
  if s then return s end
  s = string.format('%d', n)
  if n < textsBelow then texts[n] = s end
  return s
end

-- doubles returns the struct format of k packed doubles ('>ddd' for 3),
-- made once a library for each k up to 64 (the reply's and the periods'
-- formats, which vary with the plan): string.rep and a concatenation cost
-- Redis some 2,000 instructions, a table read a few dozen.
local formats = {}
local function doubles(k)
  local f = formats[k]
  if f then return f end
  f = '>' .. string.rep('d', k)
  if k <= 64 then formats[k] = f end
  return f
end

-- planOf returns the numbers of a part's plan argument (charge.lua), a
-- table from 1 as unpacked, with the struct formats of its header (hfmt)
-- and records (recfmt) and its TTL as text (ttl). Nothing in it changes
-- while the plan does not, so the table made for an argument is kept in
-- plans, a local of the library, for the next call with it to find: the
-- same text is the same Lua string, and the lookup costs Redis a few
-- dozen instructions where unpacking a new table, and taking the formats
-- as arguments, cost some 6,000 (cmd/scriptcost). The tables are shared:
-- nothing may write to one. Plans differ by identity only through
-- overrides, so there are few; should they reach plansMax (some 470 KB
-- of Lua memory: TestPlansBeyondKept), all are dropped and made again as
-- calls need them. Run as a script (EVALSHA), the library starts anew at
-- each call, and so does plans.
local plans, planCount, plansMax = {}, 0, 512
local function planOf(s)
  local p = plans[s]
  if p then return p end
  p = {unpack_(doubles(#s / 8), s)}
  p.hfmt = doubles(#s / 8)
  p.recfmt = string.format(recordPattern, p[aTB], p[aCB])
  p.ttl = string.format('%d', p[aTTL])
  if planCount >= plansMax then plans, planCount = {}, 0 end
  plans[s], planCount = p, planCount + 1
  return p
end

-- The log the script works on: its key; raw, the chunk read from its end,
-- whose first byte is byte start (from 0) of the log; its header h (nil if
-- there is no log) with m windows; and the width and struct format of its
-- records.
local key, raw, start, h, m, width, rfmt

-- openLog reads the end of the log at k (from chunkStart): its header and
-- newest records, and the whole of a small log. A header is most likely of
-- n windows (struct format fmt; n is 0 when the caller has no guess) and
-- records of tb + cb bytes (format recfmt): such a header is read in one
-- call, its last field (the number of windows) saying it was one; others
-- are read at their own sizes.
local function openLog(k, n, fmt, tb, cb, recfmt)
  key, h = k, nil
  raw = call('GETRANGE', key, chunkStart, '-1')
  if #raw < 8 then return end
  local fields = Shared + Per * n + 1
  if n > 0 and 8 * fields <= #raw then
    h = {unpack_(fmt, raw, #raw - 8 * fields + 1)}
    m = h[fields]
  else
    m = unpack_('>d', raw, #raw - 7)
  end
  if m ~= n then
    h, fields = nil, Shared + Per * m + 1
    fmt = doubles(fields)
  end
  if not h then
    if 8 * fields > #raw then raw = call('GETRANGE', key, -8 * fields, -1) end
    h = {unpack_(fmt, raw, #raw - 8 * fields + 1)}
  end
  width, rfmt = h[TB] + h[CB], recfmt
  if h[TB] ~= tb or h[CB] ~= cb then rfmt = string.format(recordPattern, h[TB], h[CB]) end
  start = h[Cap] * width + 8 * fields - #raw
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
