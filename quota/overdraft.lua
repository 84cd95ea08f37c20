-- An overdraft charge, made once per id: charge.lua follows this prelude,
-- called with every max raised above any sum (overdraft.go), so its cost is
-- recorded in every window and period whether it fits or not.
--
-- KEYS[#KEYS]  the charge's mark: written with the charge, so that a retry
--              of an id whose first attempt was made (its reply lost) finds
--              it and charges nothing
-- ARGV[#ARGV]  the mark's life in milliseconds, as text
-- Both are taken off the lists before charge.lua reads its keys and
-- arguments, which are then exactly those of a charge.
--
-- Returns 'duplicate' when the mark was there, else what charge.lua returns.
local mark, markLife = table.remove(KEYS), table.remove(ARGV)
-- The mark is the script's first write: should Redis refuse writes (out of
-- memory), it refuses this one, and nothing is made.
if not call('SET', mark, '', 'NX', 'PX', markLife) then return 'duplicate' end
