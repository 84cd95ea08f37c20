// check.mjs decodes vector tiles with @mapbox/vector-tile (not the encoder
// tileapi uses) and checks every ring of every polygon feature against the
// MVT specification 2.1, section 4.3.4.4, in integer tile coordinates:
//
//   - no repeated consecutive point (4.3.3.2: a LineTo's dX and dY are not
//     both 0) and at least three distinct points;
//   - no self-intersection: no two non-adjacent segments share a point, and
//     no two adjacent segments fold back over each other (a spike);
//   - no self-tangency: no vertex repeated within a ring, besides the
//     closing one;
//   - the first ring of a feature, and each that starts a polygon, is an
//     exterior ring of positive area by the surveyor's formula (y down);
//     rings of negative area are the holes of the exterior before them; no
//     ring has zero area;
//   - a hole lies inside its exterior (no vertex outside it), and no two
//     rings of one polygon cross or overlap along a segment.
//
// Usage: node check.mjs DIR. Every file in DIR is one tile; its name is
// reported with each defect. It prints one JSON object:
// {"tiles", "features", "polygons", "rings", "defects": [{"tile", "layer",
// "feature", "ring", "kind", "detail"}]}, where "rings" counts the rings of
// polygon features and a ring with several defects is listed once for each.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PbfReader } from 'pbf';
import { VectorTile } from '@mapbox/vector-tile';

const polygonType = 3;

// area2 is twice the signed area of ring by the surveyor's formula in tile
// coordinates; positive is an exterior ring (clockwise as drawn, y down).
function area2(ring) {
  let s = 0;
  for (let i = 0; i + 1 < ring.length; i++) {
    s += ring[i].x * ring[i + 1].y - ring[i + 1].x * ring[i].y;
  }
  return s;
}

// cross is the z component of (b - a) x (c - a): exact for tile
// coordinates, which are small integers.
function cross(a, b, c) {
  return (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x);
}

// onSegment reports whether p, collinear with a and b, lies between them.
function onSegment(a, b, p) {
  return Math.min(a.x, b.x) <= p.x && p.x <= Math.max(a.x, b.x) &&
    Math.min(a.y, b.y) <= p.y && p.y <= Math.max(a.y, b.y);
}

// touch reports whether segments ab and cd share at least one point.
function touch(a, b, c, d) {
  const d1 = cross(c, d, a), d2 = cross(c, d, b), d3 = cross(a, b, c), d4 = cross(a, b, d);
  if (((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0))) {
    return true;
  }
  return (d1 === 0 && onSegment(c, d, a)) || (d2 === 0 && onSegment(c, d, b)) ||
    (d3 === 0 && onSegment(a, b, c)) || (d4 === 0 && onSegment(a, b, d));
}

// crossOrOverlap reports whether ab and cd cross at a point inside both, or
// overlap along a length: what two rings of a valid polygon never do (they
// may touch at points).
function crossOrOverlap(a, b, c, d) {
  const d1 = cross(c, d, a), d2 = cross(c, d, b), d3 = cross(a, b, c), d4 = cross(a, b, d);
  if (d1 === 0 && d2 === 0) { // collinear: overlapping by more than a point?
    const horizontal = a.x !== b.x;
    const [lo1, hi1] = horizontal ? [Math.min(a.x, b.x), Math.max(a.x, b.x)] : [Math.min(a.y, b.y), Math.max(a.y, b.y)];
    const [lo2, hi2] = horizontal ? [Math.min(c.x, d.x), Math.max(c.x, d.x)] : [Math.min(c.y, d.y), Math.max(c.y, d.y)];
    return Math.min(hi1, hi2) > Math.max(lo1, lo2);
  }
  return ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0));
}

// segments returns the segments of rings (each closed, last point equal to
// the first) sorted by their smallest x, for a sweep.
function segments(rings) {
  const segs = [];
  rings.forEach((ring, r) => {
    for (let i = 0; i + 1 < ring.length; i++) {
      const a = ring[i], b = ring[i + 1];
      segs.push({ r, i, a, b, minX: Math.min(a.x, b.x), maxX: Math.max(a.x, b.x) });
    }
  });
  return segs.sort((s, t) => s.minX - t.minX);
}

// sweep calls f for every pair of segments whose x ranges overlap.
function sweep(segs, f) {
  for (let i = 0; i < segs.length; i++) {
    for (let j = i + 1; j < segs.length && segs[j].minX <= segs[i].maxX; j++) {
      f(segs[i], segs[j]);
    }
  }
}

