// decode.mjs decodes vector tiles with @mapbox/vector-tile (not the encoder
// tileapi uses) and prints what they hold, for tests to compare with what
// they expect.
//
// Usage: node decode.mjs DIR. Every file in DIR is one tile. It prints one
// JSON object: {"TILE": {"LAYER": {"extent", "features": [{"id", "type",
// "properties", "geometry"}]}}}, where a feature's id is absent when it has
// none, type is 1 (point), 2 (line) or 3 (polygon), and geometry is its
// rings or parts, each a list of [x, y] in tile coordinates.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PbfReader } from 'pbf';
import { VectorTile } from '@mapbox/vector-tile';

const dir = process.argv[2];
const out = {};
for (const name of readdirSync(dir).sort()) {
  const data = readFileSync(join(dir, name));
  const tile = {};
  out[name] = tile;
  if (data.length === 0) {
    continue;
  }
  const vt = new VectorTile(new PbfReader(data));
  for (const layerName of Object.keys(vt.layers)) {
    const layer = vt.layers[layerName];
    const features = [];
    for (let i = 0; i < layer.length; i++) {
      const f = layer.feature(i);
      features.push({
        id: f.id,
        type: f.type,
        properties: f.properties,
        geometry: f.loadGeometry().map(part => part.map(p => [p.x, p.y])),
      });
    }
    tile[layerName] = { extent: layer.extent, features };
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
