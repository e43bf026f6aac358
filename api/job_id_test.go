package api

import (
	"errors"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
	"pgregory.net/rapid"
)

func TestEscapeID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want string
	}{
		{name: "plain", id: "nightly-report_v2.1", want: "nightly-report_v2.1"},
		{name: "slash", id: "team/job", want: "team%2Fjob"},
		{name: "space", id: "a b", want: "a%20b"},
		{name: "percent", id: "100%", want: "100%25"},
		{name: "already escaped looking", id: "a%2Fb", want: "a%252Fb"},
		{name: "unicode", id: "Übersicht", want: "%C3%9Cbersicht"},
		{name: "emoji", id: "🚀", want: "%F0%9F%9A%80"},
		{name: "question and hash", id: "a?b#c", want: "a%3Fb%23c"},
		{name: "kept punctuation", id: "a:b@c=d+e&f$g~h", want: "a:b@c=d+e&f$g~h"},
		{name: "dots", id: "..", want: ".."},
		{name: "empty", id: "", want: ""},
		{name: "invalid utf-8", id: "\xff", want: "%FF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EscapeID(tt.id)
			if got != tt.want {
				t.Errorf("EscapeID(%q): got %q, want %q", tt.id, got, tt.want)
			}
			back, err := UnescapeID(got)
			if err != nil {
				t.Fatalf("UnescapeID(%q): %v", got, err)
			}
			if back != tt.id {
				t.Errorf("UnescapeID(%q): got %q, want %q", got, back, tt.id)
			}
		})
	}
}

func TestUnescapeIDErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{name: "bad escape", in: "%zz"},
		{name: "truncated escape", in: "a%2"},
		{name: "lower-case hex", in: "a%2fb"},
		{name: "needless escape", in: "%61"},
		{name: "raw slash", in: "a/b"},
		{name: "raw space", in: "a b"},
		{name: "raw unicode", in: "é"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := UnescapeID(tt.in)
			if !errors.Is(err, ErrInvalidJob) {
				t.Errorf("UnescapeID(%q): got %q, %v, want an error matching ErrInvalidJob", tt.in, got, err)
			}
		})
	}
}

// TestEscapeIDProperties checks over arbitrary strings (valid UTF-8 or
// not) that escaping is reversible, injective and yields a key segment.
func TestEscapeIDProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var id string
		if rapid.Bool().Draw(t, "bytes") {
			id = string(rapid.SliceOf(rapid.Byte()).Draw(t, "raw"))
		} else {
			id = rapid.String().Draw(t, "id")
		}
		esc := EscapeID(id)
		if strings.Contains(esc, "/") {
			t.Fatalf("EscapeID(%q) = %q: got a '/', want none", id, esc)
		}
		for i := 0; i < len(esc); i++ {
			if c := esc[i]; c <= ' ' || c >= 0x7f {
				t.Fatalf("EscapeID(%q) = %q: got byte %#x, want printable ASCII", id, esc, c)
			}
		}
		back, err := UnescapeID(esc)
		if err != nil {
			t.Fatalf("UnescapeID(EscapeID(%q) = %q): %v", id, esc, err)
		}
		if back != id {
			t.Fatalf("UnescapeID(EscapeID(%q)): got %q, want the original", id, back)
		}
		other := rapid.String().Draw(t, "other")
		if other != id && EscapeID(other) == esc {
			t.Fatalf("EscapeID(%q) == EscapeID(%q) = %q: want distinct", id, other, esc)
		}
	})
}

// TestValidIDsRoundTrip checks, over arbitrary strings, that the IDs
// Validate accepts keep its rules and survive escaping; and that any
// printable ASCII string without surrounding blanks within the length
// limit is accepted.
func TestValidIDsRoundTrip(t *testing.T) {
	t.Run("arbitrary", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			id := rapid.String().Draw(t, "id")
			j := validJob()
			j.ID = id
			if err := j.Validate(DefaultLimits()); err != nil {
				return
			}
			for i, r := range id {
				if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Co, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) ||
					(unicode.IsSpace(r) && r != ' ') || (i == 0 && unicode.Is(unicode.M, r)) {
					t.Fatalf("Validate accepted %q with %U", id, r)
				}
			}
			if strings.TrimSpace(id) != id || !norm.NFKC.IsNormalString(id) {
				t.Fatalf("Validate accepted %q: surrounding blanks or not NFKC", id)
			}
			back, err := UnescapeID(EscapeID(id))
			if err != nil || back != id {
				t.Fatalf("round trip of %q: got %q, %v", id, back, err)
			}
		})
	})
	t.Run("printable ascii", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			id := rapid.StringMatching(`[!-~]([ -~]{0,58}[!-~])?`).Draw(t, "id")
			if id == "." || id == ".." {
				t.Skip("reserved")
			}
			j := validJob()
			j.ID = id
			if err := j.Validate(DefaultLimits()); err != nil {
				t.Fatalf("Validate with ID %q: %v", id, err)
			}
		})
	})
}
