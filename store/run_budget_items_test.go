package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// itemsRun returns a run of n items over 8 workers with realistic IDs,
// each item with attempts attempts of the given output and error (the
// last succeeded), spread over an hour.
func itemsRun(n, attempts int, output, errText string) api.Run {
	fired := time.Date(2026, 6, 1, 2, 0, 0, 123_456_789, time.UTC)
	r := api.Run{ID: store.RunID("team/reindex", fired), JobID: "team/reindex", ScheduledAt: fired, FiredAt: fired,
		Status: api.RunSucceeded, Attempts: []api.Attempt{}, Owner: "orchestrator-eu-1:8080", Epoch: 123456}
	for i := range n {
		it := api.Item{Index: i, Status: api.RunSucceeded, Attempts: []api.Attempt{}}
		for k := range attempts {
			start := fired.Add(time.Duration(i*attempts+k) * 1237 * time.Millisecond).Truncate(time.Millisecond)
			a := api.Attempt{Attempt: k + 1, Worker: fmt.Sprintf("ip-10-0-12-%d.eu-west-1.compute.internal-%d", i%8, 40000+i%8),
				Credential: "3f9a1c2b7d4e", StartedAt: start, FinishedAt: start.Add(2345 * time.Millisecond), Output: output}
			if k < attempts-1 {
				a.Error = errText
			}
			it.Attempts = append(it.Attempts, a)
		}
		r.Items = append(r.Items, it)
	}
	return r
}

// TestItemRunDocumentSize measures the stored document of runs of 1 000
// items: it fits the default run budget as it is with one short attempt
// an item, and once FitRun trimmed it with three attempts an item and
// large outputs; the items' states and attempts all stay.
func TestItemRunDocumentSize(t *testing.T) {
	long := strings.Repeat("log line of the item's output\n", 140) // 4 KB
	for _, c := range []struct {
		name     string
		attempts int
		output   string
	}{
		{"1 attempt, short output", 1, "ok"},
		{"3 attempts, short output", 3, "ok"},
		{"3 attempts, 4 KB outputs", 3, long},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := itemsRun(1000, c.attempts, c.output, "POST https://reindex.internal/shard: status 503 Service Unavailable")
			apiForm, _ := json.Marshal(r)
			raw, err := store.EncodeRun(r)
			if err != nil {
				t.Fatal(err)
			}
			fitted, val, err := store.FitRun(r, store.DefaultMaxRunBytes)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("1 000 items, %s: API form %d bytes, stored %d bytes (%.0f an item), fitted %d bytes (budget %d)",
				c.name, len(apiForm), len(raw), float64(len(raw))/1000, len(val), store.DefaultMaxRunBytes)
			if len(val) > store.DefaultMaxRunBytes {
				t.Fatalf("fitted document %d bytes, over the budget of %d", len(val), store.DefaultMaxRunBytes)
			}
			if c.output == "ok" && len(raw) > store.DefaultMaxRunBytes {
				t.Fatalf("untrimmed document %d bytes, over the budget", len(raw))
			}
			var back api.Run
			if err := json.Unmarshal(val, &back); err != nil {
				t.Fatal(err)
			}
			if len(back.Items) != 1000 || back.AttemptCount() != 1000*c.attempts {
				t.Fatalf("read back %d items, %d attempts; want 1000, %d", len(back.Items), back.AttemptCount(), 1000*c.attempts)
			}
			for i, it := range back.Items {
				want := fitted.Items[i].Attempts[c.attempts-1]
				got := it.Attempts[c.attempts-1]
				if it.Status != api.RunSucceeded || got.Worker != want.Worker || !got.StartedAt.Equal(want.StartedAt) || !got.FinishedAt.Equal(want.FinishedAt) {
					t.Fatalf("item %d read back as %+v, want %+v", i, got, want)
				}
			}
		})
	}
}

// TestItemRunOverBudgetKeepsAttempts: a run whose items' attempts alone
// take more than the budget keeps them all, without outputs, rather than
// refuse the write.
func TestItemRunOverBudgetKeepsAttempts(t *testing.T) {
	r := itemsRun(10000, 2, "some output", "an error")
	_, val, err := store.FitRun(r, store.DefaultMaxRunBytes)
	if err != nil {
		t.Fatal(err)
	}
	var back api.Run
	if err := json.Unmarshal(val, &back); err != nil {
		t.Fatal(err)
	}
	t.Logf("10 000 items of 2 attempts: %d bytes", len(val))
	if back.AttemptCount() != 20000 || len(val) > store.MaxItemRunBytes {
		t.Fatalf("%d attempts in %d bytes, want 20000 within %d", back.AttemptCount(), len(val), store.MaxItemRunBytes)
	}
	if a := back.Items[0].Attempts[0]; a.Output != "" || a.Error != "" || a.DroppedBytes == 0 {
		t.Fatalf("an attempt of the over-budget run = %+v, want its output and error dropped and counted", a)
	}
}
