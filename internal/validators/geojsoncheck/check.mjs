// check.mjs checks GeoJSON documents with validators tileapi did not
// write: @mapbox/geojsonhint (RFC 7946, the right-hand rule of section
// 3.1.6 included) and JSTS's IsValidOp (the OGC Simple Features validity of
// each polygon: rings with too few distinct points, self-intersections,
// holes outside their shell).
//
// Input on stdin: a JSON array of {"name": "...", "body": "<a GeoJSON text>"}.
// Output on stdout: a JSON array, one entry per document, in their order:
// {"name", "hints": [{"message", "level"}], "invalid": [{"feature", "message", "at"}]}.
// Exits non-zero only when it could not read its input.
import { readFileSync } from 'node:fs';
import geojsonhint from '@mapbox/geojsonhint';
import GeoJSONReader from 'jsts/org/locationtech/jts/io/GeoJSONReader.js';
import IsValidOp from 'jsts/org/locationtech/jts/operation/valid/IsValidOp.js';

const docs = JSON.parse(readFileSync(0, 'utf8'));
const reader = new GeoJSONReader();

const out = docs.map(({ name, body }) => {
  // A string, so that geojsonhint parses it itself and reports bad JSON.
  const hints = geojsonhint.hint(body).map(({ message, level }) => ({ message, level: level || 'error' }));
  const invalid = [];
  let doc;
  try {
    doc = JSON.parse(body);
  } catch {
    return { name, hints, invalid };
  }
  const features = doc.type === 'FeatureCollection' ? doc.features : doc.type === 'Feature' ? [doc] : [];
  for (const f of features) {
    if (!f.geometry || !['Polygon', 'MultiPolygon'].includes(f.geometry.type)) continue;
    let err;
    try {
      err = new IsValidOp(reader.read(f.geometry)).getValidationError();
    } catch (e) {
      invalid.push({ feature: f.id, message: `unreadable: ${e.message}`, at: null });
      continue;
    }
    if (err) {
      const c = err.getCoordinate();
      invalid.push({ feature: f.id, message: err.getMessage(), at: c ? [c.x, c.y] : null });
    }
  }
  return { name, hints, invalid };
});
process.stdout.write(JSON.stringify(out));
