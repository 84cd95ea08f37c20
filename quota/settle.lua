-- Lower the cost of one admitted charge, or remove it (refund), by receipt.
--
-- KEYS[1]  the identity's key (see charge.lua)
-- ARGV[1]  the entry's member, "<seq>:<cost>"
-- ARGV[2]  its admit time in microseconds, as in the receipt
-- ARGV[3]  the new cost, 0 to remove it
--
-- Returns the new member, "" when the entry was removed, or false when the
-- receipt names no entry (already refunded or settled, or expired): so a
-- retried call changes nothing.
local key = KEYS[1]
local member, at, cost = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local score = redis.call('ZSCORE', key, member)
if not score or tonumber(score) ~= at then return false end

local colon = string.find(member, ':', 1, true)
local delta = tonumber(string.sub(member, colon + 1)) - cost
if delta == 0 then return member end
redis.call('ZREM', key, member)
local new = ''
local zadd = {}
if cost > 0 then
  new = string.sub(member, 1, colon) .. cost
  zadd = {ARGV[2], new}
end

-- Every running sum that still counts the entry (it is after the window's
-- cut) drops by the difference; a window it has already left is untouched.
-- A window whose oldest entry was removed looks up its new oldest.
local function int(x) return string.format('%d', x) end
local state = {}
local raw = redis.call('ZRANGEBYSCORE', key, '-inf', '(0', 'WITHSCORES')
for j = 1, #raw, 2 do state[raw[j]] = -2 - tonumber(raw[j + 1]) end
local i = 1
while state['#w' .. i] do
  local cut = math.max(state['#t'] - state['#w' .. i], 0)
  if at > cut then
    local s, o = state['#s' .. i] - delta, state['#o' .. i]
    if cost == 0 and o == at then
      local first = redis.call('ZRANGEBYSCORE', key, '(' .. int(cut), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      o = first[2] and tonumber(first[2]) or -1
    end
    zadd[#zadd + 1] = int(-2 - s); zadd[#zadd + 1] = '#s' .. i
    zadd[#zadd + 1] = int(-2 - o); zadd[#zadd + 1] = '#o' .. i
  end
  i = i + 1
end
if #zadd > 0 then redis.call('ZADD', key, unpack(zadd)) end
return new
