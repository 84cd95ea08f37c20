-- Check and charge a cost against every limit of a plan, atomically.
-- The layout's constants and log.lua come first (see layout.go).
--
-- KEYS[1]  the log: fixed-width records of the admitted charges, in time
--          order, then the header (layout.go)
-- ARGV[1]  the arguments, packed doubles: A_RECORD (1 to record an admitted
--          cost, 0 to only look), A_COST, A_NOW (microseconds; -1 to take it
--          from Redis TIME), A_TB and A_CB (the plan's record widths), then
--          per limit its window (microseconds) and max
-- ARGV[2]  the struct format of the arguments, ARGV[3] of the header,
--          ARGV[4] of the reply, ARGV[5] of a record: built by Go, so the
--          script builds no format
-- ARGV[6]  the longest window in milliseconds, as text: the log's TTL
--
-- Returns one string of packed doubles (R_*): allowed (1 or 0), now, the
-- admitted record's index (-1 if none), then per limit: used, the admit time
-- of the oldest record in the window (-1 if none), and when the cost fits
-- (-1 if it does now). Numbers travel packed both ways: Redis would format
-- each Lua number of a reply table, and each number argument, as text.
local key, hfmt, rfmt, ttl = KEYS[1], ARGV[3], ARGV[5], ARGV[6]
local a = {unpack_(ARGV[2], ARGV[1])}
local n = (#a - 1 - A_SHARED) / A_PER -- struct.unpack also returned the next position
local record, cost, now, tb, cb = a[A_RECORD] == 1, a[A_COST], a[A_NOW], a[A_TB], a[A_CB]
local width = tb + cb
if now < 0 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end

-- limitWindow and limitMax of limit i, from the arguments; the header's
-- fields of window i start after offset(i).
local function limitWindow(i) return a[A_SHARED + A_PER * (i - 1) + 1] end
local function limitMax(i) return a[A_SHARED + A_PER * (i - 1) + 2] end
local function offset(i) return SHARED + PER * (i - 1) end

-- A record that has left the longest window has left them all.
local longest = 1
for i = 2, n do
  if limitWindow(i) > limitWindow(longest) then longest = i end
end
local wmax = limitWindow(longest)

local h, m = readHeader(key, n, hfmt)
local existed = h ~= nil
-- Time never runs back: should the clock, a charge is recorded at the latest
-- time seen, so the records stay in time order.
if h and h[LAST] > now then now = h[LAST] end

-- samePlan reports whether the header was written under this plan's
-- windows and record widths.
local function samePlan()
  if m ~= n or h[TB] ~= tb or h[CB] ~= cb then return false end
  for i = 1, n do
    if h[offset(i) + WINDOW] ~= limitWindow(i) then return false end
  end
  return true
end

-- rebuild makes the header anew and returns the records to write before it:
-- those still inside the longest window, packed with this plan's widths
-- from a new base, with every window measured on them. For a new log, a
-- re-planned one, a head of spent records as long as the rest (the
-- compaction, amortised O(1) a record), or a base too far behind now for
-- the offset's width. O(records kept).
local function rebuild()
  local at, cs, kept, first = {}, {}, 0, 0
  if h then
    local ow, live, tail = h[TB] + h[CB], h[LIVE], h[TAIL]
    if tail > live then
      local ofmt, cut = string.format(RECORD_PATTERN, h[TB], h[CB]), now - wmax
      local bytes = call('GETRANGE', key, live * ow, tail * ow - 1)
      for p = 1, #bytes, ow do
        local off, c = unpack_(ofmt, bytes, p)
        if h[BASE] + off > cut then
          kept = kept + 1
          at[kept], cs[kept] = h[BASE] + off, c
        end
      end
    end
    first = h[FIRST] + tail - kept
  end
  local base = kept > 0 and at[1] or now
  h = {now, base, first, kept, 0, tb, cb}
  for i = 1, n do
    local w = limitWindow(i)
    local sum, head, oldest = 0, kept, -1
    for e = kept, 1, -1 do
      if at[e] <= now - w then break end
      sum = sum + cs[e]
      if cs[e] > 0 then head, oldest = e - 1, at[e] end
    end
    local j = offset(i)
    h[j + WINDOW], h[j + SUM], h[j + HEAD], h[j + OLDEST] = w, sum, head, oldest
  end
  h[offset(n + 1) + 1] = n
  h[LIVE] = h[offset(longest) + HEAD]
  local bytes = {}
  for e = 1, kept do bytes[e] = pack(rfmt, at[e] - base, cs[e]) end
  return table.concat(bytes)
end

-- evict moves window i past the records that have left it, and past
-- refunded ones, lowering its sum: no command while its oldest record is
-- still inside, else O(1 + records passed).
local function evict(i)
  local j = offset(i)
  local cut = now - h[j + WINDOW]
  if h[j + OLDEST] < 0 or h[j + OLDEST] > cut then return false end
  local k, passed, oldest = seek(key, rfmt, width, h[BASE], h[j + HEAD], h[TAIL], cut)
  h[j + HEAD], h[j + SUM], h[j + OLDEST] = k, h[j + SUM] - passed, oldest
  return true
end

-- admit records the cost at now: a record at the tail, in every window.
-- It returns the record's index and the bytes to write at the tail.
local function admit()
  local t = h[TAIL]
  for i = 1, n do
    local j = offset(i)
    h[j + SUM] = h[j + SUM] + cost
    if h[j + OLDEST] < 0 then h[j + HEAD], h[j + OLDEST] = t, now end
  end
  h[TAIL] = t + 1
  h[LIVE] = h[offset(longest) + HEAD]
  return h[FIRST] + t, pack(rfmt, now - h[BASE], cost) .. pack(hfmt, unpack(h))
end

-- fitsAt returns when enough of window i's records, from its oldest on,
-- will have left it to free need units: the time the cost fits, absent other
-- traffic.
local function fitsAt(i, need)
  local j = offset(i)
  local k, tail, gone = h[j + HEAD], h[TAIL], 0
  while k < tail do
    local stop = math.min(k + 64, tail)
    local bytes = call('GETRANGE', key, k * width, stop * width - 1)
    for p = 1, #bytes, width do
      local off, c = unpack_(rfmt, bytes, p)
      gone = gone + c
      if gone >= need then return h[BASE] + off + h[j + WINDOW] end
    end
    k = stop
  end
  return now + h[j + WINDOW] -- not reached: the window holds more than need
end

local rebuilt -- the records of a rewritten log; nil while the log stands
if not h or not samePlan()
  or record and (h[LIVE] >= COMPACT_AFTER and 2 * h[LIVE] >= h[TAIL] or now - h[BASE] >= 256 ^ tb) then
  rebuilt = rebuild()
end
local changed = rebuilt ~= nil
for i = 1, n do
  if evict(i) then changed = true end
end
h[LAST], h[LIVE] = now, h[offset(longest) + HEAD]

local allowed, empty = true, true
for i = 1, n do
  local j = offset(i)
  if h[j + SUM] + cost > limitMax(i) then allowed = false end
  if h[j + OLDEST] >= 0 then empty = false end
end

local index = -1
if allowed and record then
  local tailBytes
  index, tailBytes = admit()
  -- The log lives one longest window past its last admit, then vanishes.
  if rebuilt then
    call('SET', key, rebuilt .. tailBytes, 'PX', ttl)
  else
    call('SETRANGE', key, (h[TAIL] - 1) * width, tailBytes)
    call('PEXPIRE', key, ttl)
  end
elseif empty then
  -- Nothing in any window: keep nothing at all.
  if existed then call('DEL', key) end
elseif rebuilt then
  call('SET', key, rebuilt .. pack(hfmt, unpack(h)), 'KEEPTTL')
elseif changed then
  call('SETRANGE', key, h[TAIL] * width, pack(hfmt, unpack(h)))
end

local reply = {}
reply[R_ALLOWED], reply[R_NOW], reply[R_INDEX] = allowed and 1 or 0, now, index
for i = 1, n do
  local j, r = offset(i), R_SHARED + R_PER * (i - 1)
  local need = h[j + SUM] + cost - limitMax(i)
  reply[r + 1], reply[r + 2], reply[r + 3] = h[j + SUM], h[j + OLDEST], -1
  if not allowed and need > 0 then reply[r + 3] = fitsAt(i, need) end
end
return pack(ARGV[4], unpack(reply))
