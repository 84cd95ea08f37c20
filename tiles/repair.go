package tiles

import (
	"cmp"
	"math"
	"slices"

	"github.com/paulmach/orb"
)

// Repairing polygons on the integer grid of tile units.
//
// Clipping (orb/clip runs along the clip box between the places where a ring
// leaves and re-enters it), Douglas-Peucker and snapping to the grid can
// each leave rings that cross or touch themselves or each other, spikes and
// rings that fold back: what MVT 2.1 section 4.3.4.4 forbids. repair finds
// them with one sweep over the segments and, only where it found some,
// rebuilds the polygon: it splits segments where they meet (snapping the
// crossings to the grid, and again where that made new crossings, for at
// most maxNodingRounds rounds), counts
// each edge by the directions the rings run along it so that edges run once
// each way (spikes, the clip box's doubled edges) cancel out, and walks the
// edges left into simple rings: exteriors of positive area, holes of
// negative area in the smallest exterior around them.

// maxNodingRounds bounds the rounds of splitting segments at snapped
// crossings; one or two suffice in practice.
const maxNodingRounds = 8

// repair returns p, whose rings are closed, on the integer grid and wound as
// tilePolygons winds them, if it is valid; else the valid polygons that the
// same edges bound. segs is scratch space, kept between calls.
func repair(p orb.Polygon, segs *[]segment) orb.MultiPolygon {
	splits, meet := intersections(p, segs)
	if !meet && holesInside(p) {
		return orb.MultiPolygon{p}
	}
	for range maxNodingRounds {
		if len(splits) == 0 {
			break
		}
		p = split(p, splits)
		splits, _ = intersections(p, segs)
	}
	return rebuild(p)
}

// segment is the segment from ring[i] to ring[i+1] of one ring.
type segment struct {
	a, b       orb.Point
	ring, i    int
	minX, maxX float64
}

// segmentKey names a segment by its ring and index, for split.
type segmentKey struct{ ring, i int }

// cross is the z component of (b - a) x (c - a): exact on the grid.
func cross(a, b, c orb.Point) float64 {
	return (b[0]-a[0])*(c[1]-a[1]) - (b[1]-a[1])*(c[0]-a[0])
}

// between reports whether p, collinear with a and b, lies on segment ab.
func between(a, b, p orb.Point) bool {
	return min(a[0], b[0]) <= p[0] && p[0] <= max(a[0], b[0]) &&
		min(a[1], b[1]) <= p[1] && p[1] <= max(a[1], b[1])
}

// intersections sweeps the segments of p in x and returns the points at
// which segments must be split so that no two cross, or overlap, other than
// at shared endpoints; meet says whether any two segments share a point
// other than where consecutive segments of one ring join, or fold back
// over each other there. buf is scratch space for the segments.
func intersections(p orb.Polygon, buf *[]segment) (map[segmentKey][]orb.Point, bool) {
	segs := (*buf)[:0]
	defer func() { *buf = segs[:0] }()
	for r, ring := range p {
		for i := 0; i+1 < len(ring); i++ {
			a, b := ring[i], ring[i+1]
			segs = append(segs, segment{a, b, r, i, min(a[0], b[0]), max(a[0], b[0])})
		}
	}
	slices.SortFunc(segs, func(s, t segment) int { return cmp.Compare(s.minX, t.minX) })
	var splits map[segmentKey][]orb.Point
	meet := false
	add := func(s segment, q orb.Point) {
		if q != s.a && q != s.b {
			if splits == nil {
				splits = map[segmentKey][]orb.Point{}
			}
			k := segmentKey{s.ring, s.i}
			splits[k] = append(splits[k], q)
		}
	}
	for i := range segs {
		s := &segs[i]
		for j := i + 1; j < len(segs) && segs[j].minX <= s.maxX; j++ {
			t := &segs[j]
			if max(s.a[1], s.b[1]) < min(t.a[1], t.b[1]) || max(t.a[1], t.b[1]) < min(s.a[1], s.b[1]) {
				continue
			}
			if n := len(p[s.ring]) - 1; s.ring == t.ring && (s.i-t.i == 1 || t.i-s.i == 1 || s.i-t.i == n-1 || t.i-s.i == n-1) {
				// Consecutive: they share an endpoint q; they must not fold back.
				q, u, v := s.a, s.b, t.a // q shared, u the far end of s, v of t
				switch {
				case s.a == t.b:
				case s.b == t.a:
					q, u, v = s.b, s.a, t.b
				default:
					continue // cannot happen: rings are closed, with no repeated points
				}
				if cross(q, u, v) == 0 && (u[0]-q[0])*(v[0]-q[0])+(u[1]-q[1])*(v[1]-q[1]) > 0 {
					meet = true
					if between(q, u, v) {
						add(*s, v)
					} else {
						add(*t, u)
					}
				}
				continue
			}
			d1, d2, d3, d4 := cross(t.a, t.b, s.a), cross(t.a, t.b, s.b), cross(s.a, s.b, t.a), cross(s.a, s.b, t.b)
			if (d1 > 0 && d2 < 0 || d1 < 0 && d2 > 0) && (d3 > 0 && d4 < 0 || d3 < 0 && d4 > 0) {
				meet = true
				f := d1 / (d1 - d2)
				q := orb.Point{math.Round(s.a[0] + f*(s.b[0]-s.a[0])), math.Round(s.a[1] + f*(s.b[1]-s.a[1]))}
				add(*s, q)
				add(*t, q)
				continue
			}
			for _, c := range []struct {
				d    float64
				q    orb.Point
				on   segment
				from segment
			}{{d1, s.a, *t, *s}, {d2, s.b, *t, *s}, {d3, t.a, *s, *t}, {d4, t.b, *s, *t}} {
				if c.d == 0 && between(c.on.a, c.on.b, c.q) {
					meet = true
					add(c.on, c.q)
				}
			}
		}
	}
	return splits, meet
}

