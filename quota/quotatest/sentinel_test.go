package quotatest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A write the replica has is kept through the failover that promotes it;
// one made after its link was cut is not.
func TestSentinelsFailOver(t *testing.T) {
	s := StartSentinels(t)
	ctx := context.Background()
	primary := redis.NewClient(&redis.Options{Addr: s.Primary.Addr})
	defer primary.Close()
	if err := primary.Set(ctx, "kept", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := primary.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d replicas, %v", n, err)
	}
	s.CutReplica(t)
	if err := primary.Set(ctx, "lost", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.KillPrimary()
	t.Logf("the sentinels named the replica primary %v after the kill", s.WaitFailover(t, 20*time.Second))

	fo := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: MasterName, SentinelAddrs: s.Addrs})
	defer fo.Close()
	if err := fo.Set(ctx, "after", "1", 0).Err(); err != nil {
		t.Fatalf("a write through the sentinels after the failover: %v", err)
	}
	for key, want := range map[string]int64{"kept": 1, "lost": 0, "after": 1} {
		if n := fo.Exists(ctx, key).Val(); n != want {
			t.Errorf("%s: exists %d after the failover, want %d", key, n, want)
		}
	}
}
