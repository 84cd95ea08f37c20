package featurefile

import (
	"errors"
	"math"

	flatbuffers "github.com/google/flatbuffers/go"
)

// errCorrupt reports an offset or a length that points outside its buffer.
var errCorrupt = errors.New("corrupt flatbuffer: offset out of bounds")

// table is one flatbuffers table whose vtable has been checked to lie within
// its buffer. Every accessor checks the offsets it follows before reading,
// since the flatbuffers runtime trusts its input and would panic on a
// corrupt file. Buffers are shorter than 2 GiB (see sizePrefixed), so every
// position fits a flatbuffers.UOffsetT.
type table struct{ flatbuffers.Table }

// fits reports whether n bytes from pos lie within buf.
func fits(buf []byte, pos, n uint64) bool {
	return pos <= uint64(len(buf)) && n <= uint64(len(buf))-pos
}

// openTable reads the table that the offset stored at ref points to (ref 0
// for a buffer's root table).
func openTable(buf []byte, ref uint64) (table, error) {
	if !fits(buf, ref, 4) {
		return table{}, errCorrupt
	}
	pos := ref + uint64(flatbuffers.GetUOffsetT(buf[ref:]))
	if !fits(buf, pos, 4) {
		return table{}, errCorrupt
	}
	vt := int64(pos) - int64(flatbuffers.GetSOffsetT(buf[pos:]))
	if vt < 0 || !fits(buf, uint64(vt), 4) {
		return table{}, errCorrupt
	}
	vtLen := uint64(flatbuffers.GetVOffsetT(buf[vt:]))
	if vtLen < 4 || vtLen%2 != 0 || !fits(buf, uint64(vt), vtLen) {
		return table{}, errCorrupt
	}
	return table{flatbuffers.Table{Bytes: buf, Pos: flatbuffers.UOffsetT(pos)}}, nil
}

// field returns the position of field slot (its index in the schema), checked
// to hold size bytes; ok is false when the field is absent.
func (t table) field(slot int, size uint64) (pos flatbuffers.UOffsetT, ok bool, err error) {
	off := t.Offset(flatbuffers.VOffsetT(4 + 2*slot))
	if off == 0 {
		return 0, false, nil
	}
	p := uint64(t.Pos) + uint64(off)
	if !fits(t.Bytes, p, size) {
		return 0, false, errCorrupt
	}
	return flatbuffers.UOffsetT(p), true, nil
}

// uint8 reads a ubyte or enum field, def when absent.
func (t table) uint8(slot int, def uint8) (uint8, error) {
	pos, ok, err := t.field(slot, 1)
	if !ok {
		return def, err
	}
	return t.GetUint8(pos), nil
}

// uint16 reads a ushort field, def when absent.
func (t table) uint16(slot int, def uint16) (uint16, error) {
	pos, ok, err := t.field(slot, 2)
	if !ok {
		return def, err
	}
	return t.GetUint16(pos), nil
}

// int32 reads an int field, def when absent.
func (t table) int32(slot int, def int32) (int32, error) {
	pos, ok, err := t.field(slot, 4)
	if !ok {
		return def, err
	}
	return t.GetInt32(pos), nil
}

// uint64 reads a ulong field, def when absent.
func (t table) uint64(slot int, def uint64) (uint64, error) {
	pos, ok, err := t.field(slot, 8)
	if !ok {
		return def, err
	}
	return t.GetUint64(pos), nil
}

// vector returns the position of the first element of vector field slot and
// its length, checked to hold that many elements of size bytes; 0 elements
// when the field is absent.
func (t table) vector(slot int, size uint64) (flatbuffers.UOffsetT, int, error) {
	ref, ok, err := t.field(slot, 4)
	if !ok {
		return 0, 0, err
	}
	vec := uint64(ref) + uint64(t.GetUOffsetT(ref))
	if !fits(t.Bytes, vec, 4) {
		return 0, 0, errCorrupt
	}
	n := uint64(t.GetUint32(flatbuffers.UOffsetT(vec)))
	if n > (uint64(len(t.Bytes))-vec-4)/size {
		return 0, 0, errCorrupt
	}
	return flatbuffers.UOffsetT(vec + 4), int(n), nil
}

// bytes reads a [ubyte] or string field; nil when absent.
func (t table) bytes(slot int) ([]byte, error) {
	start, n, err := t.vector(slot, 1)
	if err != nil || n == 0 {
		return nil, err
	}
	return t.Bytes[start : int(start)+n], nil
}

// float64s reads a [double] field.
func (t table) float64s(slot int) ([]float64, error) {
	start, n, err := t.vector(slot, 8)
	if err != nil {
		return nil, err
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Float64frombits(t.GetUint64(start + flatbuffers.UOffsetT(8*i)))
	}
	return out, nil
}

// uint32s reads a [uint] field.
func (t table) uint32s(slot int) ([]uint32, error) {
	start, n, err := t.vector(slot, 4)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = t.GetUint32(start + flatbuffers.UOffsetT(4*i))
	}
	return out, nil
}

// table reads a table field; ok is false when it is absent.
func (t table) table(slot int) (sub table, ok bool, err error) {
	ref, ok, err := t.field(slot, 4)
	if !ok {
		return table{}, false, err
	}
	sub, err = openTable(t.Bytes, uint64(ref))
	return sub, err == nil, err
}

// tables reads a vector-of-tables field.
func (t table) tables(slot int) ([]table, error) {
	start, n, err := t.vector(slot, 4)
	if err != nil {
		return nil, err
	}
	out := make([]table, n)
	for i := range out {
		if out[i], err = openTable(t.Bytes, uint64(start)+uint64(4*i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}
