-- Lower the cost of one admitted charge, or remove it (refund), by receipt.
--
-- KEYS[1]  the log, KEYS[2] the state (see charge.lua)
-- ARGV[1]  the entry's member, "<seq>:<cost>"
-- ARGV[2]  its admit time in microseconds, as in the receipt
-- ARGV[3]  the new cost, 0 to remove it
--
-- Returns the new member, "" when the entry was removed, or false when the
-- receipt names no entry (already refunded or settled, or expired): so a
-- retried call changes nothing.
local log, statekey = KEYS[1], KEYS[2]
local member, at, cost = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local score = redis.call('ZSCORE', log, member)
if not score or tonumber(score) ~= at then return false end
local raw = redis.call('GET', statekey)
local n, fmt, st = 0
if raw then
  n = struct.unpack('>d', raw, 17)
  fmt = '>' .. string.rep('d', 3 + 4 * n)
  st = {struct.unpack(fmt, raw)}
  st[#st] = nil -- struct.unpack's last result is the next position
  -- An entry that has left every window is spent: it only waits to be
  -- dropped from the log, and there is nothing left to give back.
  local wmax = 0
  for i = 1, n do wmax = math.max(wmax, st[4 * i]) end
  if at <= st[2] - wmax then return false end
end

local colon = string.find(member, ':', 1, true)
local delta = tonumber(string.sub(member, colon + 1)) - cost
if delta == 0 then return member end
local rank = redis.call('ZRANK', log, member)
redis.call('ZREM', log, member)
local new = ''
if cost > 0 then
  -- Same score: among equal scores the order may change, but no window
  -- boundary falls between entries of equal score, so no count moves.
  new = string.sub(member, 1, colon) .. string.format('%d', cost)
  redis.call('ZADD', log, ARGV[2], new)
end

-- A window still holding the entry (its rank is at or after the window's
-- oldest) loses the difference; a window it has left keeps its sum but, if
-- the entry is gone, finds its oldest one rank sooner.
if raw then
  for i = 1, n do
    local k = st[4 * i + 2]
    if rank < k then
      if cost == 0 then st[4 * i + 2] = k - 1 end
    else
      st[4 * i + 1] = st[4 * i + 1] - delta
      if cost == 0 and rank == k then
        local first = redis.call('ZRANGE', log, k, k, 'WITHSCORES')
        st[4 * i + 3] = first[2] and tonumber(first[2]) or -1
      end
    end
  end
  redis.call('SET', statekey, struct.pack(fmt, unpack(st)), 'KEEPTTL')
end
return new
