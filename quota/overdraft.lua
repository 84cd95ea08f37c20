-- An overdraft charge, made once per id. layout.lua and log.lua come first
-- (layout.go), and charge.lua runs as the function charge below (its text
-- goes where this file says so), called with every max raised above any
-- sum (overdraft.go): its cost is recorded in every window and period
-- whether it fits or not.
--
-- KEYS[#KEYS]  the charge's mark: written once the charge is recorded, so
--              that a retry of an id whose try was made (its answer lost)
--              finds it and charges nothing
-- ARGV[#ARGV]  the mark's life in milliseconds, as text
-- Both are taken off the lists before charge.lua reads its keys and
-- arguments, which are then exactly those of a charge.
--
-- Returns duplicateReply when the mark was there; else what charge.lua
-- returns: the header of the charge recorded, or restoreReply and what to
-- look up, having changed nothing (and written no mark).
local mark, markLife = table.remove(KEYS), table.remove(ARGV)
if call('EXISTS', mark) == 1 then return duplicateReply end
local function charge()
-- charge.lua
end
local reply = charge()
-- Written after the charge's own writes: should Redis refuse writes (out
-- of memory), it refuses the charge's first, and neither is made.
if string.sub(reply, 1, #restoreReply) ~= restoreReply then call('SET', mark, '', 'PX', markLife) end
return reply
