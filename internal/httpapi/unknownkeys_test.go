package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/testenv"
)

// countingKeys is the test key store, counting the lookups that reach it.
type countingKeys struct {
	*keys.Memory
	lookups atomic.Int64
}

func (c *countingKeys) LookupEntry(ctx context.Context, hash []byte) (keys.Entry, error) {
	c.lookups.Add(1)
	return c.Memory.LookupEntry(ctx, hash)
}

// withCountingKeys finds keys through an index of a counting store, and
// guards against unknown keys with a limit of n.
func withCountingKeys(store **countingKeys, n int64) option {
	return func(t *testing.T, c *Config) {
		ks := keys.NewMemory()
		for _, p := range []string{"free", "pro"} {
			if _, err := ks.Add(context.Background(), p, p, "key-"+p); err != nil {
				t.Fatal(err)
			}
		}
		*store = &countingKeys{Memory: ks}
		c.Keys = keys.NewIndex(*store, time.Minute)
		c.KeyAdmin = ks
		c.UnknownKeys = n
		c.TrustedProxies = []string{"127.0.0.1/32"}
	}
}

// quotaModes are the quota stores the guard is tested with.
var quotaModes = []struct {
	name string
	opts func(t *testing.T) []option
}{
	{"memory quota", func(*testing.T) []option { return nil }},
	{"redis quota", func(t *testing.T) []option { return []option{withRedis(testenv.RedisURL(t))} }},
}

// A flood of made-up keys from one address reaches the key store as many
// times as the guard's limit, then is answered 429 without a lookup; keys
// in the index, and other addresses, are never refused.
func TestUnknownKeyFlood(t *testing.T) {
	for _, mode := range quotaModes {
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
			if n := store.lookups.Load(); n != 5 {
				t.Fatalf("%d lookups after five unknown keys (and an indexed one), want 5", n)
			}

			var p problem
			resp := from(flood, "made-up-5")
			decode(t, resp, http.StatusTooManyRequests, &p)
			ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			if p.Code != "too-many-unknown-keys" || ra < 1 || ra > 60 {
				t.Errorf("sixth unknown key: %+v, Retry-After %q", p, resp.Header.Get("Retry-After"))
			}
			// An unknown key already looked up is answered from memory.
			decode(t, from(flood, "made-up-0"), http.StatusUnauthorized, &p)
			// A key in the index is never refused, however long the flood.
			for range 20 {
				from(flood, fmt.Sprintf("made-up-more-%d", time.Now().UnixNano()))
				if resp := from(flood, "key-pro"); resp.StatusCode != 200 {
					t.Fatalf("an indexed key from the flooding address: status %d", resp.StatusCode)
				}
			}
			if n := store.lookups.Load(); n != 5 {
				t.Errorf("%d lookups after the guard closed, want still 5", n)
			}

			// A key made since the refresh, on another server: from another
			// address it is looked up at once; from the flooding one it is
			// found by the refresh the guard makes before refusing (at most
			// once a second).
			if _, err := store.Add(context.Background(), "new", "free", "key-new"); err != nil {
				t.Fatal(err)
			}
			if resp := from("203.0.113.9", "key-new"); resp.StatusCode != 200 {
				t.Errorf("a new key from another address: status %d", resp.StatusCode)
			}
			if _, err := store.Add(context.Background(), "newer", "free", "key-newer"); err != nil {
				t.Fatal(err)
			}
			// Until a second has passed since the last refresh, the key is
			// refused like a made-up one; then the refresh finds it.
			blocks := 21
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				resp := from(flood, "key-newer")
				if resp.StatusCode == http.StatusOK {
					break
				}
				decode(t, resp, http.StatusTooManyRequests, &p)
				if p.Code != "too-many-unknown-keys" {
					t.Fatalf("a new key from the flooding address: %+v", p)
				}
				blocks++
				if time.Now().After(deadline) {
					t.Fatalf("a new key from the flooding address is still refused 10 s after it was made: the guard's refresh, at most once a second, never found it")
				}
			}
			if m, want := scrape(t, e), fmt.Sprintf("tileapi_unknown_key_blocks_total %d\n", blocks); !strings.Contains(m, want) {
				t.Errorf("want the %d refusals counted in tileapi_unknown_key_blocks_total:\n%s", blocks, grepLines(m, "unknown_key"))
			}
		})
	}
}

// Concurrent made-up keys cannot overrun the guard: each lookup is charged
// before it is made, in one atomic decision.
func TestUnknownKeyGuardConcurrent(t *testing.T) {
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			var store *countingKeys
			// A budget no busy machine runs out of: a charge that timed out
			// would fall back to the in-process allowance.
			roomy := with(func(c *Config) { c.QuotaTimeout = 5 * time.Second })
			e := newEnv(t, append(mode.opts(t), withCountingKeys(&store, 30), roomy)...)
			var wg sync.WaitGroup
			var refused atomic.Int64
			for i := range 64 {
				wg.Go(func() {
					resp := e.get(t, contains, "X-API-Key", fmt.Sprint("made-up-", i), "X-Forwarded-For", "198.51.100.7")
					if resp.StatusCode == http.StatusTooManyRequests {
						refused.Add(1)
					}
				})
			}
			wg.Wait()
			if n := store.lookups.Load(); n != 30 {
				t.Errorf("64 concurrent made-up keys made %d lookups, want 30", n)
			}
			if n := refused.Load(); n != 34 {
				t.Errorf("%d refused, want 34", n)
			}
		})
	}
}

// A request whose client address cannot be read (a trusted proxy sent
// garbage in X-Forwarded-For) is guarded all the same, with every other
// such request.
func TestUnknownKeyGuardNoAddress(t *testing.T) {
	var store *countingKeys
	e := newEnv(t, withCountingKeys(&store, 3))
	for i := range 6 {
		e.get(t, contains, "X-API-Key", fmt.Sprint("made-up-", i), "X-Forwarded-For", "not-an-address")
	}
	if n := store.lookups.Load(); n != 3 {
		t.Errorf("6 made-up keys without a client address made %d lookups, want 3", n)
	}
	if resp := e.get(t, contains, "X-API-Key", "key-free", "X-Forwarded-For", "not-an-address"); resp.StatusCode != 200 {
		t.Errorf("an indexed key without a client address: status %d", resp.StatusCode)
	}
}

// While the quota store is down, the guard keeps an allowance in process:
// the flood still does not reach the key store.
func TestUnknownKeyGuardQuotaDown(t *testing.T) {
	var store *countingKeys
	e := newEnv(t, withRedis("redis://127.0.0.1:1/0"), withCountingKeys(&store, 4))
	for i := range 10 {
		e.get(t, contains, "X-API-Key", fmt.Sprint("made-up-", i), "X-Forwarded-For", "198.51.100.7")
	}
	if n := store.lookups.Load(); n != 4 {
		t.Errorf("10 made-up keys with the quota store down made %d lookups, want 4", n)
	}
	resp := e.get(t, contains, "X-API-Key", "key-free", "X-Forwarded-For", "198.51.100.7")
	if resp.StatusCode != 200 || resp.Header.Get(headerStatus) != statusPending {
		t.Errorf("an indexed key with the quota store down: status %d, %s %q", resp.StatusCode, headerStatus, resp.Header.Get(headerStatus))
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

// grepLines returns the lines of s that contain substr.
func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
