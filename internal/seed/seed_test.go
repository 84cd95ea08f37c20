package seed_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/tileapi/tileapi/internal/dataset"
	"github.com/tileapi/tileapi/internal/seed"
	"github.com/tileapi/tileapi/internal/spatialtest"
)

// TestDatasetIsIdempotent loads the bundled dataset twice and checks that
// the second load leaves the same rows, with the ids and codes the API uses.
func TestDatasetIsIdempotent(t *testing.T) {
	ctx := context.Background()
	pool := spatialtest.Migrated(t)
	d, err := dataset.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := seed.Counts{Places: 135233, Countries: 241, Counties: 3231}
	if _, err := seed.Version(ctx, pool); !errors.Is(err, seed.ErrNotLoaded) {
		t.Errorf("Version before any load: %v, want ErrNotLoaded", err)
	}
	if err := seed.Renew(ctx, pool); !errors.Is(err, seed.ErrNotLoaded) {
		t.Errorf("Renew before any load: %v, want ErrNotLoaded", err)
	}
	var fingerprints, versions [2]string
	for i := range fingerprints {
		var progress bytes.Buffer
		got, err := seed.Dataset(ctx, pool, d, &progress)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("load %d: %v, want %v", i, got, want)
		}
		if progress.Len() == 0 {
			t.Errorf("load %d drew no progress", i)
		}
		if err := pool.QueryRow(ctx, fingerprintSQL).Scan(&fingerprints[i]); err != nil {
			t.Fatal(err)
		}
		if versions[i], err = seed.Version(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	// Each load is a new version, so no server keeps serving cached tiles of
	// the data it replaced.
	if versions[0] == "" || versions[0] == versions[1] {
		t.Errorf("data versions of two loads: %q and %q", versions[0], versions[1])
	}
	if err := seed.Renew(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if renewed, err := seed.Version(ctx, pool); err != nil || renewed == versions[1] {
		t.Errorf("Version after Renew: %q, %v; want a new one (was %q)", renewed, err, versions[1])
	}
	if fingerprints[0] != fingerprints[1] {
		t.Errorf("second load changed the rows: %s, then %s", fingerprints[0], fingerprints[1])
	}

	for _, tc := range []struct {
		name, query, want string
	}{
		{"place by geonameid", "SELECT name FROM places WHERE id = 2988507", "Paris"},
		{"county by FIPS", "SELECT name || ' ' || code FROM fences WHERE kind = 'county' AND id = 6037", "Los Angeles 06037"},
		// Refreshed by the load: the places of zoom 5 and up, every one.
		{"low-zoom places", "SELECT (SELECT count(*) FROM places_low) || ' of ' || (SELECT count(*) FROM places WHERE population >= 50000)", "9062 of 9062"},
		{"country without ISO code", "SELECT coalesce(code, 'none') FROM fences WHERE kind = 'country' AND name = 'Kosovo'", "none"},
		{"valid projected geometry", "SELECT count(*)::text FROM fences WHERE ST_IsEmpty(geom_3857) AND NOT ST_IsEmpty(geom)", "0"},
		// Quantized into a line in the counties file: no area, so no polygon.
		{"fence of no area", "SELECT string_agg(name, ',') FROM fences WHERE ST_IsEmpty(geom)", "Falls Church"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			if err := pool.QueryRow(ctx, tc.query).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s: %q, want %q", tc.query, got, tc.want)
			}
		})
	}
}

// fingerprintSQL summarises every row of both tables in one hash.
const fingerprintSQL = `
SELECT md5(
  (SELECT string_agg(concat_ws('|', id, name, country, admin_code, feature_code, population, ST_AsEWKB(geom)::text), ',' ORDER BY id) FROM places) ||
  (SELECT string_agg(concat_ws('|', kind, id, name, code, md5(ST_AsEWKB(geom)::text)), ',' ORDER BY kind, id) FROM fences))`
