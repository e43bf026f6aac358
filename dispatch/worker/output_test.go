package worker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/api"
)

func TestReportOutput(t *testing.T) {
	const max = api.MaxOutputBytes
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", ""},
		{"short", "hello\n", "hello\n"},
		{"exactly the cap", strings.Repeat("a", max), strings.Repeat("a", max)},
		{"over the cap keeps head and tail", strings.Repeat("h", max) + strings.Repeat("t", max), ""}, // checked by shape below
		{"invalid bytes replaced", "a\xffb", "a\uFFFDb"},
		{"tab and newline kept", "a\tb\nc", "a\tb\nc"},
		{"escape sequences escaped", "\x1b[31mred\x1b[0m\r\n", `\x1b[31mred\x1b[0m\x0d` + "\n"},
		{"DEL and C1 controls escaped", "a\x7fb\u009bc", `a\x7fb\u009bc`},
		{"printable Unicode kept", "é€😀", "é€😀"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reportOutput([]byte(tt.in))
			if tt.name == "over the cap keeps head and tail" {
				// Checked by shape: the head, a marker, the tail.
				h, rest, ok := strings.Cut(got, "\n[... ")
				if !ok || strings.Trim(h, "h") != "" || !strings.HasSuffix(rest, strings.Repeat("t", 1000)) || !strings.Contains(rest, " bytes cut ...]\n") {
					t.Errorf("reportOutput: got %.40q … %.40q, want h's, a marker, t's", got, got[len(got)-40:])
				}
				n := 0
				fmt.Sscanf(rest, "%d bytes cut", &n)
				kept := strings.Count(got, "h") + strings.Count(got, "t") - strings.Count(cutMarker(int64(n)), "t")
				if n+kept != 2*max {
					t.Errorf("marker says %d bytes cut, %d kept: want them to add up to %d", n, kept, 2*max)
				}
			} else if got != tt.want {
				t.Errorf("reportOutput: got %d bytes %.40q…, want %d bytes %.40q…", len(got), got, len(tt.want), tt.want)
			}
			if len(got) > max || !utf8.ValidString(got) {
				t.Errorf("reportOutput: %d bytes, valid UTF-8 %v; want at most %d, valid", len(got), utf8.ValidString(got), max)
			}
		})
	}
}

func TestReportErrorKeepsTheEnd(t *testing.T) {
	msg := "start " + strings.Repeat("é", maxErrorBytes) + " the cause"
	got := reportError(errors.New(msg))
	if len(got) > maxErrorBytes || !utf8.ValidString(got) {
		t.Errorf("reportError: %d bytes, valid %v; want at most %d bytes of valid UTF-8", len(got), utf8.ValidString(got), maxErrorBytes)
	}
	if !strings.HasPrefix(got, "start é") || !strings.HasSuffix(got, "é the cause") || !strings.Contains(got, " bytes cut ...]") {
		t.Errorf("reportError: got %.30q … %.30q, want the start, a marker and the end", got, got[len(got)-30:])
	}
}

func TestOutputBuffer(t *testing.T) {
	b := newOutputBuffer(5)
	for _, s := range []string{"abc", "defg", "hij", "klmnopq", "r", "s"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	tail := b.tail[len(b.tail)-min(len(b.tail), 5):]
	if string(b.head) != "abcde" || string(tail) != "opqrs" || b.total != 19 {
		t.Errorf("kept head %q tail %q total %d, want %q, %q, 19", b.head, tail, b.total, "abcde", "opqrs")
	}
}

// TestOutputHeadAndTailProperties: whatever an executor writes, in
// whatever pieces, the reported output is valid UTF-8 within the cap
// without unsafe control characters; it is the whole (safe) output when
// that fits, and otherwise starts with a prefix of it, ends with a suffix
// of it, and says in between how many bytes were cut.
func TestOutputHeadAndTailProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(minClipLimit, 600).Draw(t, "limit")
		// Bytes from a small alphabet with multi-byte runes, invalid
		// bytes, controls and the marker's own characters.
		alphabet := []string{"a", "b", "\n", "\t", "\x1b", "\r", "\x7f", "é", "€", "😀", "\xff", "\xe2\x82", "\u009b", "[", ".", "1", " "}
		pieces := rapid.SliceOfN(rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, 200), 0, 12).Draw(t, "pieces")
		max := limit // the buffer keeps head and tail of the cap each, as for real outputs
		b := newOutputBuffer(max)
		var all []byte
		for _, p := range pieces {
			chunk := []byte(strings.Join(p, ""))
			all = append(all, chunk...)
			b.Write(chunk)
		}
		got := b.text(limit)
		if !utf8.ValidString(got) {
			t.Fatalf("not valid UTF-8: %q", got)
		}
		if len(got) > limit {
			t.Fatalf("%d bytes, over the limit %d", len(got), limit)
		}
		for _, r := range got {
			if isControl(r) && r != '\n' && r != '\t' {
				t.Fatalf("control character %U in %q", r, got)
			}
		}
		whole := safeText(string(all))
		if len(whole) <= limit && len(all) <= max {
			if got != whole {
				t.Fatalf("got %q, want the whole output %q", got, whole)
			}
			return
		}
		i := strings.LastIndex(got, "\n[... ")
		if i < 0 {
			t.Fatalf("no marker in %q (output of %d bytes, %d safe)", got, len(all), len(whole))
		}
		head, rest := got[:i], got[i:]
		j := strings.Index(rest, " bytes cut ...]\n")
		if j < 0 {
			t.Fatalf("malformed marker in %q", got)
		}
		tail := rest[j+len(" bytes cut ...]\n"):]
		if !strings.HasPrefix(whole, head) {
			t.Fatalf("head %q is not a prefix of the output %q", head, whole)
		}
		if !strings.HasSuffix(whole, tail) {
			t.Fatalf("tail %q is not a suffix of the output %q", tail, whole)
		}
		if len(head)+len(tail) >= len(whole) {
			t.Fatalf("head and tail (%d+%d bytes) overlap in %d bytes of output", len(head), len(tail), len(whole))
		}
		var cut int
		if _, err := fmt.Sscanf(rest[len("\n[... "):], "%d", &cut); err != nil || cut <= 0 {
			t.Fatalf("marker %q does not say how many bytes were cut", rest[:j])
		}
	})
}

func TestHandlerName(t *testing.T) {
	for name, want := range map[string]bool{
		"send-invoice": true, "a": true, "A1.b_c:d-e": true,
		"": false, "1a": false, "http": false, "shell": false, "a b": false, "é": false,
		strings.Repeat("a", 64): true, strings.Repeat("a", 65): false,
	} {
		if got := validHandlerName(name); got != want {
			t.Errorf("validHandlerName(%q) = %v, want %v", name, got, want)
		}
	}
}
