-- Takes one in-flight slot of an identity, if one is free.
--
-- KEYS[1]  the identity's leases: a sorted set of lease ids scored by the
--          time each expires, in milliseconds of Redis TIME
-- ARGV[1]  the new lease's id (unique across servers)
-- ARGV[2]  the most leases the identity may hold
-- ARGV[3]  how long a lease lasts unless renewed, in milliseconds
--
-- Returns {1, 0} when the lease is taken, or {0, ms} when every slot is
-- held: ms is how long until the first of them expires if nobody releases
-- it, an upper bound on the wait.

local key = KEYS[1]
local id, most, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Leases of servers that died, or whose renewals stopped, free their slots.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZCARD', key) >= most then
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return {0, tonumber(first[2]) - now}
end
redis.call('ZADD', key, now + lease, id)
-- The key outlives its longest lease by nothing: an idle identity holds no
-- memory.
redis.call('PEXPIRE', key, lease)
return {1, 0}
