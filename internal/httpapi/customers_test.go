package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tileapi/tileapi/internal/keys"
	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/testenv"
	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// redisQuota is a quota store in rdb under a prefix of the test's own.
func redisQuota(t *testing.T, rdb redis.UniversalClient) Quota {
	return quota.NewRedis(rdb, quota.WithPrefix(fmt.Sprintf("httpapitest:%d:%s:", time.Now().UnixNano(), t.Name())))
}

// sharedServers starts two servers that share one PostgreSQL key store and
// the quota store q, each with a key index of its own refreshed every
// refresh, as two replicas of a deployment are.
func sharedServers(t *testing.T, q Quota, refresh time.Duration, opts ...option) (*env, *env) {
	t.Helper()
	store := keys.NewPostgres(spatialtest.Migrated(t))
	server := func() *env {
		return newEnv(t, append([]option{func(t *testing.T, c *Config) {
			x := keys.NewIndex(store, refresh)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); x.Run(ctx, func(err error) { t.Log(err) }) }()
			t.Cleanup(func() { cancel(); <-done })
			c.Keys, c.KeyAdmin, c.Quota = x, store, q
		}}, opts...)...)
	}
	return server(), server()
}

// createCustomer makes a customer on plan through the admin API and
// returns its id.
func (e *env) createCustomer(t *testing.T, name, plan string) int64 {
	t.Helper()
	var c customerJSON
	decode(t, e.adminJSON(t, http.MethodPost, "/admin/customers", fmt.Sprintf(`{"name": %q, "plan": %q}`, name, plan)), http.StatusCreated, &c)
	if c.ID < 1 || c.Name != name || c.Plan != plan {
		t.Fatalf("created %+v, want %s on %s", c, name, plan)
	}
	return c.ID
}

// createMember makes a secret key on plan of customer id through the
// admin API and returns its id and secret.
func (e *env) createMember(t *testing.T, plan string, customer int64) (int64, string) {
	t.Helper()
	var k struct {
		keyJSON
		Secret string `json:"secret"`
	}
	decode(t, e.adminJSON(t, http.MethodPost, "/admin/keys", fmt.Sprintf(`{"plan": %q, "customer_id": %d}`, plan, customer)), http.StatusCreated, &k)
	if k.CustomerID == nil || *k.CustomerID != customer {
		t.Fatalf("created %+v, want a key of customer %d", k.keyJSON, customer)
	}
	return k.ID, k.Secret
}

// answer is what a metered request was answered: its status, its cost, and
// on a 429 the limit named.
type answer struct {
	status        int
	cost          int64
	limit         string // the problem's limit
	xLimit        string // X-RateLimit-Limit
	ratelimit     string // RateLimit
	policy        string // RateLimit-Policy
	remainingZero bool   // X-RateLimit-Remaining is 0 on a 429
}

// ask sends GET path with secret to e and reads the answer.
func ask(t *testing.T, e *env, path, secret string) answer {
	t.Helper()
	resp := e.get(t, path, "X-API-Key", secret)
	a := answer{status: resp.StatusCode, xLimit: resp.Header.Get("X-RateLimit-Limit"),
		ratelimit: resp.Header.Get("RateLimit"), policy: resp.Header.Get("RateLimit-Policy"),
		remainingZero: resp.Header.Get("X-RateLimit-Remaining") == "0"}
	switch resp.StatusCode {
	case http.StatusOK:
		a.cost, _ = strconv.ParseInt(resp.Header.Get("X-RateLimit-Cost"), 10, 64)
		decode(t, resp, http.StatusOK, nil)
	case http.StatusTooManyRequests:
		var p problem
		decode(t, resp, http.StatusTooManyRequests, &p)
		a.limit = p.Limit
	default:
		decode(t, resp, http.StatusOK, nil) // fails, with the body
	}
	return a
}

// peek is identity's usage of each limit of plan, by name.
func peek(t *testing.T, e *env, identity string, plan quota.Plan) map[string]int64 {
	t.Helper()
	d, err := e.quota.Peek(context.Background(), identity, plan)
	if err != nil {
		t.Fatal(err)
	}
	used := make(map[string]int64)
	for _, l := range d.Limits {
		used[l.Limit.Name] = l.Used
	}
	return used
}

