package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/store"
)

func TestOutboxKeys(t *testing.T) {
	k := store.Keys{NS: "ns/"}
	at := time.Date(2026, 5, 1, 2, 3, 4, 5e6, time.UTC)
	for _, id := range []string{"a", "a@b", "team/job", "x y"} {
		body := k.OutboxRun(3, id, at, api.RunDead, 2)
		entry := k.Outbox(3, id, at, api.RunDead, 2, 7)
		for _, key := range []string{body, entry} {
			if !strings.HasPrefix(key, k.OutboxJobPrefix(3, id)) {
				t.Errorf("%s is not under its job's prefix %s", key, k.OutboxJobPrefix(3, id))
			}
		}
		got, ok := k.ParseOutboxKey(3, entry)
		if want := (store.OutboxKey{JobID: id, At: at, Event: api.RunDead, Attempt: 2, Index: 7}); !ok || got != want {
			t.Errorf("ParseOutboxKey(%s) = %+v, %v; want %+v", entry, got, ok, want)
		}
		if got, ok := k.ParseOutboxKey(3, body); !ok || got.Index != -1 || got.JobID != id {
			t.Errorf("ParseOutboxKey(%s) = %+v, %v; want the run document of %s", body, got, ok, id)
		}
	}
	// A job's prefix holds none of another's, even when one ID starts
	// with the other.
	if strings.HasPrefix(k.OutboxRun(0, "a@b", at, api.RunDead, 1), k.OutboxJobPrefix(0, "a")) {
		t.Error("job a's prefix covers job a@b's notifications")
	}
	for _, bad := range []string{
		"ns/outbox/00003/" + store.RunID("a", at) + "/dead-2-0", // an earlier version's key
		"ns/outbox/00003/a/" + api.FormatTime(at) + "/running-1",
		"ns/outbox/00003/a/" + api.FormatTime(at) + "/dead-01",
		"ns/outbox/00003/a/" + api.FormatTime(at) + "/dead-1/8",
		"ns/outbox/00003/a/yesterday/dead-1",
		"ns/outbox/00004/a/" + api.FormatTime(at) + "/dead-1",
	} {
		if got, ok := k.ParseOutboxKey(3, bad); ok {
			t.Errorf("ParseOutboxKey(%s) = %+v, want not parsed", bad, got)
		}
	}
}
