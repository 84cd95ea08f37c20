package tiles

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/pgq"
	"github.com/tileapi/tileapi/internal/spatialtest"
)

// Every places tile up to LowPlacesZoom, read from places_low as served,
// is byte for byte the tile the query over all places draws (the query of
// before places_low, planned as it was), on the loaded dataset: the same
// places, in the same order, with the same attributes.
func TestLowPlacesSameTiles(t *testing.T) {
	ctx := context.Background()
	pool, _ := spatialtest.Loaded(t)
	s := NewPostGIS(pool, 5*time.Second)
	l, err := LookupLayer("places")
	if err != nil {
		t.Fatal(err)
	}
	// places_low holds exactly the places LowPlacesZoom draws: the
	// migration's threshold and this package's agree.
	var low, want int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM places_low), (SELECT count(*) FROM places WHERE population >= $1)`,
		l.MinPopulation(LowPlacesZoom)).Scan(&low, &want); err != nil {
		t.Fatal(err)
	}
	if low != want || low == 0 {
		t.Errorf("places_low holds %d places, want the %d of population %d or more", low, want, l.MinPopulation(LowPlacesZoom))
	}
	for z := maptile.Zoom(0); z <= LowPlacesZoom; z++ {
		if sql, _ := s.placesQuery(z); sql != s.placesLow {
			t.Errorf("z%d: the places query does not read places_low", z)
		}
		nonEmpty, n := 0, uint32(1)<<z
		for x := range n {
			for y := range n {
				tile := maptile.New(x, y, z)
				got, err := s.Tile(ctx, l, tile)
				if err != nil {
					t.Fatal(err)
				}
				want, err := s.render(ctx, l, tile, s.places, PlanFor(z))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%d/%d/%d: %d bytes from places_low, %d from places", z, x, y, len(got), len(want))
				}
				if len(got) > 0 {
					nonEmpty++
				}
			}
		}
		t.Logf("z%d: %d tiles, %d with places", z, n*n, nonEmpty)
		if nonEmpty < int(n*n)/8 {
			t.Errorf("z%d: only %d of %d tiles have places", z, nonEmpty, n*n)
		}
	}
	if sql, _ := s.placesQuery(LowPlacesZoom + 1); sql != s.places {
		t.Errorf("z%d: the places query does not read places", LowPlacesZoom+1)
	}
}

// The plan made once for the places tiles of zooms worldZoom+1 to
// LowPlacesZoom finds them through places_low's GiST index.
func TestLowPlacesGenericPlan(t *testing.T) {
	ctx := context.Background()
	pool, _ := spatialtest.Loaded(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "RESET plan_cache_mode")
	if _, err := conn.Exec(ctx, "PREPARE low_places AS "+placesFrom("places_low")); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DEALLOCATE low_places")
	l, _ := LookupLayer("places")
	for z := worldZoom + 1; z <= LowPlacesZoom; z++ {
		if sql, plan := NewPostGIS(pool, time.Second).placesQuery(maptile.Zoom(z)); sql != placesFrom("places_low") || plan != pgq.GenericPlan {
			t.Errorf("z%d: places query planned %s", z, plan)
		}
		// EXECUTE takes no bind parameters: the tile's values are written in.
		rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE low_places(%d, 0, 0, 0.0625, 4096, 256, %d, 1000, 'places')", z, l.MinPopulation(z)))
		if err != nil {
			t.Fatal(err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(plan, "\n"); !strings.Contains(p, "places_low_geom_3857_idx") {
			t.Errorf("z%d: the generic plan does not use places_low_geom_3857_idx:\n%s", z, p)
		}
	}
}
