-- Check and charge a cost against every limit of a plan, atomically.
--
-- KEYS[1]  the log: a sorted set, one entry per admitted charge, scored by
--          its admit time (microseconds). The member is packed with struct
--          so the script reads entries without WITHSCORES (Redis would
--          format each score as text, and Lua parse it back): the admit time
--          in 7 bytes, then the cost in as few bytes as hold it (1 to 6).
--          A second charge at the same microsecond (a frozen test clock, a
--          clock that stepped back) is packed ">I7I6I4" instead, the third
--          number counting the charges before it at that time, so members
--          are unique without randomness and usually 8 bytes.
-- KEYS[2]  the state: doubles packed with struct, read by one GET and
--          written by one SET, with no number formatted or parsed:
--            dup     the number of charges admitted at time last
--            last    the latest time seen; time never runs back from it
--            n       the number of windows, then for each:
--            w       the window (microseconds)
--            sum     the cost of the entries inside it
--            k       the rank of its oldest entry: the k entries before it
--                    have left this window (and may wait in the log for a
--                    longer one)
--            oldest  the admit time of its oldest entry, -1 if it is empty
-- ARGV[1]  the struct format of the arguments, of the state and of the
--          reply: ">" and 3 + 4n "d"s (all three have that many numbers)
-- ARGV[2]  the arguments, packed: record (1 to record an admitted cost, 0 to
--          only look), cost, now in microseconds (-1: take it from Redis
--          TIME), then per limit: window (microseconds), max, 0, 0
-- ARGV[3]  the longest window in milliseconds, as text: the keys' TTL
--
-- Returns, packed like the arguments: allowed (1 or 0), now, dup (the
-- admitted entry's count of earlier charges at its time, -1 when nothing was
-- admitted), then per limit: used, oldest, free_at, 0, where oldest is
-- the admit time of the oldest entry in the window (-1 if none) and free_at
-- the time at which enough weight has left the window for the cost to fit
-- (-1 if it fits now). One string: Redis converts a table of numbers to a
-- reply at a cost per element.
local call, unpackf, packf = redis.call, struct.unpack, struct.pack
local log, statekey, fmt, ttl = KEYS[1], KEYS[2], ARGV[1], ARGV[3]
local a = {unpackf(fmt, ARGV[2])}
local record, cost, now = a[1] == 1, a[2], a[3]
local n = (#a - 4) / 4 -- struct.unpack also returned the next position
local score -- now as text for ZADD, built from TIME's own text when it can be
if now < 0 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
  local us = t[2]
  if #us < 6 then us = string.sub('00000' .. us, -6) end
  score = t[1] .. us
end

-- entryFormat is the struct format of a member whose cost takes size bytes
-- (constants: building the string would format a number).
local function entryFormat(size)
  return size == 1 and '>I7I1' or size == 2 and '>I7I2' or size == 3 and '>I7I3'
    or size == 4 and '>I7I4' or size == 5 and '>I7I5' or '>I7I6'
end

-- entry returns the admit time and cost of a log member.
local function entry(m) return unpackf(entryFormat(#m - 7), m) end

-- Ranks are passed as text: Redis would format a Lua number as a double.
local function rank(r) return string.format('%d', r) end

local wmax = 0
for i = 1, n do
  if a[4 * i] > wmax then wmax = a[4 * i] end
end

-- The state, updated in place and written back as it is. Sums kept under a
-- plan with other windows missed the charges made under this one (and the
-- other way round): then they are rebuilt from the log.
local st
local fresh = true
local raw = call('GET', statekey)
if raw and #raw == #ARGV[2] then
  st = {unpackf(fmt, raw)}
  fresh = false
  for i = 1, n do
    if st[4 * i] ~= a[4 * i] then fresh = true end
  end
end
local all -- the whole log, read once when the state is rebuilt
if fresh then
  local m = raw and #raw >= 24 and unpackf('>d', raw, 17) or 0
  if m > 0 and #raw == 8 * (3 + 4 * m) then
    -- Entries that had left every window of the old plan are spent: drop
    -- them before the new windows are summed.
    local old = {unpackf('>' .. string.rep('d', 3 + 4 * m), raw)}
    local w = 0
    for i = 1, m do w = math.max(w, old[4 * i]) end
    call('ZREMRANGEBYSCORE', log, '-inf', string.format('%d', old[2] - w))
  end
  st = {0, now, n}
  for i = 1, n do
    st[#st + 1] = a[4 * i]; st[#st + 1] = 0; st[#st + 1] = 0; st[#st + 1] = -1
  end
  all = call('ZRANGE', log, 0, -1)
  -- The newest entries tell the time last seen, and how many charges were
  -- admitted at it.
  for e = #all, 1, -1 do
    local m = all[e]
    local at = unpackf('>I7', m)
    if e == #all then st[2] = at elseif at < st[2] then break end
    local dup = #m == 17 and select(3, unpackf('>I7I6I4', m)) or 0
    st[1] = math.max(st[1], dup + 1)
  end
end
-- Time never runs back: should the clock, a charge is recorded at the
-- latest time seen, so the log stays in time order and nothing counts twice.
if now <= st[2] then
  if now < st[2] then score = nil end
  now = st[2]
else
  st[1], st[2] = 0, now
end

local allowed, changed = true, fresh
for i = 1, n do
  local c = now - a[4 * i] -- entries at or before c have left the window
  local j = 4 * i
  if fresh then
    local s, k, o = 0, 0, -1
    for e = 1, #all do
      local at, wgt = entry(all[e])
      if at <= c then k = k + 1 else
        s = s + wgt
        if o < 0 then o = at end
      end
    end
    st[j + 1], st[j + 2], st[j + 3] = s, k, o
  elseif st[j + 3] >= 0 and st[j + 3] <= c then
    -- Walk on from the oldest entry by rank, subtracting what has left,
    -- until the first entry still inside: O(log n + evicted). While the
    -- oldest entry is inside, nothing has left and this costs no command.
    -- Batches start at two entries (mostly one has left and the next is
    -- inside) and grow.
    local s, k, o, size = st[j + 1], st[j + 2], -1, 2
    repeat
      local batch = call('ZRANGE', log, rank(k), rank(k + size - 1))
      for e = 1, #batch do
        local at, wgt = entry(batch[e])
        if at > c then o = at; break end
        s, k = s - wgt, k + 1
      end
      local full = #batch == size
      size = size * 4
    until o >= 0 or not full
    st[j + 1], st[j + 2], st[j + 3] = s, k, o
    changed = true
  end
  if st[j + 1] + cost > a[j + 1] then allowed = false end
end

-- The entries that have left the longest window have left every window:
-- drop them from the log, a batch at a time (a few may wait meanwhile).
local drop = 0
for i = 1, n do
  if a[4 * i] == wmax then drop = st[4 * i + 2] end
end
if drop >= 16 or (fresh and drop > 0) then
  call('ZREMRANGEBYRANK', log, '0', rank(drop - 1))
  for i = 1, n do st[4 * i + 2] = st[4 * i + 2] - drop end
  changed = true
end

local admitted = allowed and record and cost > 0
if admitted then
  -- The newest entry: its rank is after every window's oldest.
  local member
  if st[1] == 0 then
    local size = cost < 256 and 1 or cost < 65536 and 2 or cost < 16777216 and 3
      or cost < 4294967296 and 4 or cost < 1099511627776 and 5 or 6
    member = packf(entryFormat(size), now, cost)
  else
    member = packf('>I7I6I4', now, cost, st[1] % 4294967296)
  end
  st[1] = st[1] + 1
  call('ZADD', log, score or string.format('%d', now), member)
  for i = 1, n do
    st[4 * i + 1] = st[4 * i + 1] + cost
    if st[4 * i + 3] < 0 then st[4 * i + 3] = now end
  end
  -- Both keys live one longest window past the last admit, then vanish.
  call('PEXPIRE', log, ttl)
  call('SET', statekey, packf(fmt, unpack(st)), 'PX', ttl)
elseif changed then
  local idle = true
  for i = 1, n do
    if st[4 * i + 3] >= 0 then idle = false end
  end
  if idle then
    -- Nothing in any window: keep nothing at all.
    call('DEL', log, statekey)
  elseif not fresh then
    -- The state expires with the log: both were last set together.
    call('SET', statekey, packf(fmt, unpack(st)), 'KEEPTTL')
  else
    local left = call('PTTL', log)
    if left > 0 then
      call('SET', statekey, packf(fmt, unpack(st)), 'PX', left)
    else
      call('DEL', log, statekey)
    end
  end
end

-- The reply is written over the arguments, each read before it is replaced.
a[1], a[2], a[3] = allowed and 1 or 0, now, admitted and st[1] - 1 or -1
for i = 1, n do
  -- For a violated limit, walk the window from its oldest entry until the
  -- weight that will have left covers the excess.
  local w = a[4 * i]
  local need = st[4 * i + 1] + cost - a[4 * i + 1]
  local free_at = -1
  if not allowed and need > 0 then
    local k, gone = st[4 * i + 2], 0
    while free_at < 0 do
      local batch = call('ZRANGE', log, rank(k), rank(k + 63))
      for e = 1, #batch do
        local at, wgt = entry(batch[e])
        gone = gone + wgt
        if gone >= need then
          free_at = at + w
          break
        end
      end
      if #batch < 64 then break end
      k = k + 64
    end
    if free_at < 0 then free_at = now + w end
  end
  a[4 * i], a[4 * i + 1], a[4 * i + 2] = st[4 * i + 1], st[4 * i + 3], free_at
end
return packf(fmt, unpack(a, 1, 3 + 4 * n))
