package pmtiles

import "math/bits"

// MaxZoom is the highest zoom whose tile IDs fit in 64 bits.
const MaxZoom = 31

// ZXYToID returns the tile ID of tile z/x/y: the tiles of all lower zooms
// counted first, then the tile's position on the Hilbert curve filling zoom
// z. It needs z <= MaxZoom and x, y < 2^z; ValidZXY says whether they are.
func ZXYToID(z uint8, x, y uint32) uint64 {
	id := zoomStart(z)
	for s := uint32(1) << z >> 1; s > 0; s >>= 1 {
		rx, ry := x&s != 0, y&s != 0
		id += uint64(s) * uint64(s) * quadrant(rx, ry)
		x, y = rotate(s, x, y, rx, ry)
	}
	return id
}

// IDToZXY returns the tile whose ID is id: the inverse of ZXYToID. IDs past
// the last tile of MaxZoom give a meaningless tile.
func IDToZXY(id uint64) (z uint8, x, y uint32) {
	z = uint8((bits.Len64(3*id+1) - 1) / 2)
	d := id - zoomStart(z)
	for s := uint32(1); s < uint32(1)<<z; s <<= 1 {
		rx := d&2 != 0
		ry := (d&1 != 0) != rx
		x, y = rotate(s, x, y, rx, ry)
		if rx {
			x += s
		}
		if ry {
			y += s
		}
		d >>= 2
	}
	return z, x, y
}

// ValidZXY reports whether z/x/y is a tile: z <= MaxZoom, x and y < 2^z.
func ValidZXY(z uint8, x, y uint32) bool {
	return z <= MaxZoom && uint64(x) < 1<<z && uint64(y) < 1<<z
}

// zoomStart is the ID of tile z/0/0: the number of tiles of lower zooms,
// (4^z - 1) / 3.
func zoomStart(z uint8) uint64 {
	return (1<<(2*uint(z)) - 1) / 3
}

// quadrant is the position, 0 to 3, of the quadrant (rx, ry) along the
// curve's basic U shape: (0,0), (0,1), (1,1), (1,0).
func quadrant(rx, ry bool) uint64 {
	switch {
	case !rx && !ry:
		return 0
	case !rx && ry:
		return 1
	case rx && ry:
		return 2
	default:
		return 3
	}
}

// rotate turns the square of side s so that the curve within quadrant
// (rx, ry) runs like the whole curve: the lower quadrants are mirrored on a
// diagonal, the lower right one also flipped.
func rotate(s, x, y uint32, rx, ry bool) (uint32, uint32) {
	if ry {
		return x, y
	}
	if rx {
		x, y = s-1-x, s-1-y
	}
	return y, x
}
