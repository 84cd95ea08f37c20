package quotahttp_test

import (
	"context"
	"testing"

	"github.com/tileapi/tileapi/quota"
	"github.com/tileapi/tileapi/quota/quotahttp"
	"github.com/tileapi/tileapi/quota/quotatest"
)

// A settlement made later is tried again while the store does not answer
// (a hung Redis), made once it does, and the observer told of the units
// given back. A decision without a receipt has nothing to settle.
func TestSettleLater(t *testing.T) {
	srv := quotatest.StartRedisServer(t)
	plan := mustPlan(t, quota.PerMinute(100))
	rig := newPendingRig(t, srv.Addr, srv.Addr, plan)
	d, _, err := rig.direct.ChargeOverdraft(context.Background(), "192.0.2.7", plan, 9, "settle-later")
	if err != nil || !d.Allowed {
		t.Fatalf("charge: %+v, %v", d, err)
	}
	srv.Hang(t)
	if !rig.gate.SettleLater(requestTo("/", 9), "192.0.2.7", plan, d, 2) {
		t.Fatal("SettleLater refused with room in the backlog")
	}
	if n := rig.gate.Pending(); n != 1 {
		t.Errorf("the gate owes %d, want the settlement", n)
	}
	srv.Resume()
	rig.settled(t)
	if u := rig.used(t); u[0] != 2 {
		t.Errorf("used %v after settling 9 down to 2, want 2", u)
	}
	if n := rig.count(quotahttp.EventSettled); n != 1 || !rig.hasUnits(quotahttp.EventSettled, 7) {
		t.Errorf("%d settlements observed, want one giving back 7 units", n)
	}
	if rig.gate.SettleLater(requestTo("/", 1), "192.0.2.7", plan, quota.Decision{}, 0) {
		t.Error("SettleLater took a decision without a receipt")
	}
}

// hasUnits reports whether an event of kind gave back units.
func (rig *pendingRig) hasUnits(kind quotahttp.EventKind, units int64) bool {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	for _, e := range rig.events {
		if e.Kind == kind && e.Units == units {
			return true
		}
	}
	return false
}
