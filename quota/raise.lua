-- Raise an identity's counters of calendar periods to at least the units a
-- durable copy holds (a ledger): after Redis lost writes (a failover to a
-- replica that lagged, a restart from an older snapshot), a counter kept
-- but behind is brought back up; one missing is restored. Never lowered.
--
-- KEYS[1]  the counters (see charge.lua)
-- ARGV[1]  per period its start and the units to raise it to (packed doubles)
-- ARGV[2]  the TTL in milliseconds, as text, of counters this creates
-- ARGV[3] on: the periods' fields
--
-- Returns how many counters it raised.
local pa, raised = {struct.unpack('>' .. string.rep('d', 2 * (#ARGV - 2)), ARGV[1])}, 0
for i = 1, #ARGV - 2 do
  local start, units = pa[2 * i - 1], pa[2 * i]
  local v = redis.call('HGET', KEYS[1], ARGV[2 + i])
  local vs, vu = -1, 0
  if v then vs, vu = struct.unpack('>dd', v) end
  -- A counter of a later period is left alone; one of an earlier period
  -- counts zero of this one.
  if vs < start or vs == start and vu < units then
    redis.call('HSET', KEYS[1], ARGV[2 + i], struct.pack('>dd', start, units))
    raised = raised + 1
  end
end
if raised > 0 and redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return raised
