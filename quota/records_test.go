package quota_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// LogKey names the key a charge writes, under the store's prefix and one
// for each identity, and Reset removes it.
func TestLogKey(t *testing.T) {
	ctx := context.Background()
	c := quotatest.NewClient(t, quotatest.RedisURL(t))
	prefix := fmt.Sprintf("quotatest:%d:logkey:", time.Now().UnixNano())
	s := quota.NewRedis(c, quota.WithPrefix(prefix))
	plan, err := quota.NewPlan("p", quota.PerMinute(10))
	if err != nil {
		t.Fatal(err)
	}
	key := s.LogKey("alice")
	if !strings.HasPrefix(key, prefix) || key == s.LogKey("bob") {
		t.Fatalf("LogKey(alice) %q, LogKey(bob) %q: want two keys under %q", key, s.LogKey("bob"), prefix)
	}
	if n := c.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("%q exists before a charge", key)
	}
	if _, err := s.Charge(ctx, "alice", plan, 3); err != nil {
		t.Fatal(err)
	}
	if typ := c.Type(ctx, key).Val(); typ != "string" {
		t.Errorf("after a charge %q is of type %q, want the log, a string", key, typ)
	}
	if n := c.Exists(ctx, s.LogKey("bob")).Val(); n != 0 {
		t.Errorf("alice's charge wrote bob's key")
	}
	if err := s.Reset(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, key).Val(); n != 0 {
		t.Errorf("%q remains after Reset", key)
	}
}
