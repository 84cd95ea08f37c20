-- Check and charge a cost against every limit of a plan, atomically.
-- layout.lua and log.lua come first (layout.go): the layout's names (Last,
-- Sum, aCost, lateReply, ...) and the functions that read the log are
-- theirs.
--
-- KEYS[1]  the log: fixed-width records of the admitted charges, in time
--          order, then the header (internal/redislayout)
-- ARGV[1]  the arguments, packed doubles: aRecord (1 to record an admitted
--          cost, 0 to only look), aCost, aNow (microseconds; -1 to take it
--          from Redis TIME), aTB and aCB (the plan's record widths), aN
--          (its number of limits), aDeadline (after it, in Redis time, no
--          charge is made; 0 for none), then each limit's aWindow
--          (microseconds) and aMax where the header holds its window's
--          fields; of the size of a header
-- ARGV[2]  the struct format of the arguments and of the header, ARGV[3] of
--          a record: built by Go, so the script builds none
-- ARGV[4]  the longest window in milliseconds, as text: the log's TTL
-- KEYS[2], ARGV[5] and on: only for a plan with calendar periods: the
--          counters (a hash of a field a period limit: the period's start and
--          the units used in it, packed doubles), ARGV[5] per period its
--          start, end, the end of the one after, and max (packed doubles;
--          the period that holds now is the first or, once now has passed
--          its end, the second), then ARGV[6] on the periods' fields, then
--          last per period what to do when its counter is missing (Redis
--          lost it: a restart, a flush, a failover): a period start and
--          the units used in it to restore, or start 0 and restoreAsk to
--          have the caller look them up, or restoreNone to count from
--          zero (packed doubles)
--
-- Returns lateReply when the deadline had passed; restoreReply then per
-- missing counter its period (from 1) and start, packed doubles, when the
-- caller must look their units up, having changed nothing; or the header as
-- written (the caller reads the windows' sums and oldest records, the time,
-- and the admitted record's index from it), followed, when nothing was
-- admitted, by doubles: allowed (1 or 0), then per limit when the cost fits
-- (-1 if it does now); then per period its use, start and end. Numbers
-- travel packed both ways: Redis would format each Lua number of a reply
-- table, and each number argument, as text.
--
-- Redis runs a script's body on every call, creating its local functions
-- anew, and a function pays then for each of the body's locals it uses (an
-- upvalue): so the hot path is written in the body, whose locals are
-- registers, and the functions of the rare paths are defined where they
-- are used.
local hfmt, recfmt, ttl = ARGV[2], ARGV[3], ARGV[4]
local a = {unpack_(hfmt, ARGV[1])}
local record, cost, now, tb, cb, n = a[aRecord] == 1, a[aCost], a[aNow], a[aTB], a[aCB], a[aN]
if now < 0 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- A charge that Redis runs after its caller gave up on it (a slow or hung
-- server, a long queue) is not made: nobody would read that it was.
if record and a[aDeadline] > 0 and now > a[aDeadline] then return lateReply end

-- The fields of window i in the header h, and of its limit in the
-- arguments a, come after j = win(i): j runs from w1 to wn by Per.
local w1, wn = win(1), win(n)

openLog(KEYS[1], n, hfmt, tb, cb, recfmt)
local existed = h ~= nil
-- Time never runs back: should the clock, a charge is recorded at the latest
-- time seen, so the records stay in time order.
if h and h[Last] > now then now = h[Last] end

-- The log is rebuilt (below) unless it has this plan's windows and record
-- widths and room for now's offset. A record that has left the longest
-- window has left them all: its head is where the log's live records start.
local rebuilt = not h or m ~= n or h[TB] ~= tb or h[CB] ~= cb or record and now - h[Base] >= 256 ^ tb
local wmax, liveHead = 0, nil
for j = w1, wn, Per do
  local w = a[j + aWindow]
  if w > wmax then wmax, liveHead = w, j + Head end
  if not rebuilt and h[j + Window] ~= w then rebuilt = true end
end
if rebuilt then
  -- A new log, a re-planned one, or a base too far behind now for the
  -- offset's width: keep the records still inside the longest window,
  -- packed with this plan's widths from a new base, and measure every
  -- window on them. O(records kept).
  local at, cs, kept, first = {}, {}, 0, 0
  if h then
    local s, p = records(h[Live], h[Tail])
    for _ = h[Live], h[Tail] - 1 do
      local off, c = unpack_(rfmt, s, p)
      if h[Base] + off > now - wmax then
        kept = kept + 1
        at[kept], cs[kept] = h[Base] + off, c
      end
      p = p + width
    end
    first = h[First] + h[Tail] - kept
  end
  local base = kept > 0 and at[1] or now
  h = {}
  h[Last], h[Base], h[First], h[Tail], h[Live], h[TB], h[CB], h[Cap] = now, base, first, kept, 0, tb, cb, kept
  for j = w1, wn, Per do
    local w = a[j + aWindow]
    local sum, head, oldest, oldestCost = 0, kept, -1, 0
    for e = kept, 1, -1 do
      if at[e] <= now - w then break end
      sum = sum + cs[e]
      if cs[e] > 0 then head, oldest, oldestCost = e - 1, at[e], cs[e] end
    end
    h[j + Window], h[j + Sum], h[j + Head], h[j + Oldest], h[j + OldestCost] = w, sum, head, oldest, oldestCost
  end
  h[headerFields(n)] = n
  local bytes = {}
  for e = 1, kept do bytes[e] = pack(recfmt, at[e] - base, cs[e]) end
  raw, start, width, rfmt, m = table.concat(bytes), 0, tb + cb, recfmt, n
end

-- Each window moves past the records that have left it, and past refunded
-- ones, lowering its sum (nothing to read while its oldest record is still
-- inside, and from the record after it once it has left); then it holds
-- the cost or not.
local changed, allowed, empty = rebuilt, true, true
for j = w1, wn, Per do
  local cut = now - h[j + Window]
  if h[j + Oldest] >= 0 and h[j + Oldest] <= cut then
    local k, passed, oldest, c = seek(h[j + Head] + 1, cut)
    h[j + Sum] = h[j + Sum] - h[j + OldestCost] - passed
    h[j + Head], h[j + Oldest], h[j + OldestCost] = k, oldest, c
    changed = true
  end
  if h[j + Sum] + cost > a[j + aMax] then allowed = false end
  if h[j + Oldest] >= 0 then empty = false end
end
h[Last], h[Live] = now, h[liveHead]

-- Calendar periods: an exact count a period, which starts again at zero at
-- each boundary. pv holds per period its start, end, use and max.
local np, pv = math.max(#ARGV - 6, 0), {}
local restored, ask = false, {}
if np > 0 then
  local pa = {unpack_('>' .. string.rep('d', 4 * np), ARGV[5])}
  local ra = {unpack_('>' .. string.rep('d', 2 * np), ARGV[#ARGV])}
  for i = 1, np do
    local start, stop, after, pmax = pa[4 * i - 3], pa[4 * i - 2], pa[4 * i - 1], pa[4 * i]
    if now >= stop then start, stop = stop, after end
    local used, v = 0, call('HGET', KEYS[2], ARGV[5 + i])
    if v then
      local vs, vu = unpack_('>dd', v)
      if vs == start then used = vu end -- a count of an earlier period is zero now
    elseif ra[2 * i - 1] == start then
      -- Missing, and the caller brought its units: restored (written
      -- below whatever the decision), so only once across servers.
      used, restored = ra[2 * i], true
    elseif ra[2 * i] == restoreAsk then
      ask[#ask + 1], ask[#ask + 2] = i, start
    end
    if used + cost > pmax then allowed = false end
    pv[i] = {start, stop, used, pmax}
  end
end
-- A missing counter is looked up before anything is decided or written.
if #ask > 0 then return restoreReply .. pack('>' .. string.rep('d', #ask), unpack(ask)) end

-- periods returns the periods' use, start and end, packed for the reply.
local function periods()
  if np == 0 then return '' end
  local out = {}
  for i = 1, np do out[3 * i - 2], out[3 * i - 1], out[3 * i] = pv[i][3], pv[i][1], pv[i][2] end
  return pack('>' .. string.rep('d', 3 * np), unpack(out))
end

-- Admitted: the cost is recorded at now in every window and the log
-- written: the new record into the room, and the header in place (SETRANGE
-- and PEXPIRE cost Redis less than a SET of a string built anew, even a
-- short one; the string keeps its length, so Redis never grows its
-- allocation). When the room is full, or the records still in some window
-- fill less than a quarter of it, a new string of those records is written
-- instead, with room for half as many again: the compaction, amortised O(1)
-- a record; so it is after a rebuild. The log lives one longest window past
-- its last admit, then vanishes.
if allowed and record then
  local rec = pack(rfmt, now - h[Base], cost)
  local k, t = h[Live], h[Tail]
  local kept -- the live records, when the log is rewritten
  if rebuilt or t >= h[Cap] or k >= compactAfter and 4 * (t - k) < h[Cap] then
    local s, p = records(k, t)
    kept = s == raw and string.sub(raw, p, p + (t - k) * width - 1) or s
    h[First], t = h[First] + k, t - k
    for j = w1, wn, Per do h[j + Head] = h[j + Head] - k end
    h[Cap] = t + 1 + math.max(math.floor((t + 1) / 2), minRoom)
  end
  for j = w1, wn, Per do
    h[j + Sum] = h[j + Sum] + cost
    if h[j + Oldest] < 0 then h[j + Head], h[j + Oldest], h[j + OldestCost] = t, now, cost end
  end
  h[Tail], h[Live] = t + 1, h[liveHead]
  local header = pack(hfmt, unpack(h))
  local gap = (h[Cap] - t - 1) * width -- the room left after the new record
  if kept then
    call('SET', key, kept .. rec .. string.rep('\0', gap) .. header, 'PX', ttl)
  elseif gap <= oneWrite then
    call('SETRANGE', key, t * width, rec .. string.rep('\0', gap) .. header)
    call('PEXPIRE', key, ttl)
  else
    call('SETRANGE', key, t * width, rec)
    call('SETRANGE', key, h[Cap] * width, header)
    call('PEXPIRE', key, ttl)
  end
  -- The counters live until the last of their periods ends.
  local last = 0
  for i = 1, np do
    pv[i][3] = pv[i][3] + cost
    call('HSET', KEYS[2], ARGV[5 + i], pack('>dd', pv[i][1], pv[i][3]))
    if pv[i][2] > last then last = pv[i][2] end
  end
  if np > 0 then call('PEXPIREAT', KEYS[2], math.floor(last / 1000)) end
  return header .. periods()
end

if restored then
  -- Nothing admitted, but the restored counters are kept.
  local last = 0
  for i = 1, np do
    call('HSET', KEYS[2], ARGV[5 + i], pack('>dd', pv[i][1], pv[i][3]))
    if pv[i][2] > last then last = pv[i][2] end
  end
  call('PEXPIREAT', KEYS[2], math.floor(last / 1000))
end

if empty then
  -- Nothing in any window: keep nothing at all.
  if existed then call('DEL', key) end
elseif rebuilt then
  call('SET', key, raw .. pack(hfmt, unpack(h)), 'KEEPTTL')
elseif changed then
  call('SETRANGE', key, h[Cap] * width, pack(hfmt, unpack(h)))
end

-- fitsAt returns when enough of window j's (win(i)'s) records, from its oldest on,
-- will have left it to free need units: the time the cost fits, absent
-- other traffic.
local function fitsAt(j, need)
  local k, tail, gone = h[j + Head], h[Tail], 0
  while k < tail do
    local stop = math.min(k + 64, tail)
    local s, p = records(k, stop)
    for _ = k, stop - 1 do
      local off, c = unpack_(rfmt, s, p)
      gone = gone + c
      if gone >= need then return h[Base] + off + h[j + Window] end
      p = p + width
    end
    k = stop
  end
  return now + h[j + Window] -- not reached: the window holds more than need
end

local reply = {allowed and 1 or 0}
for j = w1, wn, Per do
  local need = h[j + Sum] + cost - a[j + aMax]
  reply[#reply + 1] = (not allowed and need > 0) and fitsAt(j, need) or -1
end
return pack(hfmt, unpack(h)) .. pack('>' .. string.rep('d', n + 1), unpack(reply)) .. periods()
