package worker

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jobfleet/jobfleet/dispatch"
)

func TestReportOutput(t *testing.T) {
	const max = dispatch.MaxOutputBytes
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", ""},
		{"short", "hello\n", "hello\n"},
		{"exactly the cap", strings.Repeat("a", max), strings.Repeat("a", max)},
		{"over the cap", strings.Repeat("a", max+10), strings.Repeat("a", max)},
		{"invalid bytes replaced", "a\xffb", "a\uFFFDb"},
		{"rune cut by the cap dropped", strings.Repeat("a", max-1) + "€", strings.Repeat("a", max-1)},
		{"a run of invalid bytes is one replacement", strings.Repeat("\xff", max), "\uFFFD"},
		{"replacements do not exceed the cap", strings.Repeat("a\xff", max/2), strings.Repeat("a\uFFFD", max/4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reportOutput([]byte(tt.in))
			if got != tt.want {
				t.Errorf("reportOutput: got %d bytes %.20q…, want %d bytes %.20q…", len(got), got, len(tt.want), tt.want)
			}
			if len(got) > max || !utf8.ValidString(got) {
				t.Errorf("reportOutput: %d bytes, valid UTF-8 %v; want at most %d, valid", len(got), utf8.ValidString(got), max)
			}
		})
	}
}

func TestReportError(t *testing.T) {
	got := reportError(errors.New(strings.Repeat("é", maxErrorBytes)))
	if len(got) != maxErrorBytes || !utf8.ValidString(got) {
		t.Errorf("reportError: %d bytes, valid %v; want %d bytes of valid UTF-8", len(got), utf8.ValidString(got), maxErrorBytes)
	}
}

func TestCapWriter(t *testing.T) {
	c := &capWriter{max: 5}
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	if got := string(c.buf); got != "abcde" {
		t.Errorf("kept %q, want %q", got, "abcde")
	}
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