// split returns p with each segment split at its points, in order along it.
func split(p orb.Polygon, splits map[segmentKey][]orb.Point) orb.Polygon {
	out := make(orb.Polygon, len(p))
	for r, ring := range p {
		nr := make(orb.Ring, 0, len(ring))
		push := func(q orb.Point) {
			if len(nr) == 0 || nr[len(nr)-1] != q {
				nr = append(nr, q)
			}
		}
		for i := 0; i+1 < len(ring); i++ {
			a := ring[i]
			push(a)
			qs := splits[segmentKey{r, i}]
			slices.SortFunc(qs, func(u, v orb.Point) int {
				return cmp.Compare(math.Abs(u[0]-a[0])+math.Abs(u[1]-a[1]), math.Abs(v[0]-a[0])+math.Abs(v[1]-a[1]))
			})
			for _, q := range qs {
				push(q)
			}
		}
		push(ring[len(ring)-1])
		out[r] = nr
	}
	return out
}

// holesInside reports whether every hole of p, which no segment of its
// exterior meets, is inside it.
func holesInside(p orb.Polygon) bool {
	for _, h := range p[1:] {
		if inside(p[0], h[0]) <= 0 {
			return false
		}
	}
	return true
}

// inside returns 1 where q is inside ring, 0 on it, -1 outside.
func inside(ring orb.Ring, q orb.Point) int {
	in := false
	for i := 0; i+1 < len(ring); i++ {
		a, b := ring[i], ring[i+1]
		if cross(a, b, q) == 0 && between(a, b, q) {
			return 0
		}
		if (a[1] > q[1]) != (b[1] > q[1]) && q[0] < a[0]+(q[1]-a[1])*(b[0]-a[0])/(b[1]-a[1]) {
			in = !in
		}
	}
	if in {
		return 1
	}
	return -1
}

// vertex is a grid point as a map key.
type vertex struct{ x, y int32 }

func vertexOf(q orb.Point) vertex { return vertex{int32(q[0]), int32(q[1])} }

func (v vertex) point() orb.Point { return orb.Point{float64(v.x), float64(v.y)} }

