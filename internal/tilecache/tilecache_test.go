package tilecache

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/quota/quotatest"
)

type cache interface {
	Get(ctx context.Context, key string) ([]byte, bool, error)
	Set(ctx context.Context, key string, tile []byte) error
}

func caches(t *testing.T) map[string]cache {
	c := quotatest.NewClient(t, testenv.RedisURL(t))
	prefix := fmt.Sprintf("tilecachetest:%d:", time.Now().UnixNano())
	return map[string]cache{
		"memory": NewMemory(1<<20, time.Minute),
		"redis":  NewRedis(c, prefix, time.Minute),
	}
}

func TestGetSet(t *testing.T) {
	ctx := context.Background()
	for name, c := range caches(t) {
		t.Run(name, func(t *testing.T) {
			if _, ok, err := c.Get(ctx, "v1/places/0/0/0"); ok || err != nil {
				t.Fatalf("empty cache: ok=%v err=%v", ok, err)
			}
			tile := []byte("\x1a\x02mvt")
			if err := c.Set(ctx, "v1/places/0/0/0", tile); err != nil {
				t.Fatal(err)
			}
			got, ok, err := c.Get(ctx, "v1/places/0/0/0")
			if err != nil || !ok || !bytes.Equal(got, tile) {
				t.Errorf("Get = %q, %v, %v", got, ok, err)
			}
			if _, ok, _ := c.Get(ctx, "v2/places/0/0/0"); ok {
				t.Error("another data version hit")
			}
			// An empty tile is a tile too.
			if err := c.Set(ctx, "v1/places/9/0/0", []byte{}); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := c.Get(ctx, "v1/places/9/0/0"); !ok {
				t.Error("empty tile not cached")
			}
		})
	}
}

func TestMemoryBoundAndTTL(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(0, 0)
	c := NewMemory(10, time.Minute)
	c.now = func() time.Time { return now }
	c.Set(ctx, "a", []byte("aaaa"))
	c.Set(ctx, "b", []byte("bbbb"))
	c.Get(ctx, "a") // a is now the most recently used
	c.Set(ctx, "c", []byte("cccc"))
	if _, ok, _ := c.Get(ctx, "b"); ok {
		t.Error("least recently used tile kept past the bound")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok, _ := c.Get(ctx, k); !ok {
			t.Errorf("%s evicted", k)
		}
	}
	if c.bytes > 10 {
		t.Errorf("holds %d bytes, bound 10", c.bytes)
	}
	c.Set(ctx, "huge", make([]byte, 11))
	if _, ok, _ := c.Get(ctx, "huge"); ok {
		t.Error("a tile larger than the cache was kept")
	}
	now = now.Add(time.Minute)
	if _, ok, _ := c.Get(ctx, "a"); ok {
		t.Error("expired tile served")
	}
}
