package tiles

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/paulmach/orb/maptile"

	"github.com/tileapi/tileapi/internal/param"
)

// Source renders the tiles of one layer from its own data: a PostGIS
// table or function, a PMTiles archive, a file held in memory, or the
// bundled dataset. It is called only with a tile in its layer's range and
// the parameters the layer declares, parsed (see Layer.ParseParams).
type Source interface {
	Tile(ctx context.Context, t maptile.Tile, params Params) ([]byte, error)
}

// Catalog is the layers a server publishes, in catalog order, by name.
type Catalog struct {
	layers []Layer
	byName map[string]int
}

// NewCatalog returns a catalog of ls, in their order. Every layer needs a
// Source, a name not used twice and a valid zoom range.
func NewCatalog(ls ...Layer) (*Catalog, error) {
	c := &Catalog{byName: make(map[string]int, len(ls))}
	for _, l := range ls {
		switch _, dup := c.byName[l.Name]; {
		case l.Name == "":
			return nil, fmt.Errorf("tiles: a layer has no name")
		case dup:
			return nil, fmt.Errorf("tiles: layer %q: the name is used twice", l.Name)
		case l.Source == nil:
			return nil, fmt.Errorf("tiles: layer %q has no source", l.Name)
		case l.MinZoom < 0 || l.MinZoom > l.MaxZoom || l.MaxZoom > MaxZoom:
			return nil, fmt.Errorf("tiles: layer %q: zoom range [%d, %d] is not within [0, %d]", l.Name, l.MinZoom, l.MaxZoom, MaxZoom)
		}
		c.byName[l.Name] = len(c.layers)
		c.layers = append(c.layers, l)
	}
	return c, nil
}

// MaxZoom is the highest zoom any layer serves.
const MaxZoom = 22

// Bundled returns the bundled layers (Layers) drawn by r: a *PostGIS over
// the tables tileapi load fills, or a *Memory over the dataset.
func Bundled(r interface {
	Tile(ctx context.Context, l Layer, t maptile.Tile) ([]byte, error)
}) []Layer {
	ls := Layers()
	for i := range ls {
		ls[i].Source = bundledSource{r: r, l: ls[i]}
	}
	return ls
}

// bundledSource draws one bundled layer with a renderer of them all.
type bundledSource struct {
	r interface {
		Tile(ctx context.Context, l Layer, t maptile.Tile) ([]byte, error)
	}
	l Layer
}

func (s bundledSource) Tile(ctx context.Context, t maptile.Tile, _ Params) ([]byte, error) {
	return s.r.Tile(ctx, s.l, t)
}

// Layers returns the catalog's layers, in order.
func (c *Catalog) Layers() []Layer { return slices.Clone(c.layers) }

// Names returns the names of the layers, in order: the one list plans'
// prices are checked against.
func (c *Catalog) Names() []string {
	names := make([]string, len(c.layers))
	for i, l := range c.layers {
		names[i] = l.Name
	}
	return names
}

// Lookup returns the layer called name, or a *param.Error for "layer".
func (c *Catalog) Lookup(name string) (Layer, error) {
	i, ok := c.byName[name]
	if !ok {
		return Layer{}, param.Invalid("layer", "unknown layer %q", name)
	}
	return c.layers[i], nil
}

// Parse reads a layer name and z/x/y from the text of a request path, each
// number in the strict syntax of param.Int, and validates them.
func (c *Catalog) Parse(layer, z, x, y string) (Layer, maptile.Tile, error) {
	l, err := c.Lookup(layer)
	if err != nil {
		return l, maptile.Tile{}, err
	}
	t, err := l.parseTile(z, x, y)
	return l, t, err
}

// Entries lists every layer; tileJSONURL is the URL template of a layer's
// TileJSON, in which {layer} stands for the layer's name.
func (c *Catalog) Entries(tileJSONURL string) []CatalogEntry {
	es := make([]CatalogEntry, 0, len(c.layers))
	for _, l := range c.layers {
		es = append(es, CatalogEntry{
			Name: l.Name, Description: l.Description, MinZoom: l.MinZoom, MaxZoom: l.MaxZoom,
			TileJSON: strings.ReplaceAll(tileJSONURL, "{layer}", l.Name),
		})
	}
	return es
}

// Tile renders tile t of l with params, after checking t is in its range.
func (l Layer) Tile(ctx context.Context, t maptile.Tile, params Params) ([]byte, error) {
	if err := l.Validate(t); err != nil {
		return nil, fmt.Errorf("tiles: %s: %w", l.Name, err)
	}
	return l.Source.Tile(ctx, t, params)
}
