package httpapi

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus metrics, all named tileapi_*.
type metrics struct {
	requests        *prometheus.CounterVec   // by route pattern and status
	requestDuration *prometheus.HistogramVec // by route pattern
	decisions       *prometheus.CounterVec   // by plan and outcome
	unitsCharged    *prometheus.CounterVec   // by plan
	unitsRefunded   *prometheus.CounterVec   // by plan
	nearLimit       *prometheus.CounterVec   // by plan: under 10% of the binding limit left
	quotaLatency    prometheus.Histogram
	queryLatency    *prometheus.HistogramVec // the spatial work, by route
	redisErrors     prometheus.Counter
	failOpen        prometheus.Counter
	// lateRetries counts charges tried again after Redis answered that
	// the first came too late to be made (a saturated machine).
	lateRetries prometheus.Counter
	// pendingCharges counts the charges of requests served unmetered, by
	// outcome: queued, applied (made once Redis answered), dropped.
	pendingCharges *prometheus.CounterVec
	tileCache      *prometheus.CounterVec // HIT or MISS
	// unknownKeyBlocks counts requests refused, without a key lookup, for
	// an address that presented too many unknown keys.
	unknownKeyBlocks prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tileapi_http_requests_total", Help: "HTTP requests by route pattern and status.",
		}, []string{"route", "status"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tileapi_http_request_duration_seconds", Help: "HTTP request duration by route pattern.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"route"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tileapi_quota_decisions_total", Help: "Quota decisions by plan and outcome (allowed, denied, too_costly).",
		}, []string{"plan", "outcome"}),
		unitsCharged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tileapi_quota_units_charged_total", Help: "Cost units charged, by plan.",
		}, []string{"plan"}),
		unitsRefunded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tileapi_quota_units_refunded_total", Help: "Cost units refunded after failed work, by plan.",
		}, []string{"plan"}),
		nearLimit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tileapi_quota_near_limit_total", Help: "Decisions that left under 10% of the binding limit, by plan.",
		}, []string{"plan"}),
		quotaLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tileapi_quota_decision_seconds", Help: "Time of one quota decision (one Redis round trip).",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 14),
		}),
		queryLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tileapi_query_duration_seconds", Help: "Time of a request's spatial work (database query or in-memory index), by route.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"route"}),
		redisErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tileapi_quota_store_errors_total", Help: "Quota store (Redis) errors and timeouts.",
		}),
		failOpen: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tileapi_quota_fail_open_total", Help: "Requests served unmetered because the quota store failed.",
		}),
		lateRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tileapi_quota_late_retries_total",
			Help: "Charges tried again because Redis received the first too late in its time budget to make it: a sign of a saturated machine.",
		}),
		pendingCharges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tileapi_quota_pending_charges_total",
			Help: "Charges of requests served unmetered (fail-open) by outcome: queued (made once Redis answers), applied (made), dropped (never made: too many owed, or Redis failing for ten minutes).",
		}, []string{"outcome"}),
		tileCache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tileapi_tile_cache_total", Help: "Tile cache lookups by result (HIT, MISS).",
		}, []string{"result"}),
		unknownKeyBlocks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tileapi_unknown_key_blocks_total", Help: "Requests refused without a key lookup: their address presented too many unknown API keys.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.requestDuration, m.decisions, m.unitsCharged,
		m.unitsRefunded, m.nearLimit, m.quotaLatency, m.queryLatency, m.redisErrors, m.failOpen, m.lateRetries, m.pendingCharges, m.tileCache, m.unknownKeyBlocks} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("httpapi: metrics: %w", err)
		}
	}
	return m, nil
}