// rebuild returns the simple rings that the edges of p bound, with the
// polygon's interior on their left (p's rings, noded, run that way), as
// polygons: each exterior with the holes whose smallest exterior it is.
func rebuild(p orb.Polygon) orb.MultiPolygon {
	// The net number of times the rings run along each edge, from its
	// smaller vertex to its larger one.
	type edge struct{ lo, hi vertex }
	less := func(u, v vertex) bool { return u.x < v.x || u.x == v.x && u.y < v.y }
	net := map[edge]int{}
	var order []vertex // vertices in the order first met, for a stable output
	seen := map[vertex]bool{}
	for _, ring := range p {
		for i := 0; i+1 < len(ring); i++ {
			u, v := vertexOf(ring[i]), vertexOf(ring[i+1])
			if !seen[u] {
				seen[u] = true
				order = append(order, u)
			}
			switch {
			case less(u, v):
				net[edge{u, v}]++
			case less(v, u):
				net[edge{v, u}]--
			}
		}
	}
	type out struct {
		to    vertex
		angle float64
		used  bool
	}
	outs := map[vertex][]*out{}
	addOut := func(u, v vertex, n int) {
		a := math.Atan2(float64(v.y-u.y), float64(v.x-u.x))
		for range n {
			outs[u] = append(outs[u], &out{to: v, angle: a})
		}
	}
	for e, n := range net {
		if n > 0 {
			addOut(e.lo, e.hi, n)
		} else if n < 0 {
			addOut(e.hi, e.lo, -n)
		}
	}
	for _, os := range outs { // map order: make each list's order stable
		slices.SortFunc(os, func(a, b *out) int { return cmp.Compare(a.angle, b.angle) })
	}

	var shells, holes []orb.Ring
	emit := func(loop []vertex) {
		if len(loop) < 3 {
			return
		}
		r := make(orb.Ring, 0, len(loop)+1)
		for _, v := range loop {
			r = append(r, v.point())
		}
		r = append(r, r[0])
		switch a := area2(r); {
		case a > 0:
			shells = append(shells, r)
		case a < 0:
			holes = append(holes, r)
		}
	}
	for _, start := range order {
		for _, first := range outs[start] {
			if first.used {
				continue
			}
			// Walk the edges, at each vertex turning into the first edge
			// clockwise from the one we came by: the edge that bounds the same
			// corner of the interior. The walk can end only where it began,
			// for every vertex has as many edges in as out.
			first.used = true
			path := []vertex{start}
			prev, cur := start, first.to
			for cur != start {
				back := math.Atan2(float64(prev.y-cur.y), float64(prev.x-cur.x))
				var next *out
				best := 0.0
				for _, o := range outs[cur] {
					if o.used {
						continue
					}
					d := math.Mod(back-o.angle+4*math.Pi, 2*math.Pi)
					if d == 0 {
						d = 2 * math.Pi // straight back: the last choice
					}
					if next == nil || d < best {
						next, best = o, d
					}
				}
				if next == nil {
					break // unbalanced: cannot happen for closed rings
				}
				next.used = true
				path = append(path, cur)
				prev, cur = cur, next.to
			}
			// Cut the closed walk into loops where it passes a vertex twice.
			var stack []vertex
			at := map[vertex]int{}
			for _, v := range path {
				if i, ok := at[v]; ok {
					emit(stack[i:])
					for _, w := range stack[i+1:] {
						delete(at, w)
					}
					stack = stack[:i+1]
					continue
				}
				at[v] = len(stack)
				stack = append(stack, v)
			}
			emit(stack)
		}
	}

	mp := make(orb.MultiPolygon, len(shells))
	bounds := make([]orb.Bound, len(shells))
	areas := make([]float64, len(shells))
	for i, s := range shells {
		mp[i] = orb.Polygon{s}
		bounds[i] = s.Bound()
		areas[i] = area2(s)
	}
	for _, h := range holes {
		hb, best := h.Bound(), -1
		for i, s := range shells {
			if !bounds[i].Contains(hb.Min) || !bounds[i].Contains(hb.Max) || best >= 0 && areas[i] >= areas[best] {
				continue
			}
			for _, q := range h {
				if in := inside(s, q); in != 0 {
					if in > 0 {
						best = i
					}
					break
				}
			}
		}
		if best >= 0 { // a hole in no exterior bounds nothing of the polygon
			mp[best] = append(mp[best], h)
		}
	}
	return mp
}

// area2 is twice the signed area of the closed ring r, positive for an
// exterior ring in tile units (the MVT specification's surveyor's formula).
func area2(r orb.Ring) float64 {
	s := 0.0
	for i := 0; i+1 < len(r); i++ {
		s += r[i][0]*r[i+1][1] - r[i+1][0]*r[i][1]
	}
	return s
}
