-- Extends a held lease, and reports whether it was still held (1 or 0).
--
-- KEYS[1]  the identity's leases (see acquire.lua)
-- ARGV[1]  the lease's id
-- ARGV[2]  how long the lease lasts from now, in milliseconds

local key, id, lease = KEYS[1], ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local expires = redis.call('ZSCORE', key, id)
if not expires or tonumber(expires) <= now then
  -- Expired: its slot may already be someone else's. It is not brought back.
  redis.call('ZREM', key, id)
  return 0
end
redis.call('ZADD', key, string.format('%d', now + lease), id)
-- Every lease expires within one lease time from now, so neither need the
-- key last longer. (The lease as it came: text, which Redis need not
-- format.)
redis.call('PEXPIRE', key, ARGV[2])
return 1
