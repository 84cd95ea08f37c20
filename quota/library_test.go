package quota

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/quota/quotatest"
)

// calls returns how many times Redis ran each of names since its stats
// were last reset (INFO commandstats), and under name+" failed" how many
// of those failed.
func calls(t *testing.T, c *redis.Client, names ...string) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int, len(names))
	for _, line := range strings.Split(info, "\n") {
		for _, name := range names {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+name+":calls="); ok {
				n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				got[name] = n
				if _, failed, ok := strings.Cut(rest, "failed_calls="); ok {
					got[name+" failed"], _ = strconv.Atoi(strings.TrimSpace(failed))
				}
			}
		}
	}
	return got
}

// On Redis with functions the scripts run as the library's functions, by
// FCALL: loaded once, then no EVALSHA or EVAL at all.
func TestFunctionsCalledByName(t *testing.T) {
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t)
	c := quotatest.NewClient(t, srv.URL())
	s := NewRedis(c, WithPrefix(testPrefix(t)))
	p := mustPlan(t, "fcall", PerMinute(100), PerDay(1000))
	for range 10 {
		d := charge(t, s, "f", p, 2)
		if _, _, err := s.Settle(ctx, d.Receipt, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.ChargeOverdraft(ctx, "f", p, 1, "od-1"); err != nil {
		t.Fatal(err)
	}
	got := calls(t, c, "fcall", "function|load", "evalsha", "eval")
	if got["fcall"] < 21 || got["function|load"] != 1 || got["evalsha"] != 0 || got["eval"] != 0 {
		t.Errorf("commands %v: want 21 or more fcall after one function|load, no evalsha or eval", got)
	}
	if d := peek(t, s, "f", p); d.Limits[0].Used != 11 || d.Limits[1].Used != 11 {
		t.Errorf("used %v after ten charges of 2 settled at 1 and an overdraft of 1, want 11 in each", used(d))
	}
}

// A Redis without functions (here FCALL and FUNCTION renamed away, as a
// proxy or an ACL might refuse them) gets the same scripts by EVALSHA:
// every call succeeds, the first included, and the store stops trying
// FCALL after the first refusal.
func TestScriptsWithoutFunctions(t *testing.T) {
	ctx := context.Background()
	for _, missing := range []string{"FCALL", "FUNCTION"} {
		t.Run("no "+missing, func(t *testing.T) {
			srv := quotatest.StartRedisServer(t, "--rename-command", missing, "")
			c := quotatest.NewClient(t, srv.URL())
			s := NewRedis(c, WithPrefix(testPrefix(t)))
			p := mustPlan(t, "scripts", PerMinute(100))
			for i := range 5 {
				d := charge(t, s, "s", p, 3)
				if !d.Allowed || d.Limits[0].Used != int64(3*(i+1)) {
					t.Fatalf("charge %d: %+v", i, d)
				}
			}
			// A charge with a companion goes in one pipeline: by EVALSHA too.
			get := redis.NewStringCmd(ctx, "get", "nothing")
			if d, sent, err := s.ChargeWith(ctx, "s", p, 1, get); err != nil || !sent || !d.Allowed {
				t.Fatalf("ChargeWith: %+v, %v, %v", d, sent, err)
			}
			d := charge(t, s, "s", p, 1)
			if _, err := s.Refund(ctx, d.Receipt); err != nil {
				t.Fatal(err)
			}
			if d := peek(t, s, "s", p); d.Limits[0].Used != 16 {
				t.Errorf("used %d, want 16", d.Limits[0].Used)
			}
			got := calls(t, c, "fcall", "evalsha")
			if got["evalsha"] < 8 || got["fcall"] > 1 {
				t.Errorf("commands %v: want the calls by evalsha, fcall tried at most once", got)
			}
		})
	}
}

// Two versions of the library (a rolling deploy) live side by side: each
// is named by a digest of its text, so loading one never replaces the
// other's functions.
func TestLibraryNamedByItsText(t *testing.T) {
	name := func(lib string) string {
		first, _, _ := strings.Cut(lib, "\n")
		return strings.TrimPrefix(first, "#!lua name=")
	}
	if !strings.HasPrefix(library, "#!lua name=tileapi_") || !strings.HasPrefix(chargeFn.fn, name(library)+"_") {
		t.Fatalf("library %q, charge %q: want tileapi_<digest> and its functions after it", name(library), chargeFn.fn)
	}
	other := buildLibrary(&libScript{name: "charge", body: chargeLua + "\n-- another version"})
	if name(other) == name(library) {
		t.Errorf("two texts, one name %q", name(other))
	}
}

// An identity's counters get their TTL (PEXPIREAT, to the end of the last
// period) when a period ends later than the one set before, not at every
// charge, and a plan of shorter periods never shortens it: ten charges of
// a month make one PEXPIREAT, and a day's charges after them none, the
// counters still living to the month's end.
func TestCountersExpireOncePerPeriod(t *testing.T) {
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t)
	c := quotatest.NewClient(t, srv.URL())
	s := NewRedis(c, WithPrefix(testPrefix(t)))
	month := mustPlan(t, "month", PerMinute(1000), PerMonth(1000))
	day := mustPlan(t, "day", PerMinute(1000), PerDay(1000))
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		charge(t, s, "c", month, 1)
	}
	end := month.Limits[1].Period.spanAt(time.Now(), time.UTC).end
	ttl := func(when string) {
		t.Helper()
		got := time.Now().Add(c.PTTL(ctx, s.countersKey("c")).Val())
		if d := got.Sub(time.UnixMicro(end)); d < -time.Second || d > time.Second {
			t.Errorf("%s: the counters end at %v, want the month's end %v", when, got, time.UnixMicro(end))
		}
	}
	ttl("after ten charges of the month")
	for range 5 {
		charge(t, s, "c", day, 1)
	}
	ttl("after five charges of a day")
	if got := calls(t, c, "pexpireat"); got["pexpireat"] != 1 {
		t.Errorf("%d PEXPIREAT for fifteen charges in one month, want 1", got["pexpireat"])
	}
	if d := peek(t, s, "c", month); d.Limits[1].Used != 10 {
		t.Errorf("the month used %d, want 10", d.Limits[1].Used)
	}
}

// An admit writes its record and the header in one SETRANGE even when the
// room between them is large, as long as the chunk the script read holds
// it: a log of some 500 records of 6 bytes, one in and one out a charge,
// makes about one write a charge (SETRANGE, or SET when it is rewritten).
func TestOneWriteAnAdmit(t *testing.T) {
	ctx := context.Background()
	srv := quotatest.StartRedisServer(t)
	c := quotatest.NewClient(t, srv.URL())
	var tick int64
	s := NewRedis(c, WithPrefix(testPrefix(t)), withClock(func() time.Time { return epoch.Add(time.Duration(tick) * time.Millisecond) }))
	p := mustPlan(t, "big", Limit{Name: "w", Max: 1 << 20, Window: 500 * time.Millisecond})
	for ; tick < 1000; tick++ {
		charge(t, s, "b", p, 1)
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 500
	for range n {
		charge(t, s, "b", p, 1)
		tick++
	}
	got := calls(t, c, "setrange", "set")
	if writes := float64(got["setrange"]+got["set"]) / n; writes > 1.05 {
		t.Errorf("%v: %.2f writes a charge, want one", got, writes)
	}
	if d := peek(t, s, "b", p); d.Limits[0].Used != 499 { // the last charge was a tick ago
		t.Errorf("the window holds %d, want 499", d.Limits[0].Used)
	}
}
