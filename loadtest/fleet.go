package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Fleet is a set of tileapi servers this package started with the same
// plans file and demo keys.
type Fleet struct {
	Instances  []*Instance
	Keys       []Key
	AdminToken string
	// QuotaPrefix starts the quota's keys in Redis (ExactnessConfig.Prefix);
	// empty: DefaultPrefix.
	QuotaPrefix string
}

// FleetConfig says what servers to start.
type FleetConfig struct {
	Bin      string // the tileapi binary
	Dir      string // where the plans file goes
	RedisURL string // shared by every instance; empty: each has its quota in process
	// DatabaseURL is PostGIS after tileapi migrate and load, where the
	// servers run their spatial queries and keep their keys; empty: the
	// bundled data in memory.
	DatabaseURL string
	Instances   int
	// Plan is the plan every key is on, written to a plans file; a Plan
	// with no Limits names a compiled-in plan (internal/plans: free, pro),
	// and no plans file is written.
	Plan Plan
	Keys int
	// QuotaTimeout is each quota call's time budget; empty: the server's
	// default. The servers fail closed: a request whose charge does not
	// answer in time is a 503, never served unmetered.
	QuotaTimeout string
	// RedisPrefix starts every key the servers write in Redis
	// (TILEAPI_REDIS_PREFIX); empty: the servers' default, "tileapi:".
	RedisPrefix string
	// LayersFile is the servers' layers file (TILEAPI_LAYERS_FILE), such as
	// WriteTableLayer writes; empty: the bundled layers alone.
	LayersFile string
	// NoUsage turns the servers' usage history off (TILEAPI_USAGE=off).
	NoUsage bool
	// Env is more environment for every instance (TILEAPI_TILE_CACHE_TTL,
	// TILEAPI_PPROF_ADDR, ...).
	Env  []string
	Logs io.Writer // the servers' output
}

// StartFleet starts the servers in parallel. Without a database their keys
// are demo keys, with random secrets whose first four characters (what the
// admin API shows of a demo key) differ; with one they are made with
// tileapi keys create before the servers start, since a database takes
// demo keys on free-like plans only.
func StartFleet(ctx context.Context, c FleetConfig) (*Fleet, error) {
	for _, u := range []string{c.RedisURL, c.DatabaseURL} {
		if u == "" {
			continue
		}
		if err := CheckLoopback(u); err != nil {
			return nil, err
		}
	}
	if c.Keys < 1 || c.Keys > 9999 || c.Instances < 1 {
		return nil, errors.New("loadtest: a fleet needs 1 to 9999 keys and an instance")
	}
	var plans string
	if len(c.Plan.Limits) > 0 {
		var err error
		if plans, err = WritePlans(c.Dir, c.Plan); err != nil {
			return nil, err
		}
	}
	usage := ""
	if c.NoUsage {
		usage = "off"
	}
	// 32 characters, the fewest tileapi takes.
	f := &Fleet{AdminToken: randomHex() + randomHex()}
	env := []string{
		"REDIS_URL=" + c.RedisURL, "DATABASE_URL=" + c.DatabaseURL, "TILEAPI_PLANS_FILE=" + plans,
		"TILEAPI_ADMIN_TOKEN=" + f.AdminToken, "TILEAPI_QUOTA_FAILURE=closed", "TILEAPI_QUOTA_TIMEOUT=" + c.QuotaTimeout,
		"TILEAPI_REDIS_PREFIX=" + c.RedisPrefix, "TILEAPI_LAYERS_FILE=" + c.LayersFile, "TILEAPI_USAGE=" + usage,
	}
	env = append(env, c.Env...)
	if c.RedisPrefix != "" {
		f.QuotaPrefix = c.RedisPrefix + "q:"
	}
	var demo []string
	for i := range c.Keys {
		if c.DatabaseURL != "" {
			k, err := CreateKey(ctx, c.Bin, env, c.Plan.Name, fmt.Sprintf("loadtest %d", i))
			if err != nil {
				return nil, err
			}
			f.Keys = append(f.Keys, k)
			continue
		}
		secret := fmt.Sprintf("%04d-loadtest-%s", i, randomHex())
		f.Keys = append(f.Keys, Key{Secret: secret})
		demo = append(demo, secret+":"+c.Plan.Name)
	}
	env = append(env, "TILEAPI_DEMO_KEYS="+strings.Join(demo, ","))
	type started struct {
		in  *Instance
		err error
	}
	ch := make(chan started, c.Instances)
	for range c.Instances {
		go func() {
			in, err := Start(ctx, c.Bin, env, c.Logs)
			ch <- started{in, err}
		}()
	}
	var errs []error
	for range c.Instances {
		s := <-ch
		if s.err != nil {
			errs = append(errs, s.err)
			continue
		}
		f.Instances = append(f.Instances, s.in)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, f.Stop())
	}
	return f, nil
}

// URLs returns the base URLs of the instances.
func (f *Fleet) URLs() []string {
	var out []string
	for _, in := range f.Instances {
		out = append(out, in.URL)
	}
	return out
}

// AdminURLs returns the base URLs of the instances' admin listeners, in
// the order of URLs.
func (f *Fleet) AdminURLs() []string {
	var out []string
	for _, in := range f.Instances {
		out = append(out, in.AdminURL)
	}
	return out
}

// Stop stops every instance.
func (f *Fleet) Stop() error {
	var errs []error
	for _, in := range f.Instances {
		errs = append(errs, in.Stop())
	}
	return errors.Join(errs...)
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
