package pglayers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tileapi/tileapi/internal/layers"
)

// found is what a test expects of a discovered layer.
type found struct {
	name, table, geometry, id string
	properties                []string
}

func (f found) String() string {
	return fmt.Sprintf("%s: %s(%s) id %q %q", f.name, f.table, f.geometry, f.id, f.properties)
}

// ours returns the layers and skips of the fixture's schemas: the test
// database holds other tests' tables too.
func ours(t *testing.T, pool *pgxpool.Pool) ([]found, []Skipped, []layers.Layer) {
	t.Helper()
	ls, skipped, err := Discover(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	var fs []found
	var mine []layers.Layer
	for _, l := range ls {
		if !strings.HasPrefix(l.Table, schema) {
			continue
		}
		if minZoom, maxZoom := l.Zooms(); minZoom != 0 || maxZoom != 22 {
			t.Errorf("%s: zooms %d-%d", l.Name, minZoom, maxZoom)
		}
		mine = append(mine, l)
		fs = append(fs, found{l.Name, l.Table, l.Geometry, l.ID, l.Properties})
	}
	var ss []Skipped
	for _, s := range skipped {
		if strings.HasPrefix(s.Table, schema) {
			ss = append(ss, s)
		}
	}
	return fs, ss, mine
}

// Discovery publishes every geometry column of the tables and views the
// role may read, and skips those without an SRID or a spatial index, of
// types a tile cannot draw, and tileapi's own, saying why.
func TestDiscover(t *testing.T) {
	owner, _ := db(t)
	fs, skipped, ls := ours(t, owner)
	want := []found{
		{"test_pglayers_dup", `test_pglayers."Dup"`, "geom", "id", []string{}},
		{"test_pglayers_badtypes", "test_pglayers.badtypes", "geom", "", []string{"tid", "n", "j", "t"}},
		{"test_pglayers_dup_2", "test_pglayers.dup", "geom", "id", []string{}},
		{"test_pglayers_lines3857", "test_pglayers.lines3857", "geom", "gid", []string{"kind"}},
		{"test_pglayers_mv_small", "test_pglayers.mv_small", "geom", "", []string{"id"}},
		{"test_pglayers_negids", "test_pglayers.negids", "geom", "id", []string{}},
		{"test_pglayers_nopk", "test_pglayers.nopk", "geom", "", []string{"code"}},
		{"test_pglayers_order", "test_pglayers.order", "geom", "id", []string{"Upper Name", "select", "two words"}},
		{"test_pglayers_polar4326", "test_pglayers.polar4326", "geom", "id", []string{}},
		{"test_pglayers_polys2154", "test_pglayers.polys2154", "geom", "id", []string{"label"}},
		{"test_pglayers_polys32633", "test_pglayers.polys32633", "geom", "id", []string{}},
		{"test_pglayers_pts4326", "test_pglayers.pts4326", "geom", "id",
			[]string{"name", "pop", "score", "flag", "tags", "meta", "amount", "Upper Name"}},
		{"test_pglayers_secret", "test_pglayers.secret", "geom", "id", []string{}},
		{"test_pglayers_twogeoms_a", "test_pglayers.twogeoms", "a", "id", []string{}},
		{"test_pglayers_twogeoms_b", "test_pglayers.twogeoms", "b", "id", []string{}},
		{"test_pglayers_v_big", "test_pglayers.v_big", "geom", "", []string{"id", "name", "pop"}},
		{"test_pglayers_x_drop_table_test_pglayers_pts4326_--", `test_pglayers."x""; DROP TABLE test_pglayers.pts4326; --"`,
			"geom", "id", []string{`a"b; --`}},
	}
	compareFound(t, fs, want)
	compareSkipped(t, skipped, []Skipped{
		{"test_pglayers.curvy", `geometry column "geom" is of type CURVEPOLYGON`},
		{"test_pglayers.geog", `geometry "g" is a geography column`},
		{"test_pglayers.mv_noindex", `no spatial index on "geom": tiles would scan the whole table; CREATE INDEX ON "test_pglayers"."mv_noindex" USING gist ("geom")`},
		{"test_pglayers.noindex", `no spatial index on "geom"`},
		{"test_pglayers.places", `tileapi's own table`},
		{"test_pglayers.srid0", `geometry "geom" has no SRID (0): set the SRID its coordinates are in, e.g. ALTER TABLE "test_pglayers"."srid0"`},
		{"test_pglayers_hidden.t", `no spatial index on "geom"`},
	})
	// Every layer found opens, without a warning.
	for _, l := range ls {
		if _, warnings, err := Open(context.Background(), owner, timeout, l); err != nil || len(warnings) > 0 {
			t.Errorf("%s: %v, warnings %v", l.Name, err, warnings)
		}
	}
}

// The role's privileges decide what discovery sees: the reader finds only
// the tables it may SELECT from, in the schemas it may use.
func TestDiscoverAsReader(t *testing.T) {
	_, readerPool := db(t)
	fs, skipped, ls := ours(t, readerPool)
	compareFound(t, fs, []found{
		{"test_pglayers_lines3857", "test_pglayers.lines3857", "geom", "gid", []string{"kind"}},
		{"test_pglayers_order", "test_pglayers.order", "geom", "id", []string{"Upper Name", "select", "two words"}},
		{"test_pglayers_pts4326", "test_pglayers.pts4326", "geom", "id",
			[]string{"name", "pop", "score", "flag", "tags", "meta", "amount", "Upper Name"}},
		{"test_pglayers_v_big", "test_pglayers.v_big", "geom", "", []string{"id", "name", "pop"}},
	})
	compareSkipped(t, skipped, []Skipped{
		{"test_pglayers.noindex", `no spatial index on "geom"`},
		{"test_pglayers.srid0", `has no SRID (0)`},
	})
	for _, l := range ls {
		if _, _, err := Open(context.Background(), readerPool, timeout, l); err != nil {
			t.Errorf("%s: %v", l.Name, err)
		}
	}
}

func compareFound(t *testing.T, got, want []found) {
	t.Helper()
	if !slices.EqualFunc(got, want, func(a, b found) bool { return a.String() == b.String() }) {
		t.Errorf("found %d layers:\n%v\nwant %d:\n%v", len(got), lines(got), len(want), lines(want))
	}
}

// compareSkipped compares skips with want, whose reasons are the start of
// (or in) the reason given.
func compareSkipped(t *testing.T, got, want []Skipped) {
	t.Helper()
	if !slices.EqualFunc(got, want, func(a, b Skipped) bool { return a.Table == b.Table && strings.Contains(a.Reason, b.Reason) }) {
		t.Errorf("skipped %d:\n%v\nwant %d:\n%v", len(got), lines(got), len(want), lines(want))
	}
}

func lines[T fmt.Stringer](vs []T) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "\t%v\n", v)
	}
	return b.String()
}
