package worker

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/jobfleet/jobfleet/api"
)

// maxErrorBytes caps the error message a completion carries.
const maxErrorBytes = 8 << 10

// minClipLimit is the smallest limit clip is meant for: room for the
// marker and a little text on each side.
const minClipLimit = 96

// outputBuffer keeps the first and the last max bytes written to it and
// counts those in between, without ever failing the writer: an executor's
// output of any length costs at most 3·max bytes of memory. The zero value
// is not usable; see newOutputBuffer. Not safe for concurrent writes (exec
// serialises the writes to one writer shared by standard output and
// error).
type outputBuffer struct {
	max   int
	head  []byte // the first max bytes
	tail  []byte // the last bytes after head, at most 2·max, trimmed to max on read
	total int64  // bytes written
	// live, if set, is given every byte as well (the attempt's
	// livePusher, which never blocks).
	live io.Writer
}

func newOutputBuffer(max int) *outputBuffer { return &outputBuffer{max: max} }

// Write keeps p's bytes as described on outputBuffer and always succeeds.
func (b *outputBuffer) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	if b.live != nil {
		_, _ = b.live.Write(p)
	}
	if room := b.max - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= b.max {
		b.tail = append(b.tail[:0], p[len(p)-b.max:]...)
		return n, nil
	}
	if len(b.tail)+len(p) > 2*b.max {
		// Keep the last max-len(p) bytes, then append: amortised O(1).
		keep := b.max - len(p)
		copy(b.tail, b.tail[len(b.tail)-keep:])
		b.tail = b.tail[:keep]
	}
	b.tail = append(b.tail, p...)
	return n, nil
}

// text returns what a completion carries of the output: at most limit
// bytes of valid UTF-8 without control characters other than newline and
// tab (see safeText); output longer than that keeps its head and its tail
// with a marker in between saying how many bytes were cut (see clip). A
// nil buffer has no text.
func (b *outputBuffer) text(limit int) string {
	if b == nil || b.total == 0 {
		return ""
	}
	tail := b.tail
	if len(tail) > b.max {
		tail = tail[len(tail)-b.max:]
	}
	omitted := b.total - int64(len(b.head)) - int64(len(tail))
	if omitted == 0 {
		// Contiguous: sanitise as one, so a rune split between head and
		// tail stays whole.
		return clip(safeText(string(b.head)+string(tail)), "", 0, limit)
	}
	return clip(safeText(trimPartialEnd(b.head)), safeText(trimPartialStart(tail)), omitted, limit)
}

// reportOutput turns an executor's raw output into a completion's output:
// see outputBuffer.text, with api.MaxOutputBytes.
func reportOutput(b []byte) string {
	ob := newOutputBuffer(api.MaxOutputBytes)
	ob.Write(b)
	return ob.text(api.MaxOutputBytes)
}

// reportError turns an error into a completion's message, at most
// maxErrorBytes of safe text, its head and tail kept like an output's.
func reportError(err error) string {
	ob := newOutputBuffer(maxErrorBytes)
	ob.Write([]byte(err.Error()))
	return ob.text(maxErrorBytes)
}

// safeText returns s as valid UTF-8 that is safe to show on a terminal:
// each invalid byte becomes U+FFFD, and control characters other than
// newline and tab are written out as escapes: \x1b for ESC, \x7f for DEL,
// \u009b for the C1 controls, so that a coloured output stays readable but
// cannot drive the terminal of whoever reads it. Each rune maps on its
// own, so the text of a prefix (or suffix) of s is a prefix (or suffix) of
// the text of s.
func safeText(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (isControl(r) && r != '\n' && r != '\t') {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			sb.WriteRune(utf8.RuneError)
		case r == '\n' || r == '\t':
			sb.WriteRune(r)
		case r < 0x80 && isControl(r):
			fmt.Fprintf(&sb, `\x%02x`, r)
		case isControl(r):
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			sb.WriteString(s[i : i+n])
		}
		i += n
	}
	return sb.String()
}

// isControl reports whether r is a C0 or C1 control character or DEL.
func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }

// trimPartialEnd drops an incomplete rune at the end of b (cut by a byte
// limit), so that b's text is a prefix of the whole output's.
func trimPartialEnd(b []byte) string {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return string(b[:i])
			}
			break
		}
	}
	return string(b)
}

// trimPartialStart drops the continuation bytes at the start of b (a rune
// cut by keeping only the last bytes), so that b's text is a suffix of the
// whole output's.
func trimPartialStart(b []byte) string {
	i := 0
	for i < len(b) && i < utf8.UTFMax-1 && !utf8.RuneStart(b[i]) {
		i++
	}
	return string(b[i:])
}

// clip joins head and tail, the start and the end of a text with omitted
// bytes missing in between (tail is empty and omitted 0 for a text given
// whole as head), into at most limit bytes (at least minClipLimit): the
// whole text if it fits, else a prefix of head (a quarter of the room, or
// more if the tail is short) and a suffix of tail (the rest: errors are
// usually at the end), cut at rune boundaries, with a marker in between
// saying how many bytes were cut in all.
func clip(head, tail string, omitted int64, limit int) string {
	if omitted == 0 && len(head)+len(tail) <= limit {
		return head + tail
	}
	whole := omitted == 0
	if whole {
		// One contiguous text: its prefix and suffix must not overlap.
		head, tail = head+tail, head+tail
	}
	room := limit - len(cutMarker(0))
	for {
		hk := min(len(head), room/4)
		tk := min(len(tail), room-hk)
		hk = min(len(head), room-tk) // a short tail leaves its room to the head
		h := prefixAtRune(head, hk)
		t := suffixAtRune(tail, tk)
		cut := omitted + int64(len(head)-len(h)) + int64(len(tail)-len(t))
		if whole {
			cut = int64(len(head) - len(h) - len(t))
		}
		m := cutMarker(cut)
		if len(h)+len(m)+len(t) <= limit {
			return h + m + t
		}
		room -= len(h) + len(m) + len(t) - limit // the count took more digits
	}
}

// cutMarker is what clip puts between head and tail.
func cutMarker(n int64) string {
	return fmt.Sprintf("\n[... %d bytes cut ...]\n", n)
}

// prefixAtRune returns the longest prefix of s of at most n bytes that
// ends at a rune boundary.
func prefixAtRune(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// suffixAtRune returns the longest suffix of s of at most n bytes that
// starts at a rune boundary.
func suffixAtRune(s string, n int) string {
	if n >= len(s) {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