// The keys of a customer share its budget across two servers, on one
// Redis and on a cluster: hammered concurrently, they are admitted exactly
// the customer's limit together, each key never more than its own, the
// denials uncharged; the headers name whichever limit binds. A token with
// a budget stops at it while its key goes on; a customer's new plan
// reaches both servers within the key index's refresh; a key moved out of
// its customer starts its own windows anew.
func TestCustomerBudgetTwoServers(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testCustomerBudget(t, quota.NewMemory(nil)) })
	t.Run("single node", func(t *testing.T) {
		testCustomerBudget(t, redisQuota(t, quotatest.NewClient(t, testenv.RedisURL(t))))
	})
	t.Run("cluster", func(t *testing.T) {
		testCustomerBudget(t, redisQuota(t, quotatest.NewClusterClient(t, quotatest.RedisClusterAddrs(t))))
	})
}

func testCustomerBudget(t *testing.T, q Quota) {
	const refresh = 100 * time.Millisecond
	a, b := sharedServers(t, q, refresh, withTokens())
	servers := []*env{a, b}
	ps := a.server.cfg.Plans
	member, _ := ps.Lookup("member")     // 25 a minute
	team, err := ps.CustomerPlan("team") // 60 a minute
	if err != nil {
		t.Fatal(err)
	}

	acme := a.createCustomer(t, "Acme", "team")
	type key struct {
		id     int64
		secret string
	}
	var ks []key
	for range 4 {
		id, secret := a.createMember(t, "member", acme)
		ks = append(ks, key{id, secret})
	}
	identity := func(k key) string { return KeyIdentity(keys.Key{ID: k.id, CustomerID: acme}) }

	// One key alone, on both servers in turn: its own limit binds, at 25.
	var first []answer
	for i := range 30 {
		first = append(first, ask(t, servers[i%2], contains, ks[0].secret))
	}
	for i, ans := range first {
		if want := i < 25; (ans.status == http.StatusOK) != want {
			t.Fatalf("request %d of the first key alone: %+v, want admitted %v", i, ans, want)
		}
		if ans.status == http.StatusTooManyRequests && (ans.limit != "minute" || ans.xLimit != "25" || !ans.remainingZero) {
			t.Errorf("the first key over its own limit: %+v, want the key's minute (25) named", ans)
		}
	}

	// The three others at once, four clients each over both servers: the
	// customer's 35 units left go, exactly, and no more.
	answers := make([][]answer, len(ks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k := 1; k < len(ks); k++ {
		for w := range 4 {
			wg.Go(func() {
				denied := 0
				for n := 0; denied < 3 && n < 60; n++ {
					ans := ask(t, servers[w%2], contains, ks[k].secret)
					if ans.status != http.StatusOK {
						denied++
					}
					mu.Lock()
					answers[k] = append(answers[k], ans)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	admitted := []int64{25, 0, 0, 0}
	for k := 1; k < len(ks); k++ {
		for _, ans := range answers[k] {
			admitted[k] += ans.cost
		}
	}
	total := admitted[0] + admitted[1] + admitted[2] + admitted[3]
	if total != 60 {
		t.Errorf("the customer's keys were admitted %v units, %d together, want exactly its 60", admitted, total)
	}
	for k := range ks {
		if admitted[k] > 25 {
			t.Errorf("key %d was admitted %d units, over its own 25", k, admitted[k])
		}
		// Every unit admitted is in the key's own log and no denial is.
		if used := peek(t, a, identity(ks[k]), member.Quota)["minute"]; used != admitted[k] {
			t.Errorf("key %d has used %d units, want the %d it was admitted", k, used, admitted[k])
		}
		if k == 0 {
			continue
		}
		for _, ans := range answers[k] {
			// A key under its own limit is refused by its customer's, and
			// the headers say so.
			if ans.status == http.StatusTooManyRequests && admitted[k] < 25 &&
				(ans.limit != "customer.minute" || ans.xLimit != "60" || !ans.remainingZero || !strings.Contains(ans.ratelimit, `"customer.minute";r=0`)) {
				t.Errorf("key %d (admitted %d) refused with %+v, want the customer's minute (60) named", k, admitted[k], ans)
			}
		}
	}
	if used := peek(t, a, CustomerIdentity(acme), team)["customer.minute"]; used != 60 {
		t.Errorf("the customer has used %d units, want 60", used)
	}
	var u customerJSON
	decode(t, b.adminJSON(t, http.MethodGet, fmt.Sprintf("/admin/customers/%d", acme), ""), http.StatusOK, &u)
	if u.Usage == nil || len(u.Usage.Limits) != 1 || u.Usage.Limits[0].Name != "customer.minute" || u.Usage.Limits[0].Used != 60 {
		t.Errorf("GET /admin/customers/%d = %+v, want customer.minute used 60", acme, u)
	}

	// A token with a budget of 3, on both servers: three requests, then
	// its own limit, named "token"; its key goes on.
	solo, soloSecret := a.createKey(t, "secret", "member")
	m, _ := a.mint(t, soloSecret, `{"budget": 3}`, http.StatusOK)
	time.Sleep(3 * refresh) // b takes the new key in
	for i := range 5 {
		ans := ask(t, servers[i%2], contains, m.Token)
		if want := i < 3; (ans.status == http.StatusOK) != want {
			t.Fatalf("request %d with the token: %+v, want admitted %v", i, ans, want)
		}
		if ans.status == http.StatusOK && !strings.Contains(ans.policy, `"token";q=3;w=`) {
			t.Errorf("the token's RateLimit-Policy %q does not show its budget", ans.policy)
		}
		if ans.status != http.StatusOK && (ans.limit != "token" || ans.xLimit != "3") {
			t.Errorf("the token past its budget: %+v, want its limit token (3) named", ans)
		}
	}
	if ans := ask(t, b, contains, soloSecret); ans.status != http.StatusOK {
		t.Errorf("the token's key after the token's budget: %+v, want it to go on", ans)
	}
	// The key was charged the token's three units, the mint's, and its own.
	if used := peek(t, a, KeyIdentity(keys.Key{ID: solo}), member.Quota)["minute"]; used != 5 {
		t.Errorf("the token's key has used %d units, want 5", used)
	}
	a.mint(t, soloSecret, `{"budget": 26}`, http.StatusBadRequest)

	// A new plan for the customer reaches both servers within the
	// refresh: its members are admitted again (its 60 units are under
	// std's minute of 600), and the headers show it. The key asked is one
	// under its own minute: the race above may have given one all its 25.
	decode(t, a.adminJSON(t, http.MethodPut, fmt.Sprintf("/admin/customers/%d/plan", acme), `{"plan": "std"}`), http.StatusOK, nil)
	k := ks[1+slices.Index(admitted[1:], slices.Min(admitted[1:]))]
	for _, e := range servers {
		deadline := time.Now().Add(5 * time.Second)
		for {
			ans := ask(t, e, contains, k.secret)
			if ans.status == http.StatusOK {
				if !strings.Contains(ans.policy, `"customer.minute";q=600;w=60`) || !strings.Contains(ans.policy, `"customer.burst";q=100;w=5`) {
					t.Errorf("RateLimit-Policy after the customer's new plan: %q", ans.policy)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the customer's new plan has not reached a server in 5s (refresh %s): %+v", refresh, ans)
			}
			time.Sleep(refresh / 4)
		}
	}

	// Out of its customer, a key starts its own windows anew and is held
	// to its own plan alone.
	decode(t, a.adminJSON(t, http.MethodPut, fmt.Sprintf("/admin/keys/%d/customer", k.id), `{"customer_id": null}`), http.StatusOK, nil)
	used := b.usedBy(t, k.secret, refresh)
	if len(used) != 1 || used["minute"] != 0 {
		t.Errorf("a key out of its customer uses %v, want its own minute alone, anew", used)
	}
}

// usedBy reads GET /v1/quota of secret on e, by limit name, once e's key
// index has taken in the key's latest version (within a few refreshes).
func (e *env) usedBy(t *testing.T, secret string, refresh time.Duration) map[string]int64 {
	t.Helper()
	time.Sleep(3 * refresh)
	var u usage
	decode(t, e.get(t, "/v1/quota", "X-API-Key", secret), http.StatusOK, &u)
	used := make(map[string]int64)
	for _, l := range u.Limits {
		used[l.Name] = l.Used
	}
	return used
}

// The admin API of customers: a key joins a customer, leaves it and the
// key JSON says so; a customer's plan is checked as a key's; a key of a
// customer whose plan this server lacks is refused, never served on its
// own plan alone.
func TestCustomersAdmin(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme := e.createCustomer(t, "Acme", "team")
	id, secret := e.createMember(t, "member", acme)
	var k keyJSON
	decode(t, e.adminJSON(t, http.MethodGet, fmt.Sprintf("/admin/keys/%d", id), ""), http.StatusOK, &k)
	if k.CustomerID == nil || *k.CustomerID != acme {
		t.Errorf("GET the key: %+v, want customer_id %d", k, acme)
	}
	var u usage
	decode(t, e.get(t, "/v1/quota", "X-API-Key", secret), http.StatusOK, &u)
	if len(u.Limits) != 2 || u.Limits[0].Name != "minute" || u.Limits[1].Name != "customer.minute" || u.Limits[1].Max != 60 {
		t.Errorf("/v1/quota of a key of a customer: %+v, want its minute then the customer's", u)
	}

	for _, tc := range []struct {
		method, path, body string
		field              string
	}{
		{http.MethodPost, "/admin/customers", `{"name": "x", "plan": "anonymous"}`, "plan"},
		{http.MethodPost, "/admin/customers", `{"name": "x", "plan": "nope"}`, "plan"},
		{http.MethodPost, "/admin/customers", `{"plan": "team"}`, "name"},
		{http.MethodPut, fmt.Sprintf("/admin/customers/%d/plan", acme), `{"plan": "nope"}`, "plan"},
		{http.MethodPut, fmt.Sprintf("/admin/customers/%d/name", acme), `{"name": " "}`, "name"},
		{http.MethodPut, fmt.Sprintf("/admin/customers/%d/name", acme), `[]`, "body"},
		{http.MethodPost, "/admin/keys", `{"plan": "member", "customer_id": 999}`, "customer_id"},
		{http.MethodPost, "/admin/keys", `{"plan": "member", "customer_id": -1}`, "customer_id"},
		{http.MethodPost, "/admin/keys", `{"plan": "member", "customer_id": "1"}`, "customer_id"},
		{http.MethodPut, fmt.Sprintf("/admin/keys/%d/customer", id), `{"customer_id": 999}`, "customer_id"},
		{http.MethodPut, fmt.Sprintf("/admin/keys/%d/customer", id), `{}`, "customer_id"},
		{http.MethodPut, fmt.Sprintf("/admin/keys/%d/customer", id), `{"customer_id": 0}`, "customer_id"},
	} {
		var p problem
		decode(t, e.adminJSON(t, tc.method, tc.path, tc.body), http.StatusBadRequest, &p)
		if p.Code != "invalid-parameter" || p.Field != tc.field {
			t.Errorf("%s %s %s: %+v, want a 400 naming %s", tc.method, tc.path, tc.body, p, tc.field)
		}
	}
	var p problem
	decode(t, e.adminJSON(t, http.MethodGet, "/admin/customers/999", ""), http.StatusNotFound, &p)
	decode(t, e.adminJSON(t, http.MethodPut, "/admin/customers/999/plan", `{"plan": "team"}`), http.StatusNotFound, &p)
	decode(t, e.adminJSON(t, http.MethodPut, "/admin/customers/999/name", `{"name": "x"}`), http.StatusNotFound, &p)

	// A new name keeps the customer's plan and keys.
	var renamed customerJSON
	decode(t, e.adminJSON(t, http.MethodPut, fmt.Sprintf("/admin/customers/%d/name", acme), `{"name": "Acme Ltd"}`), http.StatusOK, &renamed)
	if renamed.ID != acme || renamed.Name != "Acme Ltd" || renamed.Plan != "team" {
		t.Errorf("PUT /admin/customers/%d/name = %+v, want Acme Ltd on team", acme, renamed)
	}
	decode(t, e.adminJSON(t, http.MethodGet, fmt.Sprintf("/admin/keys/%d", id), ""), http.StatusOK, &k)
	if k.CustomerID == nil || *k.CustomerID != acme {
		t.Errorf("the key after its customer's rename: %+v", k)
	}
	decode(t, e.adminJSON(t, http.MethodPut, "/admin/keys/999/customer", `{"customer_id": null}`), http.StatusNotFound, &p)

	// A customer on a plan this server does not configure (set by a
	// server with another plans file): its keys are refused.
	if _, err := e.keys.SetCustomerPlan(ctx, acme, "gold"); err != nil {
		t.Fatal(err)
	}
	if err := e.server.cfg.Keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	decode(t, e.get(t, contains, "X-API-Key", secret), http.StatusForbidden, &p)
	if p.Code != "unknown-plan" || !strings.Contains(p.Detail, `customer's plan "gold"`) {
		t.Errorf("a key of a customer on an unknown plan: %+v, want unknown-plan naming the customer's", p)
	}

	var out keyJSON
	decode(t, e.adminJSON(t, http.MethodPut, fmt.Sprintf("/admin/keys/%d/customer", id), `{"customer_id": null}`), http.StatusOK, &out)
	if out.CustomerID != nil {
		t.Errorf("a key out of its customer: %+v", out)
	}
	decode(t, e.get(t, contains, "X-API-Key", secret), http.StatusOK, nil)
	var cs struct{ Customers []customerJSON }
	decode(t, e.adminJSON(t, http.MethodGet, "/admin/customers", ""), http.StatusOK, &cs)
	if len(cs.Customers) != 1 || cs.Customers[0].Plan != "gold" || cs.Customers[0].Usage != nil {
		t.Errorf("GET /admin/customers = %+v", cs)
	}
}
