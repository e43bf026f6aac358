package worker

import "testing"

// TestCompleteRunes: a push never ends inside a UTF-8 sequence (it would
// reach readers as U+FFFD); complete text and invalid bytes go as they are.
func TestCompleteRunes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"é", 2},
		{"a\xc3", 1},         // é begun
		{"a\xe2\x82", 1},     // € begun
		{"a\xf0\x9f\x98", 1}, // 😀 begun
		{"a\xf0\x9f\x98\x80", 5},
		{"a\xff", 2}, // not a sequence: sent (as U+FFFD)
	} {
		if got := completeRunes([]byte(tt.in)); got != tt.want {
			t.Errorf("completeRunes(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
