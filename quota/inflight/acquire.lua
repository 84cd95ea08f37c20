-- Takes one in-flight slot of an identity, if one is free and the caller is
-- still waiting for it.
--
-- KEYS[1]   the identity's leases: a sorted set of lease ids scored by the
--           time each expires, in milliseconds of Redis TIME
-- ARGV[1]   the new lease's id (unique across servers)
-- ARGV[2]   the most leases the identity may hold
-- ARGV[3]   how long a lease lasts unless renewed, in milliseconds
-- ARGV[4]   the caller's deadline in Redis time, in microseconds, or 0 for
--           none: after it, no slot is taken
-- ARGV[5..] leases of the identity whose release failed: given back first
--
-- Returns {1, 0, now} when the lease is taken, {0, ms, now} when every slot
-- is held (ms is how long until the first of them expires if nobody
-- releases it, an upper bound on the wait), or {-1, 0, now} when the
-- deadline had passed. now is Redis's time, in microseconds, from which
-- the caller learns how far Redis's clock is from its own.

local key = KEYS[1]
local id, most, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local deadline = tonumber(ARGV[4])

local t = redis.call('TIME')
local micros = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(micros / 1000)

-- Releases that failed are made now, whatever comes next: those slots are
-- free, and were even before this caller's deadline.
if #ARGV > 4 then
  redis.call('ZREM', key, unpack(ARGV, 5))
end
-- A caller whose deadline has passed has given up, and would never
-- release what it was given: take nothing. The caller moved its deadline
-- onto this clock by the offset it learned from the now of earlier
-- replies, an offset never ahead of the true one, so a lease is never
-- taken after the caller gave up.
if deadline > 0 and micros > deadline then
  return {-1, 0, micros}
end
-- Leases of servers that died, or whose renewals stopped, free their
-- slots. They are looked for only when the set is full: until then an
-- ended lease keeps nobody out (and the set grows only while it is not
-- full; the charge script takes slots the same way).
if redis.call('ZCARD', key) >= most then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZCARD', key) >= most then
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return {0, tonumber(first[2]) - now, micros}
  end
end
-- Numbers go to Redis as text made here (the lease as it came): Redis
-- would format each with snprintf's %.17g, which costs it more.
redis.call('ZADD', key, string.format('%d', now + lease), id)
-- The key outlives its longest lease by nothing: an idle identity holds no
-- memory.
redis.call('PEXPIRE', key, ARGV[3])
return {1, 0, micros}
