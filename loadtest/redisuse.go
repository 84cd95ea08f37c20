package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisInfo is what the throughput scenario needs of a client of the Redis
// a setup uses, to count what its requests made Redis do: a *redis.Client.
type RedisInfo interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
}

// RedisUse is what Redis did for a phase's requests, per request, from
// its own counters (INFO commandstats and INFO stats) read before and
// after the phase. The counters are the whole server's: on a Redis that
// serves others too, theirs are counted in.
type RedisUse struct {
	// Commands is each command's calls per request. Redis counts the
	// commands a script calls (redis.call) as well as those clients send:
	// fcall counts the functions run (evalsha the scripts), and their
	// zadd or get show beside it, so the sum is no count of round trips.
	Commands map[string]float64 `json:"commands_per_request"`
	// Total is the sum of Commands.
	Total float64 `json:"total_per_request"`
	// Reads is Redis's read events per request (total_reads_processed):
	// the round trips it served. A pipeline, or a batch of several
	// requests' calls, that arrives in one read counts once.
	Reads float64 `json:"reads_per_request"`
}

// redisCounters are Redis's counters at one moment.
type redisCounters struct {
	calls map[string]int64 // by command, from INFO commandstats
	reads int64            // total_reads_processed
}

// readRedisCounters reads c's command and read counters.
func readRedisCounters(ctx context.Context, c RedisInfo) (redisCounters, error) {
	text, err := c.Info(ctx, "commandstats", "stats").Result()
	if err != nil {
		return redisCounters{}, fmt.Errorf("loadtest: INFO commandstats: %w", err)
	}
	return parseRedisCounters(text)
}

// parseRedisCounters reads the lines "cmdstat_NAME:calls=N,..." and
// "total_reads_processed:N" of an INFO reply.
func parseRedisCounters(info string) (redisCounters, error) {
	rc := redisCounters{calls: map[string]int64{}, reads: -1}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		if name == "total_reads_processed" {
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return rc, fmt.Errorf("loadtest: INFO: %q: %w", sc.Text(), err)
			}
			rc.reads = n
			continue
		}
		cmd, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(value, ",")
		n, err := strconv.ParseInt(strings.TrimPrefix(calls, "calls="), 10, 64)
		if err != nil {
			return rc, fmt.Errorf("loadtest: INFO: %q: %w", sc.Text(), err)
		}
		rc.calls[cmd] = n
	}
	if rc.reads < 0 {
		return rc, fmt.Errorf("loadtest: INFO has no total_reads_processed")
	}
	return rc, nil
}

// use is what Redis did between before and rc, per request of n. The
// INFO call that read rc is left out: its command and its read.
func (rc redisCounters) use(before redisCounters, n int) *RedisUse {
	if n == 0 {
		return nil
	}
	u := &RedisUse{Commands: map[string]float64{}, Reads: float64(rc.reads-before.reads-1) / float64(n)}
	for cmd, calls := range rc.calls {
		if cmd == "info" {
			continue
		}
		if d := calls - before.calls[cmd]; d > 0 {
			u.Commands[cmd] = float64(d) / float64(n)
			u.Total += float64(d) / float64(n)
		}
	}
	return u
}
