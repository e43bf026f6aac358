package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/store"
	"pgregory.net/rapid"
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

// TestKeysAreTheirLayout checks the keys built in one buffer against the
// layout of Keys' doc written as concatenations, over random namespaces,
// partitions (past five digits too), IDs that need escaping and times.
func TestKeysAreTheirLayout(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := store.Keys{NS: rapid.StringMatching(`(/[a-z]{0,8}/)?`).Draw(t, "ns")}
		p := rapid.IntRange(0, 200000).Draw(t, "p")
		id := rapid.StringMatching(`[a-zA-Z0-9._~ /%!-]{1,40}`).Draw(t, "id")
		at := time.UnixMilli(rapid.Int64Range(0, 1<<42).Draw(t, "ms"))
		pp, esc, ts := fmt.Sprintf("%05d", p), store.EscapeID(id), store.FormatTime(at)
		for _, c := range []struct{ got, want string }{
			{k.PartitionJobsPrefix(p), k.NS + "jobs/" + pp + "/"},
			{k.Spec(p, id), k.NS + "jobs/" + pp + "/" + esc},
			{k.PausePrefix(p), k.NS + "jobs/" + pp + "/!paused/"},
			{k.Pause(p, id), k.NS + "jobs/" + pp + "/!paused/" + esc},
			{k.StatePrefix(p), k.NS + "state/" + pp + "/"},
			{k.State(p, id), k.NS + "state/" + pp + "/" + esc},
			{k.PartitionRunsPrefix(p), k.NS + "runs/" + pp + "/"},
			{k.RunPrefix(p, id), k.NS + "runs/" + pp + "/" + esc + "/"},
			{k.Run(p, id, at), k.NS + "runs/" + pp + "/" + esc + "/" + ts},
			{k.QueuePrefix(p), k.NS + "queue/" + pp + "/"},
			{k.Queue(p, id, at), k.NS + "queue/" + pp + "/" + esc + "/" + ts},
			{k.Failing(p, id, at), k.NS + "failing/" + pp + "/" + esc + "/" + ts},
		} {
			if c.got != c.want {
				t.Fatalf("got %q, want %q", c.got, c.want)
			}
		}
	})
}
