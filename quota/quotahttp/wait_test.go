package quotahttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// waitRig is a gate with a bounded wait over real Redis, serving one
// identity per X-Who header, that tells the test each request it served,
// each that joined a line and each whose client went away.
type waitRig struct {
	srv    *httptest.Server
	store  *quota.Redis
	plan   quota.Plan
	served chan string // X-Name of each request served, in order
	joined chan string // X-Name of each request that began to wait
	gone   chan string // X-Name of each request whose client went away
}

func newWaitRig(t *testing.T, plan quota.Plan, opts ...quotahttp.Option) *waitRig {
	t.Helper()
	rdb := quotatest.NewClient(t, quotatest.RedisURL(t))
	rig := &waitRig{
		store:  quota.NewRedis(rdb, quota.WithPrefix(fmt.Sprintf("quotahttpwait:%d:", time.Now().UnixNano()))),
		plan:   plan,
		served: make(chan string, 100),
		joined: make(chan string, 100),
		gone:   make(chan string, 100),
	}
	g := quotahttp.New(rig.store, append([]quotahttp.Option{
		quotahttp.WithPlan(plan),
		quotahttp.WithCost(costHeader),
		quotahttp.WithIdentity(func(r *http.Request) (string, error) { return r.Header.Get("X-Who"), nil }),
		quotahttp.WithTimeout(time.Second),
		quotahttp.WithObserver(func(r *http.Request, e quotahttp.Event) {
			if e.Kind == quotahttp.EventWaiting {
				rig.joined <- r.Header.Get("X-Name")
			}
		}),
		quotahttp.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				rig.gone <- r.Header.Get("X-Name")
			}
			quotahttp.WriteProblem(w, r, err)
		}),
	}, opts...)...)
	rig.srv = httptest.NewServer(g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rig.served <- r.Header.Get("X-Name")
	})))
	t.Cleanup(rig.srv.Close)
	return rig
}

// result is the answer to one request, and how long it took.
type result struct {
	name       string
	status     int
	retryAfter string
	took       time.Duration
	err        error
}

// send sends a request of who, named name, costing cost, and returns a
// channel of its result.
func (rig *waitRig) send(ctx context.Context, who, name string, cost int64) <-chan result {
	c := make(chan result, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rig.srv.URL+"/", nil)
		req.Header.Set("X-Who", who)
		req.Header.Set("X-Name", name)
		req.Header.Set("X-Cost", strconv.FormatInt(cost, 10))
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			c <- result{name: name, err: err, took: time.Since(start)}
			return
		}
		resp.Body.Close()
		c <- result{name: name, status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), took: time.Since(start)}
	}()
	return c
}

func (rig *waitRig) used(t *testing.T, who string) int64 {
	t.Helper()
	return used(t, rig.store, who, rig.plan)
}

func expect(t *testing.T, c <-chan string, want string) {
	t.Helper()
	select {
	case got := <-c:
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no %q in 5 s", want)
	}
}

func wait(t *testing.T, c <-chan result) result {
	t.Helper()
	select {
	case r := <-c:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no answer in 5 s")
		return result{}
	}
}

// A request that fits within the wait is admitted once its Retry-After has
// passed, and charged once; those of its caller that come after it wait
// behind it and are charged in their turn; one whose turn comes with a
// Retry-After beyond its wait is refused then.
func TestWaitAdmitsInTurn(t *testing.T) {
	plan := mustPlan(t, quota.Limit{Name: "second", Max: 10, Window: time.Second})
	rig := newWaitRig(t, plan, quotahttp.WithMaxWait(1500*time.Millisecond))
	ctx := context.Background()

	start := time.Now()
	if r := wait(t, rig.send(ctx, "k", "full", 10)); r.status != http.StatusOK {
		t.Fatalf("the first request: %d", r.status)
	}
	expect(t, rig.served, "full")
	a := rig.send(ctx, "k", "a", 4)
	expect(t, rig.joined, "a") // denied: the 10 units leave the window in 1 s
	b := rig.send(ctx, "k", "b", 4)
	expect(t, rig.joined, "b") // behind a, uncharged
	c := rig.send(ctx, "k", "c", 4)
	expect(t, rig.joined, "c")
	if u := rig.used(t, "k"); u != 10 {
		t.Fatalf("%d units used while a, b and c wait; want 10: a waiter is never charged early", u)
	}

	ra := wait(t, a)
	if since := time.Since(start); since < time.Second || ra.took > 1400*time.Millisecond {
		t.Errorf("a answered %v after the window began to fill, after %v; want about its Retry-After, the 1 s of the window", since, ra.took)
	}
	rb, rc := wait(t, b), wait(t, c)
	if ra.status != http.StatusOK || rb.status != http.StatusOK {
		t.Errorf("a %d, b %d; want both admitted once the window has room", ra.status, rb.status)
	}
	// c's turn comes with 8 units in the window until a second after a's
	// charge: past its 1.5 s wait, so it is refused then, not made to wait.
	if rc.status != http.StatusTooManyRequests || rc.retryAfter == "" {
		t.Errorf("c: status %d, Retry-After %q; want 429 with one", rc.status, rc.retryAfter)
	}
	if rc.took > 1400*time.Millisecond {
		t.Errorf("c took %v; want its 429 as soon as its turn showed it could not fit", rc.took)
	}
	expect(t, rig.served, "a")
	expect(t, rig.served, "b")
	if u := rig.used(t, "k"); u != 8 {
		t.Errorf("%d units used; want a's and b's 8, each charged once", u)
	}
}

