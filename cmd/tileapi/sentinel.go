package main

import (
	"fmt"
	"net/url"

	"github.com/redis/go-redis/v9"
)

// sentinelURL reports whether a Redis URL names a primary managed by
// Sentinel: it has a master_name.
func sentinelURL(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Query().Has("master_name")
}

// openSentinel opens a client of the primary that the Sentinels of rawURL
// name, redis://[user:password@]host:port[/db]?master_name=NAME&addr=host2:port2...,
// each address a Sentinel's. It asks them where the primary is whenever it
// dials, and drops its connections when they announce a new one
// (+switch-master); a call on a connection that breaks fails, as on one
// node, and is not sent again.
//
// The URL's user and password are the primary's (and its replicas'), as in
// the other forms: go-redis's ParseFailoverURL would give them to the
// Sentinels. Sentinels that require a password of their own get it from
// sentinel_username= and sentinel_password=.
func openSentinel(setting, rawURL string) (*redis.Client, error) {
	opt, err := failoverOptions(setting, rawURL)
	if err != nil {
		return nil, err
	}
	return redis.NewFailoverClient(opt), nil
}

// failoverOptions reads a Sentinel URL for openSentinel; its addr= lists
// are trimmed as a cluster's are.
func failoverOptions(setting, rawURL string) (*redis.FailoverOptions, error) {
	u, err := url.Parse(trimAddrs(rawURL))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, urlError(err))
	}
	q := u.Query()
	sentinelUser, sentinelPassword := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	u.RawQuery = q.Encode()
	opt, err := redis.ParseFailoverURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, urlError(err))
	}
	switch {
	case opt.MasterName == "":
		return nil, fmt.Errorf("%s: master_name is empty", setting)
	case opt.ReplicaOnly || opt.RouteByLatency || opt.RouteRandomly:
		// The quota writes on every call: only the primary takes them (and
		// go-redis's failover client panics on the latter two).
		return nil, fmt.Errorf("%s: replica_only, route_by_latency and route_randomly send commands to replicas, which refuse the quota's writes", setting)
	case opt.SentinelUsername != "" || opt.SentinelPassword != "":
		if opt.Username != "" || opt.Password != "" {
			return nil, fmt.Errorf("%s: the primary's credentials are given twice, before the host and as username= or password=", setting)
		}
		opt.Username, opt.Password = opt.SentinelUsername, opt.SentinelPassword
	}
	opt.SentinelUsername, opt.SentinelPassword = sentinelUser, sentinelPassword
	// As for the other forms (see openRedis), and for the Sentinels too.
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	return opt, nil
}
