-- Lower the cost of one admitted charge, or zero it (refund), by receipt.
-- layout.lua and log.lua come first (layout.go): the layout's names (Last,
-- Sum, ...) and the functions that read the log are theirs.
--
-- KEYS[1]  the log (see charge.lua)
-- ARGV[1]  the record's index, counted since the log began
-- ARGV[2]  its admit time and ARGV[3] its cost, as the receipt holds them
-- ARGV[4]  the new cost, 0 to refund
-- KEYS[2], ARGV[5] on: only for a charge counted in calendar periods: the
--          counters (see charge.lua), then per period its field and the
--          start of the period the charge was counted in
--
-- Returns 1 if the record was found (and is now at the new cost), 0 when the
-- receipt names no record still in a window: already refunded, settled under
-- another receipt, left every window, or expired. So a retried call changes
-- nothing.
local index, at, cost, actual = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

openLog(KEYS[1], 0, '', 0, 0, nil)
if not h then return 0 end
local n, hfmt = m, '>' .. string.rep('d', headerFields(m))

-- The record's place in the string: records before h[Live] have left
-- every window, and there is nothing left to give back.
local p = index - h[First]
if p < h[Live] or p >= h[Tail] then return 0 end
local off, old = unpack_(rfmt, records(p, p + 1))
if h[Base] + off ~= at or old ~= cost then return 0 end
if actual == old then return 1 end
call('SETRANGE', key, p * width, pack(rfmt, off, actual))

-- The periods the charge was counted in give back the difference too, if
-- they are still the counters' periods.
for i = 5, #ARGV, 2 do
  local v = call('HGET', KEYS[2], ARGV[i])
  if v then
    local start, used = unpack_('>dd', v)
    if start == tonumber(ARGV[i + 1]) then
      call('HSET', KEYS[2], ARGV[i], pack('>dd', start, math.max(used - (old - actual), 0)))
    end
  end
end

-- A window still holding the record (it is at or after the window's oldest)
-- loses the difference; a window it has left keeps its sum. A refunded
-- oldest record passes the window's oldest on to the next of nonzero cost;
-- a lowered one keeps it, at its new cost.
local liveHead, wmax = nil, 0
for j = win(1), win(n), Per do
  if p >= h[j + Head] then
    h[j + Sum] = h[j + Sum] - (old - actual)
    if p == h[j + Head] then
      h[j + OldestCost] = actual
      if actual == 0 then
        local k, _, oldest, c = seek(p + 1, -1)
        h[j + Head], h[j + Oldest], h[j + OldestCost] = k, oldest, c
      end
    end
  end
  if h[j + Window] > wmax then liveHead, wmax = j + Head, h[j + Window] end
end
h[Live] = h[liveHead]
call('SETRANGE', key, h[Cap] * width, pack(hfmt, unpack(h)))
return 1