// ringDefects returns the defects of one closed ring on its own.
function ringDefects(ring) {
  const out = [];
  const n = ring.length - 1; // segments; ring[n] closes ring[0]
  for (let i = 0; i < n; i++) {
    if (ring[i].x === ring[i + 1].x && ring[i].y === ring[i + 1].y) {
      out.push({ kind: 'repeated-point', detail: `point ${i} (${ring[i].x},${ring[i].y})` });
    }
  }
  const seen = new Map();
  for (let i = 0; i < n; i++) {
    const k = `${ring[i].x},${ring[i].y}`;
    if (seen.has(k) && seen.get(k) !== i - 1) {
      out.push({ kind: 'self-tangency', detail: `points ${seen.get(k)} and ${i} at (${k})` });
    }
    seen.set(k, i);
  }
  if (seen.size < 3) {
    out.push({ kind: 'too-few-points', detail: `${seen.size} distinct points` });
    return out;
  }
  if (out.length > 0) {
    return out; // the segment tests below assume distinct consecutive points
  }
  // Adjacent segments share an endpoint; they must not fold back.
  for (let i = 0; i < n; i++) {
    const a = ring[i], b = ring[i + 1], c = ring[(i + 2) % n];
    if (cross(a, b, c) === 0 && (b.x - a.x) * (c.x - b.x) + (b.y - a.y) * (c.y - b.y) < 0) {
      out.push({ kind: 'spike', detail: `at point ${(i + 1) % n} (${b.x},${b.y})` });
    }
  }
  sweep(segments([ring]), (s, t) => {
    const gap = Math.abs(s.i - t.i);
    if (gap === 1 || gap === n - 1) {
      return; // adjacent: checked above
    }
    if (touch(s.a, s.b, t.a, t.b)) {
      out.push({ kind: 'self-intersection', detail: `segments ${Math.min(s.i, t.i)} and ${Math.max(s.i, t.i)}: ` +
        `(${s.a.x},${s.a.y})-(${s.b.x},${s.b.y}) and (${t.a.x},${t.a.y})-(${t.b.x},${t.b.y})` });
    }
  });
  return out;
}

// inside returns 1 where p is inside ring, 0 on its boundary, -1 outside.
function inside(ring, p) {
  let in_ = false;
  for (let i = 0; i + 1 < ring.length; i++) {
    const a = ring[i], b = ring[i + 1];
    if (cross(a, b, p) === 0 && onSegment(a, b, p)) {
      return 0;
    }
    if ((a.y > p.y) !== (b.y > p.y) && p.x < a.x + (p.y - a.y) * (b.x - a.x) / (b.y - a.y)) {
      in_ = !in_;
    }
  }
  return in_ ? 1 : -1;
}

// polygonDefects returns the defects between the rings of one polygon: its
// exterior first, then its holes.
function polygonDefects(poly) {
  const out = [];
  const [shell, ...holes] = poly.rings;
  holes.forEach((h, k) => {
    if (h.ring.some(p => inside(shell.ring, p) < 0)) {
      out.push({ ring: h.index, kind: 'hole-outside', detail: `hole outside exterior ring ${shell.index}` });
    }
  });
  if (poly.rings.length > 1) {
    const reported = new Set();
    sweep(segments(poly.rings.map(r => r.ring)), (s, t) => {
      if (s.r === t.r || !crossOrOverlap(s.a, s.b, t.a, t.b)) {
        return;
      }
      const [r1, r2] = [poly.rings[s.r].index, poly.rings[t.r].index].sort((x, y) => x - y);
      if (!reported.has(`${r1},${r2}`)) {
        reported.add(`${r1},${r2}`);
        out.push({ ring: r2, kind: 'rings-cross', detail: `rings ${r1} and ${r2} cross or overlap at ` +
          `(${s.a.x},${s.a.y})-(${s.b.x},${s.b.y}) and (${t.a.x},${t.a.y})-(${t.b.x},${t.b.y})` });
      }
    });
  }
  return out;
}

const dir = process.argv[2];
const report = { tiles: 0, features: 0, polygons: 0, rings: 0, defects: [] };
for (const name of readdirSync(dir).sort()) {
  const data = readFileSync(join(dir, name));
  report.tiles++;
  if (data.length === 0) {
    continue;
  }
  const tile = new VectorTile(new PbfReader(data));
  for (const layerName of Object.keys(tile.layers)) {
    const layer = tile.layers[layerName];
    for (let f = 0; f < layer.length; f++) {
      const feature = layer.feature(f);
      report.features++;
      if (feature.type !== polygonType) {
        continue;
      }
      const defect = (ring, kind, detail) =>
        report.defects.push({ tile: name, layer: layerName, feature: feature.id, ring, kind, detail });
      const polys = [];
      feature.loadGeometry().forEach((ring, index) => {
        report.rings++;
        for (const d of ringDefects(ring)) {
          defect(index, d.kind, d.detail);
        }
        const a = area2(ring);
        if (a === 0) {
          defect(index, 'zero-area', 'a ring of no area');
        } else if (a > 0) {
          polys.push({ rings: [{ index, ring }] });
        } else if (polys.length === 0) {
          defect(index, 'first-ring-not-exterior', `area ${a / 2}: negative, yet first of the feature`);
        } else {
          polys[polys.length - 1].rings.push({ index, ring });
        }
      });
      report.polygons += polys.length;
      for (const poly of polys) {
        for (const d of polygonDefects(poly)) {
          defect(d.ring, d.kind, d.detail);
        }
      }
    }
  }
}
process.stdout.write(JSON.stringify(report) + '\n');
