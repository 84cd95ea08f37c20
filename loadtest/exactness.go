package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/httpapi"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/quota"
)

// DefaultPrefix starts the quota's keys of a tileapi server run with its
// default -redis-prefix: "tileapi:", then the quota's "q:".
const DefaultPrefix = "tileapi:q:"

// ExactnessConfig is a run of the exactness scenario.
type ExactnessConfig struct {
	// Targets are the base URLs of tileapi servers sharing one Redis.
	Targets []string
	// Keys are charged by the clients. A key whose ID is 0 is looked up by
	// its prefix in every target's admin API, with AdminToken; all targets
	// must agree.
	Keys       []Key
	AdminToken string
	// AdminTargets are the admin listeners of Targets, in their order,
	// where key ids are looked up; nil: Targets themselves (servers with
	// TILEAPI_ADMIN_ON_PUBLIC).
	AdminTargets []string
	// Redis is the servers' Redis, whose quota log is read; Prefix is their
	// quota key prefix (DefaultPrefix if empty).
	Redis  redis.UniversalClient
	Prefix string
	// ClientsPerKey clients send requests for each key, spread over the
	// targets, until Duration has passed or MaxRequests have been sent.
	ClientsPerKey int
	Duration      time.Duration
	MaxRequests   int
	Seed          uint64
	// Progress shows a bar; nil for none.
	Progress io.Writer
}

// ExactnessReport is the outcome of the exactness scenario.
type ExactnessReport struct {
	Targets       int           `json:"targets"`
	ClientsPerKey int           `json:"clients_per_key"`
	Duration      time.Duration `json:"duration_ns"`
	Start         int64         `json:"start_us"`
	End           int64         `json:"end_us"`
	Requests      int           `json:"requests"`
	Keys          []KeyVerdict  `json:"keys"`
	OK            bool          `json:"ok"`
}

// KeyVerdict is the judgement of one key.
type KeyVerdict struct {
	Key Key `json:"key"`
	// Limits holds, per limit of the key's plan, the check of every trailing
	// window over the admissions Redis logged.
	Limits []LimitVerdict `json:"limits"`
	// What the clients saw.
	Requests     int   `json:"requests"`
	Admitted     int   `json:"admitted"` // 200s
	AdmittedCost int64 `json:"admitted_cost"`
	Denied       int   `json:"denied"` // 429s
	DeniedCost   int64 `json:"denied_cost"`
	// Unavailable counts 503s of servers failing closed when Redis did not
	// answer in time; Unmetered counts 200s of servers failing open then,
	// served outside the quota.
	Unavailable int `json:"unavailable"`
	Unmetered   int `json:"unmetered"`
	Errors      int `json:"errors"`
	// Unjustified counts 429s whose binding limit said it had room for the
	// request's cost.
	Unjustified int `json:"unjustified"`
	// What Redis logged.
	LogEntries int   `json:"log_entries"`
	LogCost    int64 `json:"log_cost"`
	// Problems says what is wrong; the key passes if there is nothing.
	Problems []string `json:"problems,omitempty"`
	OK       bool     `json:"ok"`

	// For the plots: the logged admissions, and the denials as the
	// clients timed them.
	Admissions []Admission `json:"-"`
	Denials    []Admission `json:"-"`
}

// LimitVerdict is the judgement of one limit of a key.
type LimitVerdict struct {
	WindowCheck
	// Denied counts the 429s this limit decided; MinDeniedCost is the
	// cheapest of them.
	Denied        int   `json:"denied"`
	MinDeniedCost int64 `json:"min_denied_cost,omitempty"`
	// Reached: some window admitted more than Max - MinDeniedCost, as it
	// must have when this limit turned a request away. True when nothing
	// was denied.
	Reached bool `json:"reached"`
}

