package quota

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"
)

// TestMemoryLogSlides drives one log as a steady client does, entries in
// at the back and out at the front, and checks that it keeps its entries
// in order and, once grown, charges without allocating: push slides the
// log down its array rather than making a new one.
func TestMemoryLogSlides(t *testing.T) {
	lg := &memLog{}
	var at, cum int64
	step := func(keep int) {
		at++
		cum += at % 3 // some entries refunded: cost 0
		lg.push(memEntry{at: at, cost: at % 3, cum: cum})
		lg.trim(at - int64(keep))
	}
	check := func() {
		t.Helper()
		for i, e := range lg.entries {
			if want := at - int64(len(lg.entries)-1-i); e.at != want {
				t.Fatalf("entry %d of %d admitted at %d, want %d", i, len(lg.entries), e.at, want)
			}
		}
		if lg.total() != cum {
			t.Fatalf("total %d, want %d", lg.total(), cum)
		}
	}

	for range 10_000 {
		step(300)
	}
	check()
	if allocs := testing.AllocsPerRun(10_000, func() { step(300) }); allocs != 0 {
		t.Errorf("a steady log allocates %.2f times a charge, want 0", allocs)
	}
	check()
	if size := cap(lg.buf); size > 4*300 {
		t.Errorf("300 entries live in an array of %d", size)
	}

	// After a burst, the array shrinks back.
	for range 50_000 {
		step(50_000)
	}
	check()
	big := cap(lg.buf)
	for range 10_000 {
		step(10)
	}
	check()
	if size := cap(lg.buf); size >= big/8 || size > 4*minLogBuf {
		t.Errorf("after the burst (an array of %d), 10 entries live in an array of %d", big, size)
	}
}

// TestFirstAfterAndAbove checks the galloping search and the shortcut one
// against sort.Search on random logs.
func TestFirstAfterAndAbove(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2_000 {
		n := r.IntN(70)
		es := make([]memEntry, n)
		var at, cum int64
		for i := range es {
			at += r.Int64N(3) // equal times happen
			cost := r.Int64N(3)
			cum += cost
			es[i] = memEntry{at: at, cost: cost, cum: cum}
		}
		cut := r.Int64N(at+3) - 1
		want := sort.Search(n, func(i int) bool { return es[i].at > cut })
		if got := firstAfter(es, cut); got != want {
			t.Fatalf("firstAfter(%v, %d) = %d, want %d", es, cut, got, want)
		}
		if want == n {
			continue
		}
		total := es[want].cum - es[want].cost + r.Int64N(cum-(es[want].cum-es[want].cost)+1)
		if total >= cum {
			continue // no entry passes it
		}
		wantAbove := sort.Search(n, func(i int) bool { return es[i].cum > total })
		if got := firstAbove(es, want, total); got != wantAbove {
			t.Fatalf("firstAbove(%v, %d, %d) = %d, want %d", es, want, total, got, wantAbove)
		}
	}
}

// TestMemoryForgetsIdleIdentities checks that the shards' sweeps drop the
// identities whose windows and periods have all passed, as Redis expires
// their keys, and keep the others.
func TestMemoryForgetsIdleIdentities(t *testing.T) {
	ctx := t.Context()
	c := newClock()
	m := NewMemory(c.Now)
	plan := mustPlan(t, "p", PerMinute(10), Limit{Name: "day", Max: 100, Period: Day})
	for i := range 1_000 {
		if _, err := m.Charge(ctx, fmt.Sprint("idle-", i), plan, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.identities(); n != 1_000 {
		t.Fatalf("%d identities held after 1,000 charged, want 1,000", n)
	}
	c.Set(25 * time.Hour) // past the minute and the day
	if _, err := m.Charge(ctx, "busy", plan, 1); err != nil {
		t.Fatal(err)
	}
	// Enough calls that every shard sweeps: peeks, which hold nothing.
	for i := range 4 * memShards * sweepEvery {
		if _, err := m.Peek(ctx, fmt.Sprint("peek-", i%5_000), plan); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.identities(); n != 1 {
		t.Errorf("%d identities held once all but one are idle, want 1", n)
	}
}

// identities counts the identities the store holds a log or a counter of.
func (m *Memory) identities() int {
	held := map[string]bool{}
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for id := range s.logs {
			held[id] = true
		}
		for id := range s.counters {
			held[id] = true
		}
		s.mu.Unlock()
	}
	return len(held)
}

// TestMemoryConcurrentCallers charges 64 identities from 8 goroutines at
// once, on a clock that stands still: each identity admits exactly its
// limit, and each admitted charge sees a count no other one saw, so the
// shards serialize the charges of one identity.
func TestMemoryConcurrentCallers(t *testing.T) {
	ctx := t.Context()
	m := NewMemory(newClock().Now)
	const identities, max, goroutines = 64, 100, 8
	plan := mustPlan(t, "p", PerMinute(max))
	var mu sync.Mutex
	seen := map[string]map[int64]bool{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 2 * max {
				for i := range identities {
					id := fmt.Sprint("id-", (i+g+round)%identities)
					d, err := m.Charge(ctx, id, plan, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if !d.Allowed {
						continue
					}
					mu.Lock()
					if seen[id] == nil {
						seen[id] = map[int64]bool{}
					}
					if seen[id][d.Limits[0].Used] {
						t.Errorf("%s: two charges saw %d used", id, d.Limits[0].Used)
					}
					seen[id][d.Limits[0].Used] = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for i := range identities {
		id := fmt.Sprint("id-", i)
		if n := len(seen[id]); n != max {
			t.Errorf("%s admitted %d charges, want %d", id, n, max)
		}
	}
}

// TestWindowStart drives a log as run does, with charges at random times,
// the longest window trimmed and four shorter ones measured (two of them
// only now and then, as a caller's plans change), and checks each window's
// start, found from its cursor, against a search of the whole log.
func TestWindowStart(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	lg := &memLog{}
	const longest = 1_000
	windows := []int64{1, 10, 100, 999}
	var now, cum int64
	for step := range 20_000 {
		now += r.Int64N(5)
		if r.IntN(3) > 0 {
			cum++
			lg.push(memEntry{at: now, cost: 1, cum: cum})
		}
		lg.trim(now - longest)
		for k, w := range windows {
			if k >= 2 && r.IntN(10) > 0 {
				continue
			}
			want := sort.Search(len(lg.entries), func(i int) bool { return lg.entries[i].at > now-w })
			if got := lg.windowStart(w, now-w); got != want {
				t.Fatalf("step %d: the window of %d starts at %d, want %d", step, w, got, want)
			}
		}
	}
	// More windows than a log keeps cursors for: each still starts right.
	for w := int64(1); w <= 3*maxCursors; w++ {
		want := sort.Search(len(lg.entries), func(i int) bool { return lg.entries[i].at > now-w })
		if got := lg.windowStart(w, now-w); got != want {
			t.Fatalf("window %d of %d: starts at %d, want %d", w, 3*maxCursors, got, want)
		}
	}
	if len(lg.cursors) > maxCursors {
		t.Errorf("%d cursors kept, at most %d wanted", len(lg.cursors), maxCursors)
	}
}
