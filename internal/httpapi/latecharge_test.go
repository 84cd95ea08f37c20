package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/inflight"
	"github.com/tileapi/tileapi/quota/quotatest"
	"github.com/tileapi/tileapi/quota/redisbatch"
)

// lateCharges is a client hook that holds the next n calls of the quota's
// functions, alone or in a pipeline, for d before they go on: with d past
// the halfway mark of the quota's budget, Redis answers that the charge
// came too late to be made.
type lateCharges struct {
	n atomic.Int32
	d time.Duration
}

func (h *lateCharges) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lateCharges) hold(cmds ...redis.Cmder) {
	if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "fcall" }) && h.n.Add(-1) >= 0 {
		time.Sleep(h.d)
	}
}

func (h *lateCharges) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.hold(cmd)
		return next(ctx, cmd)
	}
}

func (h *lateCharges) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.hold(cmds...)
		return next(ctx, cmds)
	}
}

// A request whose charge Redis answers as late is charged on the next
// try, through tileapi's own path: the in-flight slot taken in the
// charge's script, a tile's cache lookup in its round trip. It is served,
// charged its price once, counted in tileapi_quota_late_retries_total,
// and its slot is given back. The server fails closed, so a late charge
// not tried again would be a 503.
func TestLateChargeTriedAgainOnEveryRoute(t *testing.T) {
	const budget = time.Second // a late try is held 700 ms, past its halfway mark
	rdb := quotatest.NewClient(t, quotatest.StartRedisServer(t).URL())
	late := &lateCharges{d: budget * 7 / 10}
	rdb.AddHook(late) // before the batcher: a call is held before it is queued
	redisbatch.Enable(rdb)
	store := quota.NewRedis(rdb)
	slots := inflight.NewRedis(rdb)
	e := newEnv(t, with(func(c *Config) {
		c.Quota, c.InFlight, c.QuotaTimeout, c.FailClosed = store, slots, budget, true
	}))
	for i, path := range []string{
		"/v1/geofence/within?lng=2.35&lat=48.85&radius=5000",
		"/v1/tiles/places/9/259/176.mvt",
	} {
		// The plan "two": 1,000 units a minute, two requests in flight.
		before := quotaLeft(t, e)
		late.n.Store(1)
		resp := e.get(t, path, key("two")...)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Quota-Status") != "charged" {
			t.Fatalf("%s with a late charge: %d %q, want 200 charged", path, resp.StatusCode, resp.Header.Get("X-Quota-Status"))
		}
		price, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Cost"), 10, 64)
		if err != nil || price <= 0 {
			t.Fatalf("%s: X-RateLimit-Cost %q", path, resp.Header.Get("X-RateLimit-Cost"))
		}
		if after := quotaLeft(t, e); before-after != price {
			t.Errorf("%s: %d units used, want its price %d once: a late try was charged", path, before-after, price)
		}
		if n := metricValue(t, scrape(t, e), "tileapi_quota_late_retries_total"); n != float64(i+1) {
			t.Errorf("after %s: tileapi_quota_late_retries_total %v, want %d", path, n, i+1)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		keys, err := rdb.Keys(context.Background(), "*inflight*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			break
		}
		if n, _ := rdb.ZCard(context.Background(), keys[0]).Result(); n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the in-flight slots %v are still held 5 s after the answers", keys)
		}
	}
}

// quotaLeft returns the units the key of plan "two" has left, from
// /v1/quota, which charges nothing.
func quotaLeft(t *testing.T, e *env) int64 {
	t.Helper()
	resp := e.get(t, "/v1/quota", key("two")...)
	defer resp.Body.Close()
	return remaining(t, resp)
}

// metricValue reads the unlabelled metric name from a scrape; -1 if absent.
func metricValue(t *testing.T, metrics, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%q", line)
			}
			return f
		}
	}
	return -1
}
