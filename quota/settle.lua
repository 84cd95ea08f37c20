-- Lower the cost of one admitted charge, or remove it (refund), by receipt.
--
-- KEYS[1]  the log, KEYS[2] the state hash (see charge.lua)
-- ARGV[1]  the entry's member, "<seq>:<cost>"
-- ARGV[2]  its admit time in microseconds, as in the receipt
-- ARGV[3]  the new cost, 0 to remove it
--
-- Returns the new member, "" when the entry was removed, or false when the
-- receipt names no entry (already refunded or settled, or expired): so a
-- retried call changes nothing.
local log, state = KEYS[1], KEYS[2]
local member, at, cost = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local score = redis.call('ZSCORE', log, member)
if not score or tonumber(score) ~= at then return false end

local colon = string.find(member, ':', 1, true)
local delta = tonumber(string.sub(member, colon + 1)) - cost
if delta == 0 then return member end
redis.call('ZREM', log, member)
local new = ''
if cost > 0 then
  new = string.sub(member, 1, colon) .. string.format('%d', cost)
  redis.call('ZADD', log, ARGV[2], new)
end

-- Every running sum that still counts the entry (its cut is before it) drops
-- by the difference; a window it has already left is untouched.
local st = redis.call('HGETALL', state)
for i = 1, #st, 2 do
  local f = st[i]
  if string.sub(f, 1, 1) == 'p' and at > tonumber(st[i + 1]) then
    redis.call('HINCRBY', state, 's' .. string.sub(f, 2), string.format('%d', -delta))
  end
end
return new
