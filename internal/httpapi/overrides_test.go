package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// Per-key overrides set through the admin API change that key's limits on
// this server at once, and show in its headers and /v1/quota; a bad one is
// a 400 naming the field; DELETE goes back to the plan.
func TestKeyOverrides(t *testing.T) {
	e := newEnv(t)
	admin := []string{"Authorization", "Bearer admin-secret"}
	k, err := e.keys.Lookup(context.Background(), hashOf("key-five"))
	if err != nil {
		t.Fatal(err)
	}
	path := "/admin/keys/" + itoa(k.ID) + "/overrides"

	for _, tc := range []struct{ body, field string }{
		{`{"limits": [{"name": "ten-seconds", "max": 0, "window": "10s"}]}`, "limits[0].max"},
		{`{"limits": [{"name": "hour", "max": 5, "window": "an hour"}]}`, "limits[0].window"},
		{`{"max_in_flight": -2}`, "max_in_flight"},
		{`{"limitz": []}`, "overrides"},
		{`{}`, "overrides"},
	} {
		var p problem
		decode(t, e.adminDo(t, http.MethodPut, path, strings.NewReader(tc.body), admin...), http.StatusBadRequest, &p)
		if p.Field != tc.field {
			t.Errorf("%s: %+v, want field %q", tc.body, p, tc.field)
		}
	}

	var got keyJSON
	decode(t, e.adminDo(t, http.MethodPut, path, strings.NewReader(
		`{"limits": [{"name": "ten-seconds", "max": 7, "window": "10s"}, {"name": "hour", "max": 100, "window": "1h"}]}`), admin...),
		http.StatusOK, &got)
	if !strings.Contains(string(got.Overrides), `"hour"`) {
		t.Errorf("the key shows overrides %s", got.Overrides)
	}
	for i := range 8 {
		resp := e.get(t, contains, key("five")...)
		if want := i < 7; (resp.StatusCode == 200) != want {
			t.Fatalf("request %d with the window raised to 7: status %d", i, resp.StatusCode)
		}
		if i == 0 {
			if pol := resp.Header.Get("RateLimit-Policy"); pol != `"ten-seconds";q=7;w=10, "hour";q=100;w=3600` {
				t.Errorf("RateLimit-Policy %q", pol)
			}
		}
	}
	var u usage
	decode(t, e.get(t, "/v1/quota", key("five")...), http.StatusOK, &u)
	if len(u.Limits) != 2 || u.Limits[1].Name != "hour" || u.Limits[1].Used != 7 {
		t.Errorf("/v1/quota: %+v", u)
	}

	var cleared keyJSON
	decode(t, e.adminDo(t, http.MethodDelete, path, nil, admin...), http.StatusOK, &cleared)
	if cleared.Overrides != nil {
		t.Errorf("overrides after DELETE: %s", cleared.Overrides)
	}
	decode(t, e.get(t, "/v1/quota", key("five")...), http.StatusOK, &u)
	if len(u.Limits) != 1 || u.Limits[0].Max != 5 {
		t.Errorf("/v1/quota after DELETE: %+v", u)
	}
}

// Overrides set on another server reach this one at its index's next
// refresh.
func TestKeyOverridesFromAnotherServer(t *testing.T) {
	e := newEnv(t)
	k, err := e.keys.Lookup(context.Background(), hashOf("key-five"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.keys.SetOverrides(context.Background(), k.ID, []byte(`{"max_in_flight": 1, "limits": [{"name": "day", "max": 50, "window": "24h"}]}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.server.cfg.Keys.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp := e.get(t, contains, key("five")...)
	if pol := resp.Header.Get("RateLimit-Policy"); !strings.Contains(pol, `"day";q=50;w=86400`) {
		t.Errorf("RateLimit-Policy %q after the refresh", pol)
	}
}
