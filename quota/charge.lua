-- Check and charge a cost against every limit of a plan, atomically.
--
-- KEYS[1]  the log: a sorted set, one entry per admitted charge,
--          score = admit time (microseconds), member = "<seq>:<cost>".
-- KEYS[2]  the state: doubles packed with struct, read by one GET and
--          written by one SET PX, with no number formatted or parsed:
--            seq     last sequence number (members are unique without randomness)
--            last    the latest time seen; time never runs back from it
--            n       the number of windows, then for each:
--            w       the window (microseconds)
--            sum     the cost of the entries inside it
--            k       the rank of its oldest entry: the k entries before it
--                    have left this window (and may wait in the log for a
--                    longer one)
--            oldest  the score of its oldest entry, -1 if it is empty
-- ARGV[1]  the struct format of the arguments and of the state: ">" and
--          3 + 4n "d"s (both have that many numbers)
-- ARGV[2]  the arguments, packed: record (1 to record an admitted cost, 0 to
--          only look), cost, now in microseconds (-1: take it from Redis
--          TIME), then per limit: window (microseconds), max, 0, 0
--
-- Returns {allowed, now, seq, then per limit: used, oldest, free_at}, where
-- oldest is the score of the oldest entry in the window (-1 if none) and
-- free_at the time at which enough weight has left the window for the cost to
-- fit (-1 if it fits now).
local log, statekey, fmt = KEYS[1], KEYS[2], ARGV[1]
local a = {struct.unpack(fmt, ARGV[2])}
local record, cost, now = a[1] == 1, a[2], a[3]
if now < 0 then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local n = (#a - 4) / 4 -- struct.unpack also returned the next position

-- Numbers become text as integers: Lua's own conversion (%.14g) would round
-- microsecond times.
local function int(x) return string.format('%d', x) end
local function weight(member)
  return tonumber(string.sub(member, string.find(member, ':', 1, true) + 1))
end

local wmax, imax = 0, 1
for i = 1, n do
  if a[4 * i] > wmax then wmax, imax = a[4 * i], i end
end

-- The state, updated in place and written back as it is. Sums kept under a
-- plan with other windows missed the charges made under this one (and the
-- other way round): then they are rebuilt from the log.
local st
local fresh = true
local raw = redis.call('GET', statekey)
if raw and #raw == #ARGV[2] then
  st = {struct.unpack(fmt, raw)}
  fresh = false
  for i = 1, n do
    if st[4 * i] ~= a[4 * i] then fresh = true end
  end
end
if fresh then
  local m = raw and #raw >= 24 and struct.unpack('>d', raw, 17) or 0
  if m > 0 and #raw == 8 * (3 + 4 * m) then
    -- Entries that had left every window of the old plan are spent: drop
    -- them before the new windows are summed.
    local old = {struct.unpack('>' .. string.rep('d', 3 + 4 * m), raw)}
    local w = 0
    for i = 1, m do w = math.max(w, old[4 * i]) end
    redis.call('ZREMRANGEBYSCORE', log, '-inf', int(old[2] - w))
  end
  st = {m > 0 and struct.unpack('>d', raw) or 0, now, n}
  for i = 1, n do
    st[#st + 1] = a[4 * i]; st[#st + 1] = 0; st[#st + 1] = 0; st[#st + 1] = -1
  end
end
-- Time never runs back: should the clock, a charge is recorded at the
-- latest time seen, so the log stays in time order and nothing counts twice.
if now < st[2] then now = st[2] end
st[2] = now

local allowed, changed = true, fresh
for i = 1, n do
  local c = now - a[4 * i] -- entries at or before c have left the window
  if fresh then
    local s, all = 0, redis.call('ZRANGEBYSCORE', log, '(' .. int(c), '+inf', 'WITHSCORES')
    for j = 1, #all, 2 do s = s + weight(all[j]) end
    st[4 * i + 1], st[4 * i + 2] = s, redis.call('ZCOUNT', log, '-inf', int(c))
    if #all > 0 then st[4 * i + 3] = tonumber(all[2]) end
  elseif st[4 * i + 3] >= 0 and st[4 * i + 3] <= c then
    -- Walk on from the oldest entry by rank, subtracting what has left,
    -- until the first entry still inside: O(log n + evicted). While the
    -- oldest entry is inside, nothing has left and this costs no command.
    -- Batches start at two entries (mostly one has left and the next is
    -- inside: each score read costs Redis a number formatted) and grow.
    local s, k, o, size = st[4 * i + 1], st[4 * i + 2], -1, 2
    repeat
      local batch = redis.call('ZRANGE', log, k, k + size - 1, 'WITHSCORES')
      for j = 1, #batch, 2 do
        local score = tonumber(batch[j + 1])
        if score > c then o = score; break end
        s, k = s - weight(batch[j]), k + 1
      end
      local full = #batch == 2 * size
      size = size * 4
    until o >= 0 or not full
    st[4 * i + 1], st[4 * i + 2], st[4 * i + 3] = s, k, o
    changed = true
  end
  if st[4 * i + 1] + cost > a[4 * i + 1] then allowed = false end
end

-- The entries that have left the longest window have left every window:
-- drop them from the log, a batch at a time (a few may wait meanwhile).
local drop = st[4 * imax + 2]
if drop >= 16 or (fresh and drop > 0) then
  redis.call('ZREMRANGEBYRANK', log, 0, drop - 1)
  for i = 1, n do st[4 * i + 2] = st[4 * i + 2] - drop end
  changed = true
end

local admitted = allowed and record and cost > 0
if admitted then
  -- The newest entry: its rank is after every window's oldest.
  st[1] = st[1] + 1
  redis.call('ZADD', log, int(now), string.format('%d:%d', st[1], cost))
  for i = 1, n do
    st[4 * i + 1] = st[4 * i + 1] + cost
    if st[4 * i + 3] < 0 then st[4 * i + 3] = now end
  end
  -- Both keys live one longest window past the last admit, then vanish.
  local ttl = int(wmax / 1000)
  redis.call('PEXPIRE', log, ttl)
  redis.call('SET', statekey, struct.pack(fmt, unpack(st)), 'PX', ttl)
elseif changed then
  local idle = true
  for i = 1, n do
    if st[4 * i + 3] >= 0 then idle = false end
  end
  local ttl = redis.call('PTTL', log)
  if idle or ttl <= 0 then
    -- Nothing in any window: keep nothing at all.
    redis.call('DEL', log, statekey)
  else
    -- The state must not outlive the log.
    redis.call('SET', statekey, struct.pack(fmt, unpack(st)), 'PX', ttl)
  end
end

local out = {allowed and 1 or 0, now, admitted and st[1] or 0}
for i = 1, n do
  -- For a violated limit, walk the window from its oldest entry until the
  -- weight that will have left covers the excess.
  local w = a[4 * i]
  local need = st[4 * i + 1] + cost - a[4 * i + 1]
  local free_at = -1
  if not allowed and need > 0 then
    local k, gone = st[4 * i + 2], 0
    while free_at < 0 do
      local batch = redis.call('ZRANGE', log, k, k + 63, 'WITHSCORES')
      for j = 1, #batch, 2 do
        gone = gone + weight(batch[j])
        if gone >= need then
          free_at = tonumber(batch[j + 1]) + w
          break
        end
      end
      if #batch < 128 then break end
      k = k + 64
    end
    if free_at < 0 then free_at = now + w end
  end
  out[#out + 1] = st[4 * i + 1]; out[#out + 1] = st[4 * i + 3]; out[#out + 1] = free_at
end
return out
