package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/httpapi"
	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/plans"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// TestCustomers runs `tileapi customers` and the keys commands that move
// keys into and out of customers, step by step, against one database
// schema and serve's Redis.
func TestCustomers(t *testing.T) {
	ctx := context.Background()
	dbURL := spatialtest.Schema(t)
	redisURL := testenv.RedisURL(t)
	prefix := fmt.Sprintf("customerstest:%d:", time.Now().UnixNano())
	vars := map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL, "TILEAPI_REDIS_PREFIX": prefix}
	cli := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, append([]string{"tileapi"}, args...), func(k string) string { return vars[k] }, &stdout, &stderr)
		return stdout.String(), err
	}
	step := func(t *testing.T, args []string, out, errText string) {
		t.Helper()
		got, err := cli(args...)
		if errText != "" {
			if err == nil || !strings.Contains(err.Error(), errText) {
				t.Fatalf("%q: error %v, want one containing %q", args, err, errText)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if !regexp.MustCompile(out).MatchString(got) {
			t.Errorf("%q: stdout %q, want a match for %s", args, got, out)
		}
	}

	for _, s := range []struct {
		name     string
		args     []string
		out, err string
	}{
		{"create", []string{"customers", "create", "-name", "Acme", "-plan", "pro"}, `^created customer 1 \(Acme\) on plan pro\n$`, ""},
		{"create another", []string{"customers", "create", "-name", "Globex", "-plan", "free"}, `^created customer 2 \(Globex\) on plan free\n$`, ""},
		{"create without a name", []string{"customers", "create", "-plan", "pro"}, "", "customers create: -name is required"},
		{"create on an unknown plan", []string{"customers", "create", "-name", "x", "-plan", "gold"}, "", `"gold" is not a configured plan; a customer may be on free, pro`},
		{"create on the anonymous plan", []string{"customers", "create", "-name", "x", "-plan", "anonymous"}, "", `"anonymous" is the plan of requests without a key`},
		{"a key of a customer", []string{"keys", "create", "-plan", "free", "-customer", "1"}, `^created secret key 1 \(tk_sec_[0-9a-f]{8}\) on plan free of customer 1\n`, ""},
		{"another key of it", []string{"keys", "create", "-plan", "free", "-customer", "1", "-kind", "publishable"}, `^created publishable key 2 \(tk_pub_[0-9a-f]{8}\) on plan free of customer 1\n`, ""},
		{"a key of no customer", []string{"keys", "create", "-plan", "free"}, `^created secret key 3 \(tk_sec_[0-9a-f]{8}\) on plan free\n`, ""},
		{"a key of a customer that does not exist", []string{"keys", "create", "-plan", "free", "-customer", "9"}, "", "keys: customer not found: id 9"},
		{"keys list", []string{"keys", "list"}, `\n1 +tk_sec_\S+ +secret +- +free +1 +- +- .*\n2 +tk_pub_\S+ +publishable +- +free +1 +- .*\n3 +tk_sec_\S+ +secret +- +free +- +- `, ""},
		{"customers list", []string{"customers", "list"}, `^ID +NAME +PLAN +KEYS +CREATED\n1 +Acme +pro +2 +\S+Z\n2 +Globex +free +0 +\S+Z\n$`, ""},
		{"move a key out", []string{"keys", "set-customer", "2", "-none"}, `^key 2 \(tk_pub_[0-9a-f]{8}\) belongs to no customer; its own usage starts anew\n$`, ""},
		{"move a key in", []string{"keys", "set-customer", "3", "2"}, `^key 3 \(tk_sec_[0-9a-f]{8}\) belongs to customer 2; its own usage starts anew\n$`, ""},
		{"move a key to no customer there is", []string{"keys", "set-customer", "3", "9"}, "", "keys: customer not found: id 9"},
		{"move no key", []string{"keys", "set-customer", "9", "1"}, "", "keys: key not found: id 9"},
		{"move, not said where", []string{"keys", "set-customer", "3"}, "", "say which customer: CUSTOMER_ID, or -none alone"},
		{"move, said twice", []string{"keys", "set-customer", "3", "1", "-none"}, "", "say which customer"},
		{"move to a bad id", []string{"keys", "set-customer", "3", "acme"}, "", `customer id "acme" is not a customer's id`},
		{"customers list after the moves", []string{"customers", "list"}, `\n1 +Acme +pro +1 +\S+Z\n2 +Globex +free +1 +\S+Z\n$`, ""},
		{"set plan", []string{"customers", "set-plan", "2", "pro"}, `^customer 2 \(Globex\) is on plan pro\n$`, ""},
		{"set an unknown plan", []string{"customers", "set-plan", "2", "gold"}, "", `"gold" is not a configured plan`},
		{"set the plan of no customer", []string{"customers", "set-plan", "9", "pro"}, "", "keys: customer not found: id 9"},
		{"rename", []string{"customers", "rename", "2", "Globex Corp"}, `^customer 2 is Globex Corp\n$`, ""},
		{"rename to nothing", []string{"customers", "rename", "2", " "}, "", "the name is empty"},
		{"an id that is not a number", []string{"customers", "usage", "acme"}, "", `customers usage: id "acme" is not a number`},
	} {
		t.Run(s.name, func(t *testing.T) { step(t, s.args, s.out, s.err) })
	}

	// Usage, charged as serve charges it: the customer's limits by all its
	// keys, each key's own by itself.
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := keys.NewPostgres(pool)
	k1, err := store.Get(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	ps := plans.Defaults()
	free, _ := ps.Lookup("free")
	pro, err := ps.CustomerPlan("pro")
	if err != nil {
		t.Fatal(err)
	}
	q := quota.NewRedis(quotatest.NewClient(t, redisURL), quota.WithPrefix(prefix+"q:"))
	for _, c := range []struct {
		identity string
		plan     quota.Plan
		cost     int64
	}{{httpapi.KeyIdentity(k1), free.Quota, 3}, {httpapi.CustomerIdentity(1), pro, 7}} {
		if _, err := q.Charge(ctx, c.identity, c.plan, c.cost); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []struct {
		name     string
		args     []string
		out, err string
	}{
		{"customer usage", []string{"customers", "usage", "1"},
			`^customer 1 \(Acme\) on plan pro\nLIMIT +MAX +WINDOW +USED +REMAINING +RESETS IN\ncustomer.burst +1000 +5s +7 +993 +\S+\ncustomer.minute +12000 +1m0s +7 .*\ncustomer.month +5000000 +month +7 `, ""},
		{"key usage, and its customer's", []string{"keys", "usage", "1"},
			`^key 1 \(tk_sec_[0-9a-f]{8}\) on plan free of customer 1\nLIMIT .*\nburst +300 +5s +3 .*\n(.*\n){2}customer 1 \(Acme\) on plan pro\nLIMIT .*\ncustomer.burst +1000 +5s +7 `, ""},
		{"usage of no customer", []string{"customers", "usage", "9"}, "", "keys: customer not found: id 9"},
		{"usage without Redis", []string{"customers", "usage", "1", "-redis-url", ""}, "", "no Redis: usage lives in serve's Redis"},
	} {
		t.Run(s.name, func(t *testing.T) { step(t, s.args, s.out, s.err) })
	}
}
