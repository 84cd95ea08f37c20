package geofence

import (
	"context"
	"testing"
	"time"

	"github.com/tileapi/tileapi/internal/spatialtest"
	"github.com/tileapi/tileapi/internal/validators/geojsoncheck"
)

// clockwiseFenceSQL stores a fence wound against RFC 7946: its exterior
// clockwise, its hole counter-clockwise, as the bundled data came.
const clockwiseFenceSQL = `
INSERT INTO fences (kind, id, name, geom) VALUES ('country', 1, 'Clockwise',
  ST_GeomFromText('MULTIPOLYGON(((0 0, 0 10, 10 10, 10 0, 0 0), (2 2, 4 2, 4 4, 2 4, 2 2)))', 4326))`

// TestPostGISWindsAnyData checks that PostGIS answers with rings wound as
// RFC 7946 wants whatever the table holds, not only what tileapi load
// wrote.
func TestPostGISWindsAnyData(t *testing.T) {
	ctx := context.Background()
	pool := spatialtest.Migrated(t)
	if _, err := pool.Exec(ctx, clockwiseFenceSQL); err != nil {
		t.Fatal(err)
	}
	fs, err := NewPostGIS(pool, 5*time.Second).Contains(ctx, ContainsQuery{Lng: 1, Lat: 1, Geometry: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || len(fs[0].Geometry) != 1 || len(fs[0].Geometry[0]) != 2 {
		t.Fatalf("got %+v; want the fence, one polygon with a hole", fs)
	}
	if d := geojsoncheck.Polygons(fs[0].Geometry); len(d) > 0 {
		t.Errorf("%v: %q", fs[0].Geometry, d)
	}
}
