-- Lower the cost of one admitted charge, or remove it (refund), by receipt.
--
-- KEYS[1]  the log, KEYS[2] the state (see charge.lua)
-- ARGV[1]  the entry's member (admit time and cost, packed: see charge.lua)
-- ARGV[2]  the new cost, 0 to remove it
--
-- Returns the new member, "" when the entry was removed, or false when the
-- receipt names no entry (already refunded or settled, or expired): so a
-- retried call changes nothing.
local call = redis.call
local ENTRY = {'>I7B', '>I7H', '>I7I3', '>I7I4', '>I7I5', '>I7I6', 0, 0, 0, '>I7I6I4'}
local log, statekey, member, cost = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2])

if not ENTRY[#member - 7] or not call('ZSCORE', log, member) then return false end
local at, old, dup = struct.unpack(ENTRY[#member - 7], member)
local raw = call('GET', statekey)
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

local delta = old - cost
if delta == 0 then return member end
local rank = call('ZRANK', log, member)
call('ZREM', log, member)
local new = ''
if cost > 0 then
  -- Same score: among equal scores the order may change, but no window
  -- boundary falls between entries of equal score, so no count moves.
  if #member == 17 then
    new = struct.pack(ENTRY[10], at, cost, dup)
  else
    local size = cost < 256 and 1 or cost < 65536 and 2 or cost < 16777216 and 3
      or cost < 4294967296 and 4 or cost < 1099511627776 and 5 or 6
    new = struct.pack(ENTRY[size], at, cost)
  end
  call('ZADD', log, string.format('%d', at), new)
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
        local first = call('ZRANGE', log, k, k)
        st[4 * i + 3] = first[1] and struct.unpack('>I7', first[1]) or -1
      end
    end
  end
  call('SET', statekey, struct.pack(fmt, unpack(st)), 'KEEPTTL')
end
return new
