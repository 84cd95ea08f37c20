package quotatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name the Sentinels of StartSentinels know the primary
// by.
const MasterName = "mymaster"

// Sentinels is a primary, its replica and three Sentinels monitoring them
// (quorum 2, the primary down after 1 s, a failover given 5 s), each a
// redis-server process owned by one test.
type Sentinels struct {
	Primary, Replica *RedisServer
	Addrs            []string // the Sentinels' addresses
}

// StartSentinels starts a primary, a replica of it (--replicaof) and three
// Sentinels (redis-server --sentinel, with a sentinel.conf of their own) on
// free loopback ports, none persisting, and waits until every Sentinel
// knows the replica and the two other Sentinels: until then a failover
// could not be agreed on. Everything is killed when tb ends. Where no
// redis-server is on PATH it fails tb, or skips it under
// TEST_SKIP_MISSING.
func StartSentinels(tb testing.TB) *Sentinels {
	tb.Helper()
	// A primary waits 5 s by default before it syncs a replica, for more to
	// come.
	s := &Sentinels{Primary: StartRedisServer(tb, "--repl-diskless-sync-delay", "0")}
	_, primaryPort, _ := strings.Cut(s.Primary.Addr, ":")
	s.Replica = StartRedisServer(tb, "--replicaof", "127.0.0.1", primaryPort)
	if err := waitLinked(s.Primary.Addr, s.Replica.Addr, 10*time.Second); err != nil {
		tb.Fatal(err)
	}
	// Each Sentinel is told of the others up front (known-sentinel, by
	// their ids), as it would learn them from the primary's hello channel in
	// a few seconds; the replica it finds in the primary's INFO at once.
	ports, ids := make([]int, 3), make([]string, 3)
	for i := range ports {
		var err error
		if ports[i], err = FreePort(); err != nil {
			tb.Fatal(err)
		}
		id := make([]byte, 20)
		_, _ = rand.Read(id)
		ids[i] = hex.EncodeToString(id)
	}
	for i, port := range ports {
		dir := filepath.Join(tb.TempDir(), "sentinel"+strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		conf := fmt.Appendf(nil, `bind 127.0.0.1
port %d
dir %s
sentinel myid %s
sentinel monitor %s 127.0.0.1 %s 2
sentinel down-after-milliseconds %[4]s 1000
sentinel failover-timeout %[4]s 5000
sentinel parallel-syncs %[4]s 1
`, port, dir, ids[i], MasterName, primaryPort)
		for j := range ports {
			if j != i {
				conf = fmt.Appendf(conf, "sentinel known-sentinel %s 127.0.0.1 %d %s\n", MasterName, ports[j], ids[j])
			}
		}
		// Sentinel rewrites its configuration file as it learns: it must be
		// a file of its own, writable.
		file := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(file, conf, 0o644); err != nil {
			tb.Fatal(err)
		}
		sn := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, args: []string{file, "--sentinel"}}
		if err := sn.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(sn.Stop)
		s.Addrs = append(s.Addrs, sn.Addr)
	}
	err := s.poll(15*time.Second, func(ctx context.Context, c *redis.SentinelClient) (bool, error) {
		m, err := c.Master(ctx, MasterName).Result()
		return m["num-slaves"] == "1" && m["num-other-sentinels"] == "2", err
	})
	if err != nil {
		tb.Fatalf("quotatest: the sentinels did not find each other and the replica: %v", err)
	}
	return s
}

// URL is the REDIS_URL of the primary through the Sentinels:
// redis://sentinel1?master_name=mymaster&addr=sentinel2&addr=sentinel3.
func (s *Sentinels) URL() string {
	return "redis://" + s.Addrs[0] + "?master_name=" + MasterName + "&addr=" + strings.Join(s.Addrs[1:], "&addr=")
}

// KillPrimary kills the primary with SIGKILL, as a crash would: what it
// acknowledged and had not sent to its replica is lost.
func (s *Sentinels) KillPrimary() { s.Primary.Stop() }

// CutReplica cuts the replica's link to the primary (it replicates from an
// address where nothing listens), so that from now on it lags behind by
// every write: a replica that lost its link just before its primary died.
// It keeps its data, and may still be promoted.
func (s *Sentinels) CutReplica(tb testing.TB) {
	tb.Helper()
	port, err := FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Replica.Addr})
	defer c.Close()
	if err := c.Do(context.Background(), "REPLICAOF", "127.0.0.1", strconv.Itoa(port)).Err(); err != nil {
		tb.Fatal(err)
	}
}

// WaitFailover waits, up to timeout, until every Sentinel names the
// replica as the primary (SENTINEL get-master-addr-by-name), and returns
// how long that took.
func (s *Sentinels) WaitFailover(tb testing.TB, timeout time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	err := s.poll(timeout, func(ctx context.Context, c *redis.SentinelClient) (bool, error) {
		a, err := c.GetMasterAddrByName(ctx, MasterName).Result()
		return len(a) == 2 && a[0]+":"+a[1] == s.Replica.Addr, err
	})
	if err != nil {
		tb.Fatalf("quotatest: no failover to the replica within %v: %v", timeout, err)
	}
	return time.Since(start)
}

// poll asks every Sentinel until ok holds for each, or timeout passes; the
// error is the last one seen, if any.
func (s *Sentinels) poll(timeout time.Duration, ok func(context.Context, *redis.SentinelClient) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for _, addr := range s.Addrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			done, err := ok(ctx, c)
			cancel()
			if done {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				if err == nil {
					err = fmt.Errorf("not yet at %s", addr)
				}
				return err
			}
			time.Sleep(20 * time.Millisecond)
		}
		c.Close()
	}
	return nil
}

// waitLinked waits until the replica at addr has its link to its primary
// up, and acknowledges all the primary sent (WAIT): after a diskless sync
// a primary may hold back the writes it replicates until the replica's
// first acknowledgement, up to a second later.
func waitLinked(primary, replica string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: replica, MaxRetries: -1})
	defer c.Close()
	for {
		info, _ := c.Info(ctx, "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("quotatest: replica %s did not link to its primary", replica)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p := redis.NewClient(&redis.Options{Addr: primary, MaxRetries: -1})
	defer p.Close()
	if n, err := p.Wait(ctx, 1, timeout).Result(); err != nil || n != 1 {
		return fmt.Errorf("quotatest: replica %s did not acknowledge its primary: %d acknowledged, %v", replica, n, err)
	}
	return nil
}
