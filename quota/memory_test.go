package quota

import (
	"math/rand/v2"
	"sort"
	"testing"
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

// TestFirstAfterAndAbove checks the galloping searches, from the front and
// from the back, and the shortcut one against sort.Search on random logs.
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
		if got := firstAfterFromBack(es, cut); got != want {
			t.Fatalf("firstAfterFromBack(%v, %d) = %d, want %d", es, cut, got, want)
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
