-- Check and charge a cost against every limit of a plan, atomically.
--
-- KEYS[1] is the identity's only key, a sorted set that holds the log and
-- its state, so that a decision is a handful of commands on one key:
--   the log    one entry per admitted charge: score = admit time
--              (microseconds, > 0), member = "<seq>:<cost>"
--   the state  members whose score holds a number v as -2 - v (<= -1, so no
--              time range ever meets them), read by one ZMSCORE and written
--              with the new entry by one ZADD:
--     #q       last sequence number (members are unique without randomness)
--     #t       the latest time seen; each window was cut at #t - window
--     #w<i>    the i-th window (microseconds)
--     #s<i>    its running sum: the cost of the entries with score > cut
--     #o<i>    the score of the oldest of them, -1 if there is none
-- ARGV[1]  "1" to record an admitted cost, "0" to only look (peek)
-- ARGV[2]  cost (0 for a peek)
-- ARGV[3]  now in microseconds, or "" to take it from Redis TIME
-- ARGV[4..] pairs of window (microseconds) and max, one per limit
--
-- Returns {allowed, now, seq, then per limit: used, oldest, free_at}, where
-- oldest is the score of the oldest entry in the window (-1 if none) and
-- free_at the time at which enough weight has left the window for the cost to
-- fit (-1 if it fits now).
local key = KEYS[1]
local record = ARGV[1] == '1'
local cost = tonumber(ARGV[2])
local now
if ARGV[3] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[3])
end
local n = (#ARGV - 3) / 2

-- Lua 5.1 prints numbers as %.14g, which would round microsecond timestamps:
-- format every time that goes into a range. (A number passed to redis.call
-- as a number is converted exactly.)
local function int(x) return string.format('%d', x) end
local function weight(member)
  return tonumber(string.sub(member, string.find(member, ':', 1, true) + 1))
end
local function dec(score) return -2 - tonumber(score) end

local win, max = {}, {}
local names = {'#q', '#t'}
local wmax = 0
for i = 1, n do
  win[i] = tonumber(ARGV[2 + 2 * i])
  max[i] = tonumber(ARGV[3 + 2 * i])
  if win[i] > wmax then wmax = win[i] end
  names[#names + 1] = '#w' .. i
  names[#names + 1] = '#s' .. i
  names[#names + 1] = '#o' .. i
end
names[#names + 1] = '#w' .. (n + 1)

-- Read the state. Sums kept under a plan with other windows missed the
-- charges made under this one (and the other way round): then rebuild them.
local st = redis.call('ZMSCORE', key, unpack(names))
local seq, last = 0, now
local fresh = not st[1] or st[#st]
if st[1] then
  seq, last = dec(st[1]), dec(st[2])
  for i = 1, n do
    if not st[3 * i] or dec(st[3 * i]) ~= win[i] then fresh = true end
  end
end
if now > last then last = now end

local used, oldest = {}, {}
local allowed, changed, trim = true, fresh, fresh
for i = 1, n do
  local w = win[i]
  -- Cut at the latest time seen, so an entry is never counted twice should
  -- the clock go back; and never below zero, where the state lives.
  local c = math.max(last - w, 0)
  local s, o
  if fresh then
    s, o = 0, -1
    local all = redis.call('ZRANGEBYSCORE', key, '(' .. int(c), '+inf', 'WITHSCORES')
    for j = 1, #all, 2 do s = s + weight(all[j]) end
    if #all > 0 then o = tonumber(all[2]) end
  else
    s, o = dec(st[3 * i + 1]), dec(st[3 * i + 2])
    if o >= 0 and o <= c then
      -- Subtract only what has left the window since the last cut,
      -- O(log n + evicted), and find the new oldest entry. While the oldest
      -- entry is still inside, nothing has left and this costs no command.
      local p = math.max(dec(st[2]) - w, 0)
      for _, m in ipairs(redis.call('ZRANGEBYSCORE', key, '(' .. int(p), int(c))) do
        s = s - weight(m)
      end
      local first = redis.call('ZRANGEBYSCORE', key, '(' .. int(c), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      o = first[2] and tonumber(first[2]) or -1
      changed = true
      if w == wmax then trim = true end
    end
  end
  used[i], oldest[i] = s, o
  if s + cost > max[i] then allowed = false end
end

local admitted = allowed and record and cost > 0
if not admitted and oldest[1] < 0 then
  -- Is anything left in any window? If not, the identity is idle: keep
  -- nothing at all.
  local idle = true
  for i = 1, n do
    if oldest[i] >= 0 then idle = false end
  end
  if idle then
    redis.call('DEL', key)
    local out = {allowed and 1 or 0, now, 0}
    for i = 1, n do
      out[#out + 1] = 0; out[#out + 1] = -1; out[#out + 1] = -1
    end
    return out
  end
end

-- What left the longest window has left every window: drop it from the log.
if trim then
  redis.call('ZREMRANGEBYSCORE', key, 0, int(last - wmax))
  if fresh then redis.call('ZREMRANGEBYSCORE', key, '-inf', '(0') end
end

if admitted or changed then
  local zadd = {}
  if admitted then
    seq = seq + 1
    zadd[1] = now; zadd[2] = seq .. ':' .. cost
    for i = 1, n do
      used[i] = used[i] + cost
      if oldest[i] < 0 or now < oldest[i] then oldest[i] = now end
    end
  end
  local function set(name, v) zadd[#zadd + 1] = -2 - v; zadd[#zadd + 1] = name end
  set('#q', seq); set('#t', last)
  for i = 1, n do
    if fresh then set('#w' .. i, win[i]) end
    set('#s' .. i, used[i]); set('#o' .. i, oldest[i])
  end
  redis.call('ZADD', key, unpack(zadd))
  -- The key lives one longest window past the last admit, then vanishes.
  if admitted then redis.call('PEXPIRE', key, wmax / 1000) end
end

local out = {allowed and 1 or 0, now, admitted and seq or 0}
for i = 1, n do
  -- For a violated limit, walk the window from its oldest entry until the
  -- weight that will have left covers the excess.
  local need = used[i] + cost - max[i]
  local free_at = -1
  if not allowed and need > 0 then
    local offset, gone = 0, 0
    while free_at < 0 do
      local batch = redis.call('ZRANGEBYSCORE', key, '(' .. int(math.max(last - win[i], 0)), '+inf', 'WITHSCORES', 'LIMIT', offset, 64)
      for j = 1, #batch, 2 do
        gone = gone + weight(batch[j])
        if gone >= need then
          free_at = tonumber(batch[j + 1]) + win[i]
          break
        end
      end
      if #batch < 128 then break end
      offset = offset + 64
    end
    if free_at < 0 then free_at = now + win[i] end
  end
  out[#out + 1] = used[i]; out[#out + 1] = oldest[i]; out[#out + 1] = free_at
end
return out
