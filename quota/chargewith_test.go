package quota

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota/quotatest"
)

// ChargeWith sends its companions in the charge's one round trip, on a
// single server and on a cluster: each gets its own result, whatever the
// decision, and the charge is the one Charge would make.
func TestChargeWithSendsCompanions(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]rediser{"single": redisClient(t), "cluster": clusterClient(t)} {
		t.Run(name, func(t *testing.T) {
			prefix := testPrefix(t)
			s := NewRedis(c, WithPrefix(prefix))
			p := mustPlan(t, "p", Limit{Name: "minute", Max: 3, Window: time.Minute})
			// A key of another hash slot than the log's: on a cluster the
			// pipeline goes to two nodes at once.
			key := prefix + "{elsewhere}"
			if err := c.(redis.Cmdable).Set(ctx, key, "tile", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{true, true, true, false} {
				get := redis.NewStringCmd(ctx, "get", key)
				missing := redis.NewStringCmd(ctx, "get", key+":missing")
				d, sent, err := s.ChargeWith(ctx, "id", p, 1, get, missing)
				if err != nil || !sent {
					t.Fatalf("charge %d: sent %v, %v", i, sent, err)
				}
				if d.Allowed != want {
					t.Errorf("charge %d: allowed %v, want %v", i, d.Allowed, want)
				}
				if v, err := get.Result(); v != "tile" || err != nil {
					t.Errorf("charge %d: the companion read %q, %v", i, v, err)
				}
				if err := missing.Err(); !errors.Is(err, redis.Nil) {
					t.Errorf("charge %d: a companion of a missing key: %v, want redis.Nil", i, err)
				}
			}
			if u := used(peek(t, s, "id", p)); u[0] != 3 {
				t.Errorf("used %v after three charges admitted and one denied, want 3", u)
			}
		})
	}
}

// A charge refused before any I/O sends nothing along; neither does a
// denial the deny cache remembers. A store that cannot send companions
// (Memory) charges alone, and says so.
func TestChargeWithSendsNothingWhenRefusedEarly(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	s := NewRedis(c, WithPrefix(testPrefix(t)))
	p := mustPlan(t, "p", Limit{Name: "minute", Max: 2, Window: time.Minute})

	get := redis.NewStringCmd(ctx, "get", "never-sent")
	if _, sent, err := s.ChargeWith(ctx, "id", p, 3, get); sent || !errors.Is(err, ErrTooCostly) {
		t.Errorf("a charge above the plan's max: sent %v, %v; want nothing sent, ErrTooCostly", sent, err)
	}
	if _, sent, err := s.ChargeWith(ctx, "", p, 1, get); sent || !errors.Is(err, ErrInvalid) {
		t.Errorf("an empty identity: sent %v, %v; want nothing sent, ErrInvalid", sent, err)
	}
	if get.Val() != "" || get.Err() != nil {
		t.Errorf("a companion never sent holds %q, %v", get.Val(), get.Err())
	}

	cache := NewDenyCache(s)
	for range 2 {
		if d, sent, err := cache.ChargeWith(ctx, "id", p, 1, redis.NewStringCmd(ctx, "get", "k")); err != nil || !sent || !d.Allowed {
			t.Fatalf("through the deny cache: %+v, sent %v, %v", d, sent, err)
		}
	}
	if d, sent, err := cache.ChargeWith(ctx, "id", p, 1, redis.NewStringCmd(ctx, "get", "k")); err != nil || !sent || d.Allowed {
		t.Fatalf("the third charge: allowed %v, sent %v, %v; want a denial from Redis", d.Allowed, sent, err)
	}
	if d, sent, err := cache.ChargeWith(ctx, "id", p, 1, redis.NewStringCmd(ctx, "get", "k")); err != nil || sent || d.Allowed {
		t.Errorf("the denial remembered: allowed %v, sent %v, %v; want denied with nothing sent", d.Allowed, sent, err)
	}

	mem := NewDenyCache(NewMemory(nil))
	if d, sent, err := mem.ChargeWith(ctx, "id", p, 1, redis.NewStringCmd(ctx, "get", "k")); err != nil || sent || !d.Allowed {
		t.Errorf("in memory: allowed %v, sent %v, %v; want charged alone", d.Allowed, sent, err)
	}
}

// A server that does not have the library yet (a restart, FUNCTION FLUSH)
// still charges once: the pipeline's FCALL fails alone, and the function
// is called on its own once the library is loaded.
func TestChargeWithAfterFlush(t *testing.T) {
	ctx := context.Background()
	// A server of its own: a flush of the shared one would hit other
	// tests' pipelined calls.
	c := quotatest.NewClient(t, quotatest.StartRedisServer(t).URL())
	s := NewRedis(c, WithPrefix(testPrefix(t)))
	p := mustPlan(t, "p", Limit{Name: "minute", Max: 5, Window: time.Minute})
	charge(t, s, "warm", p, 1) // the library loaded, then lost
	if err := c.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	get := redis.NewStringCmd(ctx, "get", "k")
	if d, sent, err := s.ChargeWith(ctx, "id", p, 2, get); err != nil || !sent || !d.Allowed {
		t.Fatalf("after FUNCTION FLUSH: %+v, sent %v, %v", d, sent, err)
	}
	if u := used(peek(t, s, "id", p)); u[0] != 2 {
		t.Errorf("used %v, want 2: charged once", u)
	}
	// The pipeline's FCALL failed; the one after the load did not.
	if got := calls(t, c, "fcall", "function|load"); got["fcall failed"] != 1 || got["function|load"] != 1 {
		t.Errorf("commands %v: want one failed fcall, one load", got)
	}
}
