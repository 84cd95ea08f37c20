package sources

import (
	"context"
	"fmt"

	"github.com/tileapi/tileapi/geofence"
	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/pglayers"
	"github.com/tileapi/tileapi/internal/pgsets"
	"github.com/tileapi/tileapi/tiles"
)

// openPostGISLayer opens a table or function layer, and says what it
// serves but should not (a table without a spatial index).
func openPostGISLayer(ctx context.Context, o Options, cfg layers.Layer) (tiles.Layer, []string, error) {
	l, ws, err := pglayers.Open(ctx, o.Pool, o.QueryTimeout, cfg)
	if err != nil {
		return l, nil, err
	}
	return l, warnings(ws), nil
}

// openPostGISSet opens a table geofence set.
func openPostGISSet(ctx context.Context, o Options, cfg layers.Set) (geofence.Set, error) {
	return pgsets.Open(ctx, o.Pool, o.QueryTimeout, cfg)
}

// discover opens every table discovery finds whose name no layer has
// taken, and reports those it skipped.
func discover(ctx context.Context, o Options, taken []tiles.Layer) ([]tiles.Layer, []Skipped, []string, error) {
	found, skipped, err := pglayers.Discover(ctx, o.Pool)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sources: discovery: %w", err)
	}
	names := map[string]bool{}
	for _, l := range taken {
		names[l.Name] = true
	}
	var (
		ls []tiles.Layer
		ws []string
		sk []Skipped
	)
	for _, s := range skipped {
		sk = append(sk, Skipped{Table: s.Table, Reason: s.Reason})
	}
	for _, cfg := range found {
		if names[cfg.Name] {
			sk = append(sk, Skipped{Table: cfg.Table, Reason: fmt.Sprintf("its layer name %q is taken by a layer of the file or a bundled one", cfg.Name)})
			continue
		}
		l, w, err := openPostGISLayer(ctx, o, cfg)
		if err != nil {
			// Found, yet it does not open (changed meanwhile): skipped, as
			// discovery skips what it cannot serve.
			sk = append(sk, Skipped{Table: cfg.Table, Reason: err.Error()})
			continue
		}
		l.Description = "table " + cfg.Table
		ls, ws = append(ls, l), append(ws, w...)
	}
	return ls, sk, ws, nil
}

func warnings(ws []pglayers.Warning) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}