// Exactness runs the scenario and judges every key: for each limit, the
// admitted cost in every trailing window never exceeded the max (from the
// Redis log, read while the run lasts so that nothing expires unread); the
// log holds exactly the 200s the clients received (count and sum of
// X-RateLimit-Cost); every 429 was due (its binding limit had less room
// than its cost); and a limit that denied anything had been filled to
// within that request's cost. Any failure makes the report not OK.
func Exactness(ctx context.Context, c ExactnessConfig) (*ExactnessReport, error) {
	if len(c.Targets) == 0 || len(c.Keys) == 0 || c.ClientsPerKey < 1 || c.Duration <= 0 || c.MaxRequests < 1 {
		return nil, errors.New("loadtest: exactness needs targets, keys, clients, a duration and a request bound")
	}
	if c.AdminTargets == nil {
		c.AdminTargets = c.Targets
	}
	if len(c.AdminTargets) != len(c.Targets) {
		return nil, errors.New("loadtest: exactness needs an admin target for each target")
	}
	for _, t := range append(slices.Clone(c.Targets), c.AdminTargets...) {
		if err := CheckLoopback(t); err != nil {
			return nil, err
		}
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	hc := newHTTPClient(len(c.Keys) * c.ClientsPerKey)
	ks, err := resolveKeys(ctx, hc, c.AdminTargets, c.Keys, c.AdminToken)
	if err != nil {
		return nil, err
	}
	limits, err := planLimits(ctx, hc, c.Targets, ks)
	if err != nil {
		return nil, err
	}
	identities := make([]string, len(ks))
	longest := time.Duration(0)
	for i, k := range ks {
		identities[i] = httpapi.KeyIdentity(keys.Key{ID: k.ID}) // planLimits refused keys of a customer
		for _, l := range limits[i] {
			longest = max(longest, l.Window)
		}
	}
	store := quota.NewRedis(c.Redis, quota.WithPrefix(c.Prefix))
	if err := waitAbsent(ctx, store, identities, longest+time.Second); err != nil {
		return nil, err
	}

	// Read the logs while the load runs: an entry stays in the log at least
	// one longest window after its admission, so reading every quarter of
	// it misses none.
	logs := newLogReader(store, identities)
	stopReading := logs.every(min(longest/4, 500*time.Millisecond))

	rep := &ExactnessReport{Targets: len(c.Targets), ClientsPerKey: c.ClientsPerKey, Duration: c.Duration, Start: time.Now().UnixMicro()}
	results := drive(ctx, len(ks)*c.ClientsPerKey, c.Duration, c.MaxRequests, c.Seed, c.Progress, "exactness",
		func(ctx context.Context, w int, r *rand.Rand) Result {
			k, t := w/c.ClientsPerKey, w%len(c.Targets)
			res := do(ctx, hc, c.Targets[t], ks[k].Secret, exactnessMix(r))
			res.Key, res.Target = k, t
			return res
		})
	rep.End = time.Now().UnixMicro()
	if err := stopReading(); err != nil {
		return nil, err
	}
	rep.Requests = len(results)
	rep.OK = true
	for i, k := range ks {
		v := judge(k, limits[i], logs.admissions(i), results, i)
		rep.OK = rep.OK && v.OK
		rep.Keys = append(rep.Keys, v)
	}
	return rep, nil
}

// judge checks one key's admissions against its limits and its clients'
// results.
func judge(k Key, limits []Limit, adm []Admission, results []Result, key int) KeyVerdict {
	v := KeyVerdict{Key: k, Admissions: adm, LogEntries: len(adm)}
	for _, a := range adm {
		v.LogCost += a.Cost
	}
	var errs []string
	for _, r := range results {
		if r.Key != key {
			continue
		}
		v.Requests++
		switch {
		case r.Status == http.StatusOK && (r.Quota == "unmetered" || r.Quota == "unmetered-pending"):
			v.Unmetered++
		case r.Status == http.StatusServiceUnavailable && r.Code == codeUnavailable:
			v.Unavailable++
		case r.Status == http.StatusOK:
			v.Admitted++
			v.AdmittedCost += r.held()
		case r.Status == http.StatusTooManyRequests:
			v.Denied++
			v.DeniedCost += r.Cost
			v.Denials = append(v.Denials, Admission{At: r.Start, Cost: r.Cost})
			if r.Remaining >= r.Cost {
				v.Unjustified++
			}
		default:
			v.Errors++
			if len(errs) < 3 {
				errs = append(errs, r.Route+": "+r.Err)
			}
		}
	}
	for _, l := range limits {
		lv := LimitVerdict{WindowCheck: CheckWindows(adm, l)}
		for _, r := range results {
			if r.Key == key && r.Status == http.StatusTooManyRequests && r.Limit == l.Name {
				lv.Denied++
				if lv.MinDeniedCost == 0 || r.Cost < lv.MinDeniedCost {
					lv.MinDeniedCost = r.Cost
				}
			}
		}
		lv.Reached = lv.Denied == 0 || lv.Peak > l.Max-lv.MinDeniedCost
		v.Limits = append(v.Limits, lv)
		if lv.Violations > 0 {
			v.Problems = append(v.Problems, fmt.Sprintf("limit %q (%d per %v): %d trailing windows over the max, the first ending at %s, peak %d",
				l.Name, l.Max, l.Window, lv.Violations, time.UnixMicro(lv.FirstViolation).UTC().Format(time.StampMicro), lv.Peak))
		}
		if !lv.Reached {
			v.Problems = append(v.Problems, fmt.Sprintf("limit %q denied %d requests, yet no window admitted more than %d - %d (peak %d)",
				l.Name, lv.Denied, l.Max, lv.MinDeniedCost, lv.Peak))
		}
	}
	// The log must hold every 200. It may hold more only where a server
	// gave up waiting for a charge that Redis then made: one per 503 at most,
	// an overcount, never an undercount.
	if extra := v.LogEntries - v.Admitted; extra < 0 || extra > v.Unavailable || v.LogCost < v.AdmittedCost || (extra == 0 && v.LogCost != v.AdmittedCost) {
		v.Problems = append(v.Problems, fmt.Sprintf("Redis logged %d admissions costing %d; the clients received %d 200s costing %d (and %d 503s)",
			v.LogEntries, v.LogCost, v.Admitted, v.AdmittedCost, v.Unavailable))
	}
	if v.Unmetered > 0 {
		v.Problems = append(v.Problems, fmt.Sprintf("%d requests were served unmetered: the quota store did not answer in time and the servers fail open", v.Unmetered))
	}
	if v.Unjustified > 0 {
		v.Problems = append(v.Problems, fmt.Sprintf("%d 429s had room for their cost", v.Unjustified))
	}
	if v.Errors > 0 {
		v.Problems = append(v.Problems, fmt.Sprintf("%d requests failed: %s", v.Errors, strings.Join(errs, "; ")))
	}
	v.OK = len(v.Problems) == 0
	return v
}

// resolveKeys fills in the id of every key that lacks one from each
// target's admin API, and checks that the targets agree.
func resolveKeys(ctx context.Context, hc *http.Client, targets []string, ks []Key, token string) ([]Key, error) {
	ks = slices.Clone(ks)
	for i := range ks {
		if ks[i].ID != 0 {
			continue
		}
		if token == "" {
			return nil, errors.New("loadtest: key ids unknown and no admin token to look them up")
		}
		prefix := keys.PrefixOf(ks[i].Secret)
		for _, t := range targets {
			var list struct {
				Keys []struct {
					ID     int64  `json:"id"`
					Prefix string `json:"prefix"`
				} `json:"keys"`
			}
			if err := getJSON(ctx, hc, t+"/admin/keys", http.Header{"Authorization": {"Bearer " + token}}, &list); err != nil {
				return nil, err
			}
			var id int64
			for _, k := range list.Keys {
				if k.Prefix == prefix {
					if id != 0 {
						return nil, fmt.Errorf("loadtest: %s: two keys have the prefix %q; give keys distinct first characters", t, prefix)
					}
					id = k.ID
				}
			}
			switch {
			case id == 0:
				return nil, fmt.Errorf("loadtest: %s: no key with prefix %q", t, prefix)
			case ks[i].ID != 0 && ks[i].ID != id:
				return nil, fmt.Errorf("loadtest: key %q is id %d on %s but %d on %s: the targets do not share keys", prefix, id, t, ks[i].ID, targets[0])
			}
			ks[i].ID = id
		}
	}
	return ks, nil
}

// periodWindow stands for a calendar period's limit: longer than any run.
const periodWindow = 31 * 24 * time.Hour

// planLimits reads each key's limits from GET /v1/quota (which charges
// nothing) on every target, and checks that the targets agree. A key of a
// customer is refused: the audit judges each key on its own, and a
// customer's limits are spent by all its keys.
func planLimits(ctx context.Context, hc *http.Client, targets []string, ks []Key) ([][]Limit, error) {
	out := make([][]Limit, len(ks))
	for i, k := range ks {
		for j, t := range targets {
			var u struct {
				Limits []struct {
					Name     string `json:"name"`
					Max      int64  `json:"max"`
					WindowMS int64  `json:"window_ms"`
					Period   string `json:"period"`
				} `json:"limits"`
			}
			if err := getJSON(ctx, hc, t+"/v1/quota", http.Header{"X-API-Key": {k.Secret}}, &u); err != nil {
				return nil, err
			}
			var ls []Limit
			for _, l := range u.Limits {
				if strings.HasPrefix(l.Name, plans.CustomerLimitPrefix) {
					return nil, fmt.Errorf("loadtest: %s: key %d belongs to a customer (limit %s): give keys of no customer", t, k.ID, l.Name)
				}
				w := time.Duration(l.WindowMS) * time.Millisecond
				if l.Period != "" {
					// A day or month counts everything admitted in it: a run
					// (seconds) within one period is checked as one window
					// longer than the run. The keys are made for the run, so
					// nothing before it counts.
					w = periodWindow
				}
				ls = append(ls, Limit{Name: l.Name, Max: l.Max, Window: w})
			}
			if len(ls) == 0 {
				return nil, fmt.Errorf("loadtest: %s: key %d has no limits", t, k.ID)
			}
			if j > 0 && !slices.Equal(ls, out[i]) {
				return nil, fmt.Errorf("loadtest: key %d has limits %v on %s but %v on %s", k.ID, ls, t, out[i], targets[0])
			}
			out[i] = ls
		}
	}
	return out, nil
}

// waitAbsent waits up to timeout for the quota keys to be gone, so that a
// previous run's admissions are not judged as this run's.
func waitAbsent(ctx context.Context, store *quota.Redis, identities []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var present []string
		for _, id := range identities {
			records, err := store.Records(ctx, id)
			if err != nil {
				return fmt.Errorf("loadtest: redis: %w", err)
			}
			if len(records) > 0 {
				present = append(present, id)
			}
		}
		if len(present) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loadtest: the quota logs of %v still hold admissions from before this run; use other keys or another Redis database", present)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logReader accumulates the records of some identities' quota logs, read
// repeatedly: the latest read of each record (by its index and
// admit time, as a log that expired starts its indexes again) wins, so a
// refunded one, read again at cost 0, stops counting.
type logReader struct {
	store      *quota.Redis
	identities []string
	mu         sync.Mutex
	seen       []map[[2]int64]Admission // per key, by record index and admit time
}

func newLogReader(store *quota.Redis, identities []string) *logReader {
	lr := &logReader{store: store, identities: identities, seen: make([]map[[2]int64]Admission, len(identities))}
	for i := range lr.seen {
		lr.seen[i] = map[[2]int64]Admission{}
	}
	return lr
}

// read reads every log once.
func (lr *logReader) read(ctx context.Context) error {
	for i, id := range lr.identities {
		records, err := lr.store.Records(ctx, id)
		if err != nil {
			return fmt.Errorf("loadtest: %w", err)
		}
		lr.mu.Lock()
		for _, r := range records {
			at := r.At.UnixMicro()
			lr.seen[i][[2]int64{r.Index, at}] = Admission{At: at, Cost: r.Cost}
		}
		lr.mu.Unlock()
	}
	return nil
}

// every reads the logs every interval until stop is called, which reads
// them a last time and returns the first error.
func (lr *logReader) every(interval time.Duration) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if err := lr.read(ctx); err != nil && ctx.Err() == nil {
				errc <- err
				return
			}
			select {
			case <-ctx.Done():
				errc <- nil
				return
			case <-t.C:
			}
		}
	}()
	return func() error {
		cancel()
		err := <-errc
		return errors.Join(err, lr.read(context.Background()))
	}
}

// admissions returns the entries read from the i-th log, by time.
func (lr *logReader) admissions(i int) []Admission {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	out := make([]Admission, 0, len(lr.seen[i]))
	for _, a := range lr.seen[i] {
		if a.Cost > 0 {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Admission) int { return compareInt64(a.At, b.At) })
	return out
}
