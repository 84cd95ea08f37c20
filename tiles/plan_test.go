package tiles

import (
	"testing"

	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/pgq"
)

// A tile's query is planned for its values below zoom 4, where a filter's
// index may beat the spatial one, and once per connection from zoom 4 on.
func TestPlanFor(t *testing.T) {
	for z, want := range map[maptile.Zoom]pgq.Plan{0: pgq.CustomPlan, 3: pgq.CustomPlan, 4: pgq.GenericPlan, 10: pgq.GenericPlan, 14: pgq.GenericPlan} {
		if got := PlanFor(z); got != want {
			t.Errorf("PlanFor(%d) = %s, want %s", z, got, want)
		}
	}
}
