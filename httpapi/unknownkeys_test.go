package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/keys"
)

// countingKeys is the test key store, counting the lookups that reach it.
type countingKeys struct {
	*keys.Memory
	lookups atomic.Int64
}

func (c *countingKeys) Lookup(ctx context.Context, hash []byte) (keys.Key, error) {
	c.lookups.Add(1)
	return c.Memory.Lookup(ctx, hash)
}

// withCountingKeys resolves keys through a counting store with a cache that
// outlives the test, and guards against unknown keys with a limit of n.
func withCountingKeys(store **countingKeys, n int64) option {
	return func(t *testing.T, c *Config) {
		ks := keys.NewMemory()
		for _, p := range []string{"free", "pro"} {
			if _, err := ks.Add(context.Background(), p, p, "key-"+p); err != nil {
				t.Fatal(err)
			}
		}
		*store = &countingKeys{Memory: ks}
		c.Keys = keys.NewResolver(*store, time.Minute)
		c.UnknownKeys = n
		c.TrustedProxies = []string{"127.0.0.1/32"}
	}
}

// A flood of made-up keys from one address reaches the key store as many
// times as the guard's limit, then is answered 429 without a lookup; cached
// keys, and other addresses, are not affected.
func TestUnknownKeyFlood(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts func(t *testing.T) []option
	}{
		{"memory quota", func(*testing.T) []option { return nil }},
		{"redis quota", func(t *testing.T) []option { return []option{withRedis(testenv.RedisURL(t))} }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			var store *countingKeys
			e := newEnv(t, append(mode.opts(t), withCountingKeys(&store, 5))...)
			from := func(ip string, secret string) *http.Response {
				return e.get(t, contains, "X-API-Key", secret, "X-Forwarded-For", ip)
			}
			const flood = "198.51.100.7"
			if resp := from(flood, "key-free"); resp.StatusCode != 200 {
				t.Fatalf("a known key: status %d", resp.StatusCode)
			}
			for i := range 5 {
				var p problem
				decode(t, from(flood, fmt.Sprintf("made-up-%d", i)), http.StatusUnauthorized, &p)
			}
			if n := store.lookups.Load(); n != 6 {
				t.Fatalf("%d lookups after one known and five unknown keys, want 6", n)
			}

			var p problem
			resp := from(flood, "made-up-5")
			decode(t, resp, http.StatusTooManyRequests, &p)
			ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			if p.Code != "too-many-unknown-keys" || ra < 1 || ra > 60 {
				t.Errorf("sixth unknown key: %+v, Retry-After %q", p, resp.Header.Get("Retry-After"))
			}
			// An unknown key already cached costs no lookup: it is answered.
			decode(t, from(flood, "made-up-0"), http.StatusUnauthorized, &p)
			// So is a known one.
			if resp := from(flood, "key-free"); resp.StatusCode != 200 {
				t.Errorf("a cached known key from the flooding address: status %d", resp.StatusCode)
			}
			// A key this server has not seen waits, from that address only.
			decode(t, from(flood, "key-pro"), http.StatusTooManyRequests, &p)
			if n := store.lookups.Load(); n != 6 {
				t.Errorf("%d lookups after the guard closed, want still 6", n)
			}
			if resp := from("203.0.113.9", "key-pro"); resp.StatusCode != 200 {
				t.Errorf("a known key from another address: status %d", resp.StatusCode)
			}
			if m := scrape(t, e); !strings.Contains(m, "tileapi_unknown_key_blocks_total 2") {
				t.Error("the two refusals are not counted in tileapi_unknown_key_blocks_total")
			}
		})
	}
}

// With the guard off every made-up key is looked up.
func TestUnknownKeyGuardOff(t *testing.T) {
	var store *countingKeys
	e := newEnv(t, withCountingKeys(&store, -1))
	for i := range 10 {
		var p problem
		decode(t, e.get(t, contains, "X-API-Key", fmt.Sprintf("made-up-%d", i)), http.StatusUnauthorized, &p)
	}
	if n := store.lookups.Load(); n != 10 {
		t.Errorf("%d lookups for 10 unknown keys, want 10", n)
	}
}
