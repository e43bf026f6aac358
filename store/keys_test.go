package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/store"
)

func TestParseRunID(t *testing.T) {
	at := time.Date(2026, 12, 1, 2, 0, 0, 123e6, time.UTC)
	tests := []struct {
		in     string
		wantID string
		ok     bool
	}{
		{store.RunID("a/b", at), "a/b", true},
		{store.RunID("x@y", at), "x@y", true},
		{"a/b@2026-12-01T02:00:00.123Z", "a/b", true},   // pasted unescaped
		{"100%@2026-12-01T02:00:00.123Z", "100%", true}, // not valid escaping: taken as the ID
		{"no-at-sign", "", false},
		{"@2026-12-01T02:00:00.123Z", "", false},
		{"job@yesterday", "", false},
	}
	for _, tt := range tests {
		id, got, err := store.ParseRunID(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseRunID(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("ParseRunID(%q) = %v, want ErrNotFound", tt.in, err)
			}
			continue
		}
		if id != tt.wantID || !got.Equal(at) {
			t.Errorf("ParseRunID(%q) = %q, %v; want %q, %v", tt.in, id, got, tt.wantID, at)
		}
	}
}

func TestParseRunKey(t *testing.T) {
	k := store.Keys{NS: "/ns/"}
	at := time.Date(2026, 12, 1, 2, 0, 0, 123e6, time.UTC)
	id, got, ok := k.ParseRunKey(4, k.Run(4, "a/b c", at))
	if !ok || id != "a/b c" || !got.Equal(at) {
		t.Fatalf("ParseRunKey(Run(...)) = %q, %v, %v", id, got, ok)
	}
	for _, key := range []string{k.Run(5, "a", at), k.RunPrefix(4, "a"), k.PartitionRunsPrefix(4) + "a/yesterday", k.State(4, "a")} {
		if _, _, ok := k.ParseRunKey(4, key); ok {
			t.Errorf("ParseRunKey(%q) ok, want not a run key of partition 4", key)
		}
	}
}
