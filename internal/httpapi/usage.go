package httpapi

import (
	"time"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
)

// usage is the JSON form of a caller's usage.
type usage struct {
	Plan   string       `json:"plan"`
	Limits []limitUsage `json:"limits"`
}

type limitUsage struct {
	Name string `json:"name"`
	Max  int64  `json:"max"`
	// WindowMS is a sliding window's length; Period a calendar limit's
	// "day" or "month".
	WindowMS int64  `json:"window_ms,omitempty"`
	Period   string `json:"period,omitempty"`
	// Overage marks a soft cap: a period that goes on past Max as metered
	// overage, so Used may exceed it.
	Overage   bool  `json:"overage,omitempty"`
	Used      int64 `json:"used"`
	Remaining int64 `json:"remaining"`
	// ResetMS is when the oldest charge in the window leaves it, or when
	// the period ends.
	ResetMS int64 `json:"reset_ms"`
	// ResetsAt is, for a period, when it ends and its count starts again
	// (RFC 3339).
	ResetsAt string `json:"resets_at,omitempty"`
}

func usageOf(plan string, d quota.Decision) usage {
	u := usage{Plan: plan, Limits: make([]limitUsage, len(d.Limits))}
	now := time.Now()
	for i, l := range d.Limits {
		u.Limits[i] = limitUsage{
			Name: l.Limit.Name, Max: l.Limit.Max, WindowMS: l.Limit.Window.Milliseconds(), Period: string(l.Limit.Period),
			Overage: l.Limit.Soft, Used: l.Used, Remaining: l.Remaining, ResetMS: ceilDiv(l.ResetAfter.Microseconds(), 1000),
		}
		if l.Limit.Period != quota.Sliding {
			u.Limits[i].ResetsAt = quotahttp.ResetTime(now, l.ResetAfter)
		}
	}
	return u
}
