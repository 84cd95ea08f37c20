-- Check and charge a cost against every limit of a plan, and of the plans
-- of the identities it shares (Plan.Shared), atomically: all or nothing.
-- layout.lua and log.lua come first (layout.go): the layout's names (Last,
-- Sum, aCost, lateReply, ...) and the functions that read the log are
-- theirs.
--
-- ARGV[1] holds the call's numbers, packed doubles: record (1 to record
-- an admitted cost, 0 to only look), cost, now (microseconds; -1 to take
-- it from Redis TIME) and deadline (after it, in Redis time, no charge is
-- made; 0 for none).
--
-- The charge may take one of its identity's in-flight slots (Slot in
-- slot.go): it is taken only if the charge is admitted, and the charge is
-- made only if a slot is free. Three more doubles in ARGV[1] say so: the
-- most slots the identity may hold, how long a lease lasts in
-- milliseconds, and the number of leases to give back first. With a slot,
-- KEYS[1] is the identity's leases (a sorted set of lease ids scored by
-- when each expires, in milliseconds of Redis TIME; the in-flight package's
-- key, in the identity's hash slot), ARGV[2] the new lease's id and the
-- leases to give back follow it.
--
-- The charge has one part an identity: the charged one, under its plan's
-- own limits, then each shared one, under its own plan. Each part has
-- its own keys and arguments, in part order, after the slot's; in the keys:
--
-- its log  fixed-width records of the admitted charges, in time order,
--          then the header (internal/redislayout)
-- its counters, for a part with calendar periods: a hash of a field a
--          period limit: the period's start and the units used in it,
--          packed doubles; and expiresField, when the hash's TTL as last
--          set ends
--
-- and in the arguments:
--
-- plan     packed doubles of the size of a header: aTB and aCB (the
--          part's record widths), aN (its number of windows), aPeriods
--          (its number of calendar periods), aTTL (its log's TTL in
--          milliseconds), then each window's aWindow (microseconds) and
--          aMax where the header holds its fields. The same at every call
--          with the plan: planOf (log.lua) decodes it once.
-- then, for a part with periods: per period its start, end, the end of
--          the one after, and max (packed doubles; the period that holds
--          now is the first or, once now has passed its end, the
--          second); the periods' fields, one argument each; and per
--          period what to do when its counter is missing (Redis lost it:
--          a restart, a flush, a failover): a period start and the units
--          used in it to restore, or start 0 and restoreAsk to have the
--          caller look them up, or restoreNone to count from zero (packed
--          doubles)
--
-- Returns lateReply when the deadline had passed; slotReply and a packed
-- double when every slot is held (how long until the first of them
-- expires, in milliseconds, if nobody gives it back); restoreReply then per
-- missing counter its period (from 1, counted over the parts' periods in
-- order) and start, packed doubles, when the caller must look their units
-- up, having changed nothing; or, per part in order, the header as
-- written (the caller reads the windows' sums and oldest records, the
-- time, and the admitted record's index from it), followed, when nothing
-- was admitted, by doubles: allowed (1 or 0, for the whole charge), then
-- per window when the cost fits (-1 if it does now); then per period its
-- use, start and end. Numbers travel packed both ways: Redis would format
-- each Lua number of a reply table, and each number argument, as text.
--
-- Redis runs a script's body on every call, creating its local functions
-- anew, and a function pays then for each of the body's locals it uses (an
-- upvalue): so the hot path is written in the body, whose locals are
-- registers, and the functions of the rare paths are defined where they
-- are used.

-- The part being read, checked or written: its arguments (a, its packed
-- numbers; hfmt and recfmt, its struct formats; ttl; np, its number of
-- periods; counters, their key; pargs, where its periods' arguments
-- start), its log (log.lua's key, raw, start, h, m, width and rfmt) and
-- what the checks found of it. They are body locals, registers: the hot
-- path is the charge of one part, and that is all it needs. A charge of
-- several parts keeps each part's in a table between the passes over
-- them (state and resume, below).
local a, hfmt, recfmt, ttl, np, counters, pargs
local existed, rebuilt, changed, empty, liveHead, pv, restored, pexpires
local record, cost, now, deadline
-- The fields of window i in the header h, and of its limit in the
-- arguments a, come after j = Shared + Per * (i - 1): j runs from w1 to wn
-- by Per.
local w1, wn
local parts, multi, states, state, resume = 0, false, nil, nil, nil
-- The slot: its key and the score of its lease when taken (nil for none),
-- the most slots, the lease, and the leases to give back first.
local slot, expires, most, lease, back

-- The first pass reads each part's arguments and opens its log. Time
-- never runs back: should the clock, a charge is recorded at the latest
-- time seen in any of its logs, so the records of each stay in time order.
local ki, ai = 1, 2 -- the part's first key and first argument
if #ARGV[1] > 32 then
  record, cost, now, deadline, most, lease, back = unpack_('>ddddddd', ARGV[1])
  slot, ki, ai = KEYS[1], 2, 3 + back
else
  record, cost, now, deadline = unpack_('>dddd', ARGV[1])
end
record = record == 1
repeat
  parts = parts + 1
  a = planOf(ARGV[ai])
  hfmt, recfmt, ttl = a.hfmt, a.recfmt, a.ttl
  np, pargs = a[aPeriods], ai + 1
  counters = np > 0 and KEYS[ki + 1]
  local log = KEYS[ki]
  ki, ai = ki + (np > 0 and 2 or 1), ai + (np > 0 and 3 + np or 1)
  if parts == 1 then
    if now < 0 then
      local t = call('TIME')
      now = t[1] * 1000000 + t[2]
    end
    -- Leases given back are gone whatever comes next: those slots were
    -- free even before this caller's deadline.
    if slot and back > 0 then call('ZREM', slot, unpack(ARGV, 3, 2 + back)) end
    -- A charge that Redis runs after its caller gave up on it (a slow or
    -- hung server, a long queue) is not made, and takes no slot: nobody
    -- would read that it was, nor give the slot back.
    if record and deadline > 0 and now > deadline then return lateReply end
    if slot then
      -- Leases of servers that died, or whose renewals stopped, free their
      -- slots; with none free nothing is charged. They are looked for only
      -- when the set is full: until then an ended lease keeps nobody out
      -- (and the set grows only while it is not full). The lease counts in
      -- milliseconds of Redis TIME, as the in-flight package's scripts do.
      local ms = math.floor(now / 1000)
      if call('ZCARD', slot) >= most then
        call('ZREMRANGEBYSCORE', slot, '-inf', ms)
        if call('ZCARD', slot) >= most then
          local first = call('ZRANGE', slot, 0, 0, 'WITHSCORES')
          return slotReply .. pack('>d', first[2] - ms)
        end
      end
      expires = ms + lease
    end
    multi = ai <= #ARGV
    if multi then
      states = {}
      state = function()
        return {a, hfmt, recfmt, ttl, np, counters, pargs, key, raw, start, h, m, width, rfmt,
          existed, rebuilt, changed, empty, liveHead, pv, restored, pexpires}
      end
      resume = function(s)
        a, hfmt, recfmt, ttl, np, counters, pargs, key, raw, start, h, m, width, rfmt,
          existed, rebuilt, changed, empty, liveHead, pv, restored, pexpires = unpack(s, 1, 22)
      end
    end
  end
  openLog(log, a[aN], hfmt, a[aTB], a[aCB], recfmt)
  existed = h ~= nil
  if h and h[Last] > now then now = h[Last] end
  if multi then states[parts] = state() end
until ai > #ARGV

-- The second pass checks every part at now: whether the cost fits in all
-- of them. Nothing is written yet.
local allowed, ask, asked = true, {}, 0
for p = 1, parts do
  if multi then resume(states[p]) end
  local n, tb, cb = a[aN], a[aTB], a[aCB]
  w1, wn = Shared, Shared + Per * (n - 1)

  -- The log is rebuilt (below) unless it has this plan's windows and record
  -- widths and room for now's offset. A record that has left the longest
  -- window has left them all: its head is where the log's live records start.
  rebuilt = not h or m ~= n or h[TB] ~= tb or h[CB] ~= cb or record and now - h[Base] >= 256 ^ tb
  local wmax = 0
  for j = w1, wn, Per do
    local w = a[j + aWindow]
    if w > wmax then wmax, liveHead = w, j + Head end
    if not rebuilt and h[j + Window] ~= w then rebuilt = true end
  end
  if rebuilt then
    -- A new log, a re-planned one, or a base too far behind now for the
    -- offset's width: keep the records still inside the longest window,
    -- packed with this plan's widths from a new base, and measure every
    -- window on them. O(records kept).
    local at, cs, kept, first = {}, {}, 0, 0
    if h then
      local s, q = records(h[Live], h[Tail])
      for _ = h[Live], h[Tail] - 1 do
        local off, c = unpack_(rfmt, s, q)
        if h[Base] + off > now - wmax then
          kept = kept + 1
          at[kept], cs[kept] = h[Base] + off, c
        end
        q = q + width
      end
      first = h[First] + h[Tail] - kept
    end
    local base = kept > 0 and at[1] or now
    local expires = h and h[Expires] or 0 -- the string is written anew with its TTL kept
    h = {}
    h[Last], h[Base], h[First], h[Tail], h[Live], h[TB], h[CB], h[Cap] = now, base, first, kept, 0, tb, cb, kept
    h[Expires] = expires
    for j = w1, wn, Per do
      local w = a[j + aWindow]
      local sum, head, oldest, oldestCost = 0, kept, -1, 0
      for e = kept, 1, -1 do
        if at[e] <= now - w then break end
        sum = sum + cs[e]
        if cs[e] > 0 then head, oldest, oldestCost = e - 1, at[e], cs[e] end
      end
      h[j + Window], h[j + Sum], h[j + Head], h[j + Oldest], h[j + OldestCost] = w, sum, head, oldest, oldestCost
    end
    h[Shared + Per * n + 1] = n
    local bytes = {}
    for e = 1, kept do bytes[e] = pack(recfmt, at[e] - base, cs[e]) end
    raw, start, width, rfmt, m = table.concat(bytes), 0, tb + cb, recfmt, n
  end

  -- Each window moves past the records that have left it, and past refunded
  -- ones, lowering its sum (nothing to read while its oldest record is still
  -- inside, and from the record after it once it has left); then it holds
  -- the cost or not.
  changed, empty = rebuilt, true
  for j = w1, wn, Per do
    local cut = now - h[j + Window]
    if h[j + Oldest] >= 0 and h[j + Oldest] <= cut then
      local k, passed, oldest, c = seek(h[j + Head] + 1, cut)
      h[j + Sum] = h[j + Sum] - h[j + OldestCost] - passed
      h[j + Head], h[j + Oldest], h[j + OldestCost] = k, oldest, c
      changed = true
    end
    if h[j + Sum] + cost > a[j + aMax] then allowed = false end
    if h[j + Oldest] >= 0 then empty = false end
  end
  h[Last], h[Live] = now, h[liveHead]

  -- Calendar periods: an exact count a period, which starts again at zero at
  -- each boundary. pv holds per period its start, end, use and max;
  -- pexpires when the counters' TTL ends (0 if unknown), read with them.
  restored = false
  if np > 0 then
    pv = {}
    local spans = {unpack_(doubles(4 * np), ARGV[pargs])}
    local ra = {unpack_(doubles(2 * np), ARGV[pargs + np + 1])}
    local vs -- one period, the common plan, spelt out: unpack is a C call
    if np == 1 then vs = call('HMGET', counters, expiresField, ARGV[pargs + 1])
    else vs = call('HMGET', counters, expiresField, unpack(ARGV, pargs + 1, pargs + np)) end
    pexpires = vs[1] and unpack_('>d', vs[1]) or 0
    for i = 1, np do
      local begin, stop, after, pmax = spans[4 * i - 3], spans[4 * i - 2], spans[4 * i - 1], spans[4 * i]
      if now >= stop then begin, stop = stop, after end
      local used, v = 0, vs[i + 1]
      if v then
        local vs, vu = unpack_('>dd', v)
        if vs == begin then used = vu end -- a count of an earlier period is zero now
      elseif ra[2 * i - 1] == begin then
        -- Missing, and the caller brought its units: restored (written
        -- below whatever the decision), so only once across servers.
        used, restored = ra[2 * i], true
      elseif ra[2 * i] == restoreAsk then
        ask[#ask + 1], ask[#ask + 2] = asked + i, begin
      end
      if used + cost > pmax then allowed = false end
      pv[i] = {begin, stop, used, pmax}
    end
    asked = asked + np
  end
  if multi then states[p] = state() end
end
-- A missing counter is looked up before anything is decided or written.
if #ask > 0 then return restoreReply .. pack(doubles(#ask), unpack(ask)) end

-- The third pass writes each part and its reply.
--
-- Admitted, the cost is recorded at now in every window of every part,
-- and each log written: the new record into the room, and the header in
-- place (SETRANGE and PEXPIRE cost Redis less than a SET of a string built
-- anew, even a short one; the string keeps its length, so Redis never
-- grows its allocation). When the room is full, or the records still in
-- some window fill less than a quarter of it, a new string of those
-- records is written instead, with room for half as many again: the
-- compaction, amortised O(1) a record; so it is after a rebuild. A log
-- lives at least one longest window past its last admit, then vanishes:
-- its TTL (aTTL) is a quarter more than that, and set again only once
-- less than the longest window is left of it (Expires), so a PEXPIRE
-- comes about every quarter window rather than with every charge.
--
-- Not admitted, a log keeps what the checks changed, or vanishes when
-- nothing is left in any window; the reply tells when the cost fits in
-- each window.
local admitted, reply = allowed and record, nil
for p = 1, parts do
  if multi then
    resume(states[p])
    w1, wn = Shared, Shared + Per * (a[aN] - 1)
  end
  local header
  if admitted then
    local rec = pack(rfmt, now - h[Base], cost)
    local k, t = h[Live], h[Tail]
    local kept -- the live records, when the log is rewritten
    if rebuilt or t >= h[Cap] or k >= compactAfter and 4 * (t - k) < h[Cap] then
      local s, q = records(k, t)
      kept = s == raw and string.sub(raw, q, q + (t - k) * width - 1) or s
      h[First], t = h[First] + k, t - k
      for j = w1, wn, Per do h[j + Head] = h[j + Head] - k end
      h[Cap] = t + 1 + math.max(math.floor((t + 1) / 2), minRoom)
    end
    for j = w1, wn, Per do
      h[j + Sum] = h[j + Sum] + cost
      if h[j + Oldest] < 0 then h[j + Head], h[j + Oldest], h[j + OldestCost] = t, now, cost end
    end
    h[Tail], h[Live] = t + 1, h[liveHead]
    -- aTTL is five fourths of the longest window: less than that left is
    -- less than four fifths of aTTL (a millisecond spared for rounding).
    local expire = kept or h[Expires] < now + a[aTTL] * 800 + 1000
    if expire then h[Expires] = now + a[aTTL] * 1000 end
    header = pack(hfmt, unpack(h))
    local gap = (h[Cap] - t - 1) * width -- the room left after the new record
    local q = (t + 1) * width - start -- where the room starts in the chunk read
    if kept then
      call('SET', key, kept .. rec .. string.rep('\0', gap) .. header, 'PX', ttl)
    elseif q >= 0 or gap <= oneWrite then
      -- The room between them is written over with what it holds (zeros),
      -- so that the record and the header go in one SETRANGE: copied from
      -- the chunk when it holds the room, whatever its size (a copy costs
      -- Redis little, a second SETRANGE some 14,000 instructions), else
      -- made by string.rep, some 45 instructions a byte, when it is short.
      local room = q >= 0 and string.sub(raw, q + 1, q + gap) or string.rep('\0', gap)
      call('SETRANGE', key, text(t * width), rec .. room .. header)
      if expire then call('PEXPIRE', key, ttl) end
    else
      call('SETRANGE', key, text(t * width), rec)
      call('SETRANGE', key, text(h[Cap] * width), header)
      if expire then call('PEXPIRE', key, ttl) end
    end
  else
    header = pack(hfmt, unpack(h))
    if empty then
      if existed then call('DEL', key) end
    elseif rebuilt then
      call('SET', key, raw .. header, 'KEEPTTL')
    elseif changed then
      call('SETRANGE', key, text(h[Cap] * width), header)
    end
  end
  reply = reply and reply .. header or header

  if not admitted then
    -- fitsAt returns when enough of window j's records, from
    -- its oldest on, will have left it to free need units: the time the
    -- cost fits, absent other traffic.
    local function fitsAt(j, need)
      local k, tail, gone = h[j + Head], h[Tail], 0
      while k < tail do
        local stop = math.min(k + 64, tail)
        local s, q = records(k, stop)
        for _ = k, stop - 1 do
          local off, c = unpack_(rfmt, s, q)
          gone = gone + c
          if gone >= need then return h[Base] + off + h[j + Window] end
          q = q + width
        end
        k = stop
      end
      return now + h[j + Window] -- not reached: the window holds more than need
    end
    local out = {allowed and 1 or 0}
    for j = w1, wn, Per do
      local need = h[j + Sum] + cost - a[j + aMax]
      out[#out + 1] = (not allowed and need > 0) and fitsAt(j, need) or -1
    end
    reply = reply .. pack(doubles(#out), unpack(out))
  end

  if np > 0 then
    -- The counters, charged or restored, live until the last of their
    -- periods ends, or of any plan's charged before: their TTL is set
    -- (and expiresField with it) only when a period ends later than it,
    -- never shortened. The reply holds each period's use, start and end.
    local last, out = 0, {}
    for i = 1, np do
      local v = pv[i]
      if admitted then v[3] = v[3] + cost end
      if v[2] > last then last = v[2] end
      out[3 * i - 2], out[3 * i - 1], out[3 * i] = v[3], v[1], v[2]
    end
    if admitted or restored then
      local expire = pexpires < last
      if np == 1 and not expire then
        call('HSET', counters, ARGV[pargs + 1], pack('>dd', pv[1][1], pv[1][3]))
      else
        local set = {}
        for i = 1, np do set[2 * i - 1], set[2 * i] = ARGV[pargs + i], pack('>dd', pv[i][1], pv[i][3]) end
        if expire then set[2 * np + 1], set[2 * np + 2] = expiresField, pack('>d', last) end
        call('HSET', counters, unpack(set))
        if expire then call('PEXPIREAT', counters, math.floor(last / 1000)) end
      end
    end
    reply = reply .. pack(doubles(3 * np), unpack(out))
  end
end
-- An admitted charge holds its slot until the lease ends, unless renewed
-- or given back; the set lives no longer than its newest lease. The score
-- goes as text made by %d, which costs Redis less than formatting a number.
if slot and admitted then
  call('ZADD', slot, string.format('%d', expires), ARGV[2])
  call('PEXPIRE', slot, text(lease))
end
return reply
