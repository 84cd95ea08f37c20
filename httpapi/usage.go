package httpapi

import "github.com/tileapi/tileapi/quota"

// usage is the JSON form of a caller's usage.
type usage struct {
	Plan   string       `json:"plan"`
	Limits []limitUsage `json:"limits"`
}

type limitUsage struct {
	Name      string `json:"name"`
	Max       int64  `json:"max"`
	WindowMS  int64  `json:"window_ms"`
	Used      int64  `json:"used"`
	Remaining int64  `json:"remaining"`
	// ResetMS is when the oldest charge in the window leaves it.
	ResetMS int64 `json:"reset_ms"`
}

func usageOf(plan string, d quota.Decision) usage {
	u := usage{Plan: plan, Limits: make([]limitUsage, len(d.Limits))}
	for i, l := range d.Limits {
		u.Limits[i] = limitUsage{
			Name: l.Limit.Name, Max: l.Limit.Max, WindowMS: l.Limit.Window.Milliseconds(),
			Used: l.Used, Remaining: l.Remaining, ResetMS: ceilDiv(l.ResetAfter.Microseconds(), 1000),
		}
	}
	return u
}
