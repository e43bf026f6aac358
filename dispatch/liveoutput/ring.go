package liveoutput

import "unicode/utf8"

// ring keeps the last max bytes of a stream. The stream offsets start to
// end are held, the byte at offset o in buf[o % len(buf)]; buf grows (by
// doubling, up to max) as bytes come, so that a short output costs what it
// is. Not safe for concurrent use (its entry's mutex guards it).
type ring struct {
	max        int
	buf        []byte
	start, end int64 // the stream offsets held: [start, end), end-start ≤ len(buf)
}

// minRing is the size a ring starts at.
const minRing = 512

// writeAt places data at stream offset off: bytes before end are already
// held (or were dropped) and are ignored; after a gap between end and off
// (bytes that never arrived) the ring holds only what follows it. It
// reports whether anything was added.
func (r *ring) writeAt(off int64, data []byte) bool {
	if off < r.end {
		dup := r.end - off
		if dup >= int64(len(data)) {
			return false
		}
		data, off = data[dup:], r.end
	}
	if len(data) == 0 {
		return false
	}
	if off > r.end {
		r.start, r.end = off, off
	}
	if len(data) > r.max {
		cut := len(data) - r.max
		data, off = data[cut:], off+int64(cut)
		r.start, r.end = off, off
	}
	if need := min(int(r.end-r.start)+len(data), r.max); need > len(r.buf) {
		size := max(len(r.buf), minRing)
		for size < need {
			size *= 2
		}
		r.resize(min(size, r.max))
	}
	r.place(r.end, data)
	r.end += int64(len(data))
	if r.end-r.start > int64(len(r.buf)) {
		r.start = r.end - int64(len(r.buf))
	}
	return true
}

// resize makes buf size bytes long (at least what is held), keeping the
// bytes held.
func (r *ring) resize(size int) {
	held := r.copyOut(r.start)
	r.buf = make([]byte, size)
	r.place(r.start, held)
}

// place copies data (at most len(buf) bytes) to offset off's position
// on, wrapping around.
func (r *ring) place(off int64, data []byte) {
	i := int(off % int64(len(r.buf)))
	k := copy(r.buf[i:], data)
	copy(r.buf, data[k:])
}

// readFrom returns a copy of the bytes held from stream offset off (or
// from start, if off is before it) and the offset of the first. Bytes
// held from start, where the ring dropped what came before, begin at the
// next rune: the drop may have cut one (writes are whole runes, so a
// reader's earlier reads end between runes).
func (r *ring) readFrom(off int64) ([]byte, int64) {
	off = min(max(off, r.start), r.end)
	out := r.copyOut(off)
	if off == r.start && r.start > 0 {
		n := 0
		for n < len(out) && n < utf8.UTFMax-1 && !utf8.RuneStart(out[n]) {
			n++
		}
		out, off = out[n:], off+int64(n)
	}
	return out, off
}

// copyOut returns a copy of the bytes from off (within [start, end)) to
// end.
func (r *ring) copyOut(off int64) []byte {
	n := int(r.end - off)
	if n <= 0 {
		return nil
	}
	out := make([]byte, n)
	i := int(off % int64(len(r.buf)))
	k := copy(out, r.buf[i:])
	copy(out[k:], r.buf)
	return out
}
