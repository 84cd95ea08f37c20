-- Lower the cost of one admitted charge, or zero it (refund), by receipt,
-- in every part of the charge (an identity's log: the charged identity's,
-- then each its plan shares), each on its own: a part already lowered or
-- gone is left as it is. layout.lua and log.lua come first (layout.go): the
-- layout's names (Last, Sum, ...) and the functions that read the log are
-- theirs.
--
-- ARGV[1]  the new cost, 0 to refund
-- Then per part, in order, in KEYS its log (see charge.lua) and, when the
-- charge was counted in calendar periods, its counters; in ARGV the
-- record's index, counted since the log began, its admit time and its
-- cost, as the receipt holds them, and the number of periods, then per
-- period its field and the start of the period the charge was counted in.
--
-- Returns the number of parts whose record was found (and is now at the
-- new cost); a part whose receipt names no record still in a window
-- (already refunded, settled under another receipt, left every window, or
-- expired) is not counted. So a retried call changes nothing.
local actual = tonumber(ARGV[1])

-- settle lowers the record of one part: its log at k, its counters at
-- counters, its receipt's fields, and its periods' arguments from pa on.
-- It reports whether it found the record.
local function settle(k, counters, index, at, cost, pa, np)
  openLog(k, 0, '', 0, 0, nil)
  if not h then return false end
  local n, hfmt = m, doubles(Shared + Per * m + 1)

  -- The record's place in the string: records before h[Live] have left
  -- every window, and there is nothing left to give back.
  local p = index - h[First]
  if p < h[Live] or p >= h[Tail] then return false end
  local off, old = unpack_(rfmt, records(p, p + 1))
  if h[Base] + off ~= at or old ~= cost then return false end
  if actual == old then return true end
  call('SETRANGE', key, text(p * width), pack(rfmt, off, actual))

  -- The periods the charge was counted in give back the difference too, if
  -- they are still the counters' periods.
  for i = pa, pa + 2 * np - 1, 2 do
    local v = call('HGET', counters, ARGV[i])
    if v then
      local start, used = unpack_('>dd', v)
      if start == tonumber(ARGV[i + 1]) then
        call('HSET', counters, ARGV[i], pack('>dd', start, math.max(used - (old - actual), 0)))
      end
    end
  end

  -- A window still holding the record (it is at or after the window's
  -- oldest) loses the difference; a window it has left keeps its sum. A
  -- refunded oldest record passes the window's oldest on to the next of
  -- nonzero cost; a lowered one keeps it, at its new cost.
  local liveHead, wmax = nil, 0
  for j = Shared, Shared + Per * (n - 1), Per do
    if p >= h[j + Head] then
      h[j + Sum] = h[j + Sum] - (old - actual)
      if p == h[j + Head] then
        h[j + OldestCost] = actual
        if actual == 0 then
          local k2, _, oldest, c = seek(p + 1, -1)
          h[j + Head], h[j + Oldest], h[j + OldestCost] = k2, oldest, c
        end
      end
    end
    if h[j + Window] > wmax then liveHead, wmax = j + Head, h[j + Window] end
  end
  h[Live] = h[liveHead]
  call('SETRANGE', key, text(h[Cap] * width), pack(hfmt, unpack(h)))
  return true
end

local found, ki, ai = 0, 1, 2
while ai <= #ARGV do
  local np = tonumber(ARGV[ai + 3])
  local counters = np > 0 and KEYS[ki + 1]
  if settle(KEYS[ki], counters, tonumber(ARGV[ai]), tonumber(ARGV[ai + 1]), tonumber(ARGV[ai + 2]), ai + 4, np) then
    found = found + 1
  end
  ki, ai = ki + (np > 0 and 2 or 1), ai + 4 + 2 * np
end
return found
