package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// With REDIS_URL and DATABASE_URL, serve writes what keys spend in their
// month to the usage ledger, and a Redis restarted without persistence
// gets it back: the month's usage is the same after the restart. Before
// the ledger, it was 0.
func TestServeKeepsTheMonthOverARedisRestart(t *testing.T) {
	ctx := context.Background()
	dbURL := spatialtest.Schema(t)
	redisSrv := quotatest.StartRedisServer(t)
	env := map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": "redis://" + redisSrv.Addr, "TILEAPI_LEDGER_FLUSH": "100ms"}
	getenv := func(k string) string { return env[k] }
	migrate(t, getenv)
	loadParis(t, getenv)
	secret := createKey(t, getenv, "free")

	in := startServe(t, env)
	get := func(path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, in.url+path, nil)
		req.Header.Set("X-API-Key", secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	month := func() int64 {
		t.Helper()
		resp := get("/v1/quota")
		defer resp.Body.Close()
		var u struct {
			Limits []struct {
				Name string
				Used int64
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&u); err != nil {
			t.Fatal(err)
		}
		for _, l := range u.Limits {
			if l.Name == "month" {
				return l.Used
			}
		}
		t.Fatalf("/v1/quota has no month: %+v", u)
		return 0
	}
	for range 12 {
		resp := get("/v1/geofence/within?lng=2.35&lat=48.85&radius=5000") // 7 units
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("within: %d", resp.StatusCode)
		}
	}
	spent := month()
	if spent != 84 {
		t.Fatalf("the month holds %d after 12 searches of 7 units, want 84", spent)
	}
	// Written to the ledger within a flush.
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var units int64
		err := conn.QueryRow(ctx, `SELECT coalesce(sum(units), 0) FROM quota_ledger WHERE limit_name = 'month'`).Scan(&units)
		if err != nil {
			t.Fatal(err)
		}
		if units == spent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledger holds %d of the %d spent", units, spent)
		}
		time.Sleep(20 * time.Millisecond)
	}
	redisSrv.Stop()
	if err := redisSrv.Start(); err != nil {
		t.Fatal(err)
	}
	// The first call after the restart may meet a connection Redis closed.
	deadline = time.Now().Add(10 * time.Second)
	for {
		resp := get("/v1/quota")
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := month(); got != spent {
		t.Errorf("after a restart of Redis the month holds %d, want the %d spent before", got, spent)
	}
}
