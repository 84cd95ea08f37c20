package sources

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/layers"
	"github.com/tileapi/tileapi/internal/pmtiles"
	"github.com/tileapi/tileapi/tiles"
)

// archiveSource serves the tiles of a PMTiles archive; a tile the archive
// lacks is empty.
type archiveSource struct{ r *pmtiles.Reader }

func (s archiveSource) Tile(ctx context.Context, t maptile.Tile, _ tiles.Params) ([]byte, error) {
	b, ok, err := s.r.Tile(ctx, uint8(t.Z), t.X, t.Y)
	if err != nil {
		return nil, fmt.Errorf("tiles: archive %d/%d/%d: %w", t.Z, t.X, t.Y, err)
	}
	if !ok {
		return []byte{}, nil
	}
	return b, nil
}

// archiveMetadata is what a PMTiles archive's metadata says of its layers
// (the TileJSON fields tippecanoe, planetiler and tileapi export write).
type archiveMetadata struct {
	Name         string              `json:"name"`
	Description  string              `json:"description"`
	Attribution  string              `json:"attribution"`
	VectorLayers []tiles.VectorLayer `json:"vector_layers"`
}

// openArchive opens a PMTiles archive (a path or an http(s) URL) as a
// layer: its zooms, bounds and vector layers from the archive, narrowed or
// named by the layers file.
func openArchive(ctx context.Context, o Options, cfg layers.Layer) (tiles.Layer, func(), error) {
	var (
		r   *pmtiles.Reader
		err error
	)
	if strings.HasPrefix(cfg.PMTiles, "http://") || strings.HasPrefix(cfg.PMTiles, "https://") {
		client := o.HTTP
		if client == nil {
			client = http.DefaultClient
		}
		r, err = pmtiles.OpenURL(ctx, client, cfg.PMTiles)
	} else {
		r, err = pmtiles.OpenFile(ctx, resolve(o.Dir, cfg.PMTiles))
	}
	if err != nil {
		return tiles.Layer{}, nil, err
	}
	closeArchive := func() { r.Close() }
	l, err := archiveLayer(ctx, r, cfg)
	if err != nil {
		closeArchive()
		return tiles.Layer{}, nil, err
	}
	return l, closeArchive, nil
}

func archiveLayer(ctx context.Context, r *pmtiles.Reader, cfg layers.Layer) (tiles.Layer, error) {
	h := r.Header()
	if h.TileType != pmtiles.MVT {
		return tiles.Layer{}, fmt.Errorf("pmtiles %s: holds %s tiles; tileapi serves vector tiles (MVT) only", cfg.PMTiles, h.TileType)
	}
	raw, err := r.Metadata(ctx)
	if err != nil {
		return tiles.Layer{}, err
	}
	var md archiveMetadata
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &md); err != nil {
			return tiles.Layer{}, fmt.Errorf("pmtiles %s: metadata: %w", cfg.PMTiles, err)
		}
	}
	minZoom, maxZoom := int(h.MinZoom), int(h.MaxZoom)
	if cfg.MinZoom != nil {
		minZoom = *cfg.MinZoom
	}
	if cfg.MaxZoom != nil {
		maxZoom = *cfg.MaxZoom
	}
	if minZoom < int(h.MinZoom) || maxZoom > int(h.MaxZoom) || minZoom > maxZoom {
		return tiles.Layer{}, fmt.Errorf("zooms [%d, %d] are not within the archive's [%d, %d]", minZoom, maxZoom, h.MinZoom, h.MaxZoom)
	}
	l := tiles.Layer{
		Name: cfg.Name, Description: first(cfg.Description, md.Description, md.Name), Attribution: first(cfg.Attribution, md.Attribution),
		MinZoom: minZoom, MaxZoom: maxZoom, Bounds: h.Bounds, VectorLayers: md.VectorLayers,
		Source: archiveSource{r},
	}
	for i := range l.VectorLayers {
		if l.VectorLayers[i].Fields == nil {
			l.VectorLayers[i].Fields = map[string]string{}
		}
	}
	if l.VectorLayers == nil {
		l.VectorLayers = []tiles.VectorLayer{} // none known: not one named after the layer
	}
	return l, nil
}

func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