// A request whose Retry-After is beyond the wait, or that the caps leave
// no room for, is refused at once; a waiter whose client goes away leaves
// the line uncharged, and the next request is not held behind it.
func TestWaitRefusals(t *testing.T) {
	t.Run("beyond the wait", func(t *testing.T) {
		plan := mustPlan(t, quota.Limit{Name: "ten-seconds", Max: 10, Window: 10 * time.Second})
		rig := newWaitRig(t, plan, quotahttp.WithMaxWait(500*time.Millisecond))
		wait(t, rig.send(context.Background(), "k", "full", 10))
		r := wait(t, rig.send(context.Background(), "k", "late", 1))
		if r.status != http.StatusTooManyRequests || r.took > 300*time.Millisecond {
			t.Errorf("status %d after %v; want a 429 at once: its Retry-After (10 s) is beyond the wait", r.status, r.took)
		}
		if len(rig.joined) != 0 {
			t.Errorf("%d requests waited", len(rig.joined))
		}
	})

	t.Run("caps", func(t *testing.T) {
		plan := mustPlan(t, quota.Limit{Name: "second", Max: 10, Window: time.Second})
		rig := newWaitRig(t, plan, quotahttp.WithMaxWait(2*time.Second), quotahttp.WithMaxWaiters(2, 1))
		ctx := context.Background()
		for _, who := range []string{"k", "l", "m"} {
			wait(t, rig.send(ctx, who, who+"-full", 10))
		}
		first := rig.send(ctx, "k", "k-first", 1)
		expect(t, rig.joined, "k-first")
		// One waiter of k at most: the second is refused at once.
		if r := wait(t, rig.send(ctx, "k", "k-second", 1)); r.status != http.StatusTooManyRequests || r.took > 300*time.Millisecond {
			t.Errorf("k's second waiter: status %d after %v; want 429 at once", r.status, r.took)
		}
		other := rig.send(ctx, "l", "l-first", 1)
		expect(t, rig.joined, "l-first")
		// Two waiters on the server at most: m's is refused at once.
		if r := wait(t, rig.send(ctx, "m", "m-first", 1)); r.status != http.StatusTooManyRequests || r.took > 300*time.Millisecond {
			t.Errorf("a third waiter: status %d after %v; want 429 at once", r.status, r.took)
		}
		for _, c := range []<-chan result{first, other} {
			if r := wait(t, c); r.status != http.StatusOK {
				t.Errorf("%s: status %d, want 200 after its wait", r.name, r.status)
			}
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		plan := mustPlan(t, quota.Limit{Name: "second", Max: 10, Window: time.Second})
		rig := newWaitRig(t, plan, quotahttp.WithMaxWait(2*time.Second))
		wait(t, rig.send(context.Background(), "k", "full", 10))
		ctx, cancel := context.WithCancel(context.Background())
		gone := rig.send(ctx, "k", "gone", 10)
		expect(t, rig.joined, "gone")
		cancel()
		cancelled := time.Now()
		if r := <-gone; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("the cancelled request: %+v", r)
		}
		expect(t, rig.gone, "gone") // the gate saw it go, and left it uncharged
		if took := time.Since(cancelled); took > 500*time.Millisecond {
			t.Errorf("the gate saw the client go %v after it went; want at once, not at its Retry-After", took)
		}
		// The next request waits for the window, not behind the one gone,
		// and is the only one charged.
		if r := wait(t, rig.send(context.Background(), "k", "next", 10)); r.status != http.StatusOK {
			t.Errorf("the next request: status %d, want 200 once the window has room", r.status)
		}
		expect(t, rig.served, "full")
		expect(t, rig.served, "next")
		if u := rig.used(t, "k"); u != 10 {
			t.Errorf("%d units used; want next's 10 alone", u)
		}
	})
}

// Waiting is off by default: a denial is a 429 at once.
func TestNoWaitByDefault(t *testing.T) {
	plan := mustPlan(t, quota.Limit{Name: "second", Max: 10, Window: time.Second})
	rig := newWaitRig(t, plan)
	wait(t, rig.send(context.Background(), "k", "full", 10))
	if r := wait(t, rig.send(context.Background(), "k", "denied", 1)); r.status != http.StatusTooManyRequests {
		t.Errorf("status %d, want 429", r.status)
	}
	if len(rig.joined) != 0 {
		t.Errorf("%d requests waited", len(rig.joined))
	}
}
