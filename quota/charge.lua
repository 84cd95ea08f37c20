-- Check and charge a cost against every limit of a plan, atomically.
--
-- KEYS[1]  the log: a sorted set, one entry per admitted charge,
--          score = admit time (microseconds), member = "<seq>:<cost>".
-- KEYS[2]  the state hash:
--          n        last sequence number (makes members unique without randomness)
--          h        horizon: the log holds no entry with score <= h
--          w        the windows the sums below are for, "<ms>,<ms>,..."
--          s<ms>    running sum of the window of <ms> milliseconds
--          p<ms>    that sum counts exactly the entries with score > p<ms>
-- ARGV[1]  "1" to record an admitted cost, "0" to only look (peek)
-- ARGV[2]  cost (0 for a peek)
-- ARGV[3]  now in microseconds, or "" to take it from Redis TIME
-- ARGV[4..] pairs of window (milliseconds) and max, one per limit
--
-- Returns {allowed, now, seq, then per limit: used, oldest, free_at}, where
-- oldest is the score of the oldest entry in the window (-1 if none) and
-- free_at the time at which enough weight has left the window for the cost to
-- fit (-1 if it fits now).
local log, state = KEYS[1], KEYS[2]
local record = ARGV[1] == '1'
local cost = tonumber(ARGV[2])
local now
if ARGV[3] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[3])
end
local n = (#ARGV - 3) / 2

-- Lua 5.1 prints large numbers as %.14g, which would round microsecond
-- timestamps: format every number that goes into a key, member or range.
local function int(x) return string.format('%d', x) end
local function weight(member)
  return tonumber(string.sub(member, string.find(member, ':', 1, true) + 1))
end

local fields, windows = {'n', 'h', 'w'}, {}
for i = 1, n do
  local ms = ARGV[2 + 2 * i]
  windows[i] = ms
  fields[#fields + 1] = 's' .. ms
  fields[#fields + 1] = 'p' .. ms
end
local st = redis.call('HMGET', state, unpack(fields))
local seq = tonumber(st[1]) or 0
local horizon = tonumber(st[2])
-- Sums kept under another plan missed the charges made under this one (and
-- the other way round): when the plan's windows change, rebuild them.
local sig = table.concat(windows, ',')
local replan = st[3] ~= sig

local win, max, used, cut = {}, {}, {}, {}
local wmax = 0
local allowed = true
for i = 1, n do
  win[i] = tonumber(ARGV[2 + 2 * i]) * 1000
  max[i] = tonumber(ARGV[3 + 2 * i])
  wmax = math.max(wmax, win[i])
  local c = now - win[i]
  local s, p = tonumber(st[2 + 2 * i]), tonumber(st[3 + 2 * i])
  if replan or s == nil or p == nil or (horizon ~= nil and p < horizon) then
    -- No usable running sum (a new identity, or a new plan): sum the log once.
    s = 0
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, '(' .. int(c), '+inf')) do
      s = s + weight(m)
    end
  elseif c > p then
    -- Subtract only what left the window since the last call: O(log n + evicted).
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, '(' .. int(p), int(c))) do
      s = s - weight(m)
    end
  else
    -- The clock went back: never count again what was already subtracted.
    c = p
  end
  used[i], cut[i] = s, c
  if s + cost > max[i] then allowed = false end
end

-- Everything at or before now - longest window is out of every window.
local hcut = now - wmax
if horizon == nil or hcut > horizon then
  redis.call('ZREMRANGEBYSCORE', log, '-inf', int(hcut))
  horizon = hcut
end

if allowed and record and cost > 0 then
  seq = seq + 1
  redis.call('ZADD', log, int(now), int(seq) .. ':' .. int(cost))
  for i = 1, n do used[i] = used[i] + cost end
elseif redis.call('EXISTS', log) == 0 then
  -- Nothing in any window: the identity is idle, so keep no state at all.
  redis.call('DEL', state)
  local out = {allowed and 1 or 0, now, 0}
  for i = 1, n do
    out[#out + 1] = 0; out[#out + 1] = -1; out[#out + 1] = -1
  end
  return out
end

if replan then redis.call('DEL', state) end
local hset = {'n', int(seq), 'h', int(horizon), 'w', sig}
for i = 1, n do
  local ms = ARGV[2 + 2 * i]
  hset[#hset + 1] = 's' .. ms; hset[#hset + 1] = int(used[i])
  hset[#hset + 1] = 'p' .. ms; hset[#hset + 1] = int(cut[i])
end
redis.call('HSET', state, unpack(hset))
if allowed and record then
  -- Both keys live one longest window past the last admit, then vanish.
  local ttl = int(math.ceil(wmax / 1000))
  redis.call('PEXPIRE', log, ttl)
  redis.call('PEXPIRE', state, ttl)
elseif replan then
  -- The state was written anew: it must not outlive the log.
  redis.call('PEXPIRE', state, redis.call('PTTL', log))
end

local out = {allowed and 1 or 0, now, (allowed and record) and seq or 0}
for i = 1, n do
  -- Walk the window from its oldest entry: the first entry is the next to
  -- free capacity; for a violated limit, keep walking until the weight that
  -- has left covers the excess.
  local need = used[i] + cost - max[i]
  if allowed then need = 0 end
  local oldest, free_at = -1, -1
  local offset, gone = 0, 0
  while true do
    local batch = redis.call('ZRANGEBYSCORE', log, '(' .. int(cut[i]), '+inf', 'WITHSCORES', 'LIMIT', offset, 64)
    if #batch == 0 then break end
    if oldest < 0 then oldest = tonumber(batch[2]) end
    if need <= 0 then break end
    for j = 1, #batch, 2 do
      gone = gone + weight(batch[j])
      if gone >= need then
        free_at = tonumber(batch[j + 1]) + win[i]
        break
      end
    end
    if free_at >= 0 then break end
    offset = offset + 64
  end
  if need > 0 and free_at < 0 then free_at = now + win[i] end
  out[#out + 1] = used[i]; out[#out + 1] = oldest; out[#out + 1] = free_at
end
return out
