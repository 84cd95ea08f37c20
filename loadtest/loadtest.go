// Package loadtest drives running tileapi servers with concurrent clients
// and judges what they did: the exactness scenario proves from Redis's own
// log of admissions that no key ever got more than its limits in any
// trailing window, and the throughput scenario measures requests per second
// and latency per route with the quota in Redis and in process, with the
// spatial work in memory or on PostGIS, and there beside pg_tileserv on tile
// misses.
//
// Every run is bounded in time and in requests, and talks to loopback
// addresses only: it is a tool for a developer's machine or a CI runner, not
// for load testing someone else's server.
package loadtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"
)

// Limit is one limit of a plan, as GET /v1/quota reports it: a sliding
// Window, or a calendar Period ("day", "month") without one.
type Limit struct {
	Name   string        `json:"name"`
	Window time.Duration `json:"window"`
	Period string        `json:"period,omitempty"`
	Max    int64         `json:"max"`
}

// Key is an API key the load is charged to: its secret, which clients send,
// and its id, which names its quota identity "key:<id>".
type Key struct {
	Secret string `json:"-"`
	ID     int64  `json:"id"`
}

// Admission is one admitted charge, as Redis logged it.
type Admission struct {
	At   int64 `json:"at_us"` // admit time, microseconds since the Unix epoch (Redis TIME)
	Cost int64 `json:"cost"`
}

// ErrNotLoopback is returned for a target that is not a loopback address.
var ErrNotLoopback = errors.New("loadtest: only loopback targets are allowed")

// CheckLoopback returns ErrNotLoopback unless rawURL's host is localhost or
// a loopback IP address.
func CheckLoopback(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %q", ErrNotLoopback, rawURL)
}
