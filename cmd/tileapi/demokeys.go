package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/quota"
)

// embeddedDemoKeys are the demo keys of a server without a database, held
// in its memory only.
const embeddedDemoKeys = "demo-free:free,demo-pro:pro"

// demoKey is one key:plan of TILEAPI_DEMO_KEYS.
type demoKey struct{ secret, plan string }

// parseDemoKeys reads "key:plan,..." and checks it may be used. Demo keys
// are published, so anyone may spend them: in memory they go with the
// process, but in a database they stay, on every server, until revoked.
// So with a database (inDatabase) they are refused unless asked for
// (allowed, TILEAPI_DEMO_KEYS_IN_DATABASE), and even then each must be on a
// free-like plan (see freeLike).
func parseDemoKeys(ps plans.Set, spec string, inDatabase, allowed bool) ([]demoKey, error) {
	if spec == "" {
		return nil, nil
	}
	if inDatabase && !allowed {
		return nil, fmt.Errorf("TILEAPI_DEMO_KEYS: demo keys are published, and a database keeps them after they are removed from TILEAPI_DEMO_KEYS; set TILEAPI_DEMO_KEYS_IN_DATABASE=1 to write them into it anyway, or create keys with tileapi keys create")
	}
	var out []demoKey
	// An error names the item by its place, never by its key.
	for i, kv := range splitList(spec) {
		secret, plan, ok := strings.Cut(kv, ":")
		if !ok || secret == "" {
			return nil, fmt.Errorf("TILEAPI_DEMO_KEYS: item %d is not key:plan", i+1)
		}
		p, ok := ps.Lookup(plan)
		if !ok {
			return nil, fmt.Errorf("TILEAPI_DEMO_KEYS: item %d: unknown plan %q (plans: %s)", i+1, plan, strings.Join(ps.Names(), ", "))
		}
		if inDatabase && !freeLike(p) {
			return nil, fmt.Errorf("TILEAPI_DEMO_KEYS: item %d: plan %q is not free-like, and a demo key in a database must be: its plan needs a month limit of at most %d units, the compiled-in free plan's", i+1, plan, freeMonth())
		}
		out = append(out, demoKey{secret: secret, plan: plan})
	}
	return out, nil
}

// freeLike reports whether p gives no more in a calendar month than the
// compiled-in free plan: it has a month limit, at most the free plan's.
// The compiled-in plan, so that a plans file cannot make "free" generous
// and publish it.
func freeLike(p plans.Plan) bool {
	m, ok := monthMax(p)
	return ok && m <= freeMonth()
}

// freeMonth is the compiled-in free plan's month limit.
func freeMonth() int64 {
	free, _ := plans.Defaults().Lookup("free")
	m, _ := monthMax(free)
	return m
}

// monthMax is the max of p's month limit, if it has one.
func monthMax(p plans.Plan) (int64, bool) {
	for _, l := range p.Quota.Limits {
		if l.Period == quota.Month {
			return l.Max, true
		}
	}
	return 0, false
}

// addDemoKeys registers the demo keys and prints them: they are demo keys,
// chosen to be shown.
func addDemoKeys(ctx context.Context, store interface {
	Add(ctx context.Context, name, plan, secret string) (keys.Key, error)
}, demo []demoKey, stdout io.Writer) error {
	for _, k := range demo {
		if _, err := store.Add(ctx, "demo "+k.plan, k.plan, k.secret); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "demo key %s (plan %s)\n", k.secret, k.plan)
	}
	return nil
}
