package store_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jobfleet/jobfleet/api"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/store"
)

// TestFitRun checks over random runs (up to MaxAttempts attempts with up
// to 64 KiB of output and error each, in characters JSON escapes to six
// bytes or that take several bytes of UTF-8) and budgets that the stored
// document fits the budget; that attempts keep their number, worker and
// times; that outputs stay valid UTF-8; that a run within budget is
// unchanged; and that the first and last attempts keep output when the
// budget allows.
func TestFitRun(t *testing.T) {
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	pieces := []string{"x", "é", "日本", "\x01", "<&>", "\"", "🚀"}
	text := func(rt *rapid.T, label string) string {
		n := rapid.IntRange(0, store.MaxOutputKeep/2).Draw(rt, label+"_len")
		p := rapid.SampledFrom(pieces).Draw(rt, label+"_piece")
		s := strings.Repeat(p, n/len(p)+1)
		for len(s) > n { // cut on a rune boundary
			_, size := utf8.DecodeLastRuneInString(s)
			s = s[:len(s)-size]
		}
		return s
	}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, api.MaxAttempts).Draw(rt, "attempts")
		r := api.Run{ID: store.RunID("j", at), JobID: "j", ScheduledAt: at, FiredAt: at, Status: api.RunRunning, Owner: "m", Epoch: 1}
		big := rapid.IntRange(0, min(n, 24)).Draw(rt, "big") // attempts with output (and the last)
		for i := range n {
			a := api.Attempt{Attempt: i + 1, Worker: strings.Repeat("w", rapid.IntRange(1, 128).Draw(rt, "worker")), StartedAt: at, FinishedAt: at.Add(time.Second)}
			if i < big || i == n-1 {
				a.Output, a.Error = text(rt, "output"), text(rt, "error")
			}
			r.Attempts = append(r.Attempts, a)
		}
		budget := rapid.IntRange(store.MinMaxRunBytes, 2<<20).Draw(rt, "budget")
		orig, _ := json.Marshal(r)
		got, val, err := store.FitRun(r, budget)
		if err != nil {
			rt.Fatal(err)
		}
		if len(val) > budget {
			rt.Fatalf("stored %d bytes, budget %d", len(val), budget)
		}
		if enc, _ := json.Marshal(got); string(enc) != string(val) {
			rt.Fatal("the stored document is not the returned run's")
		}
		if len(orig) <= budget && string(val) != string(orig) {
			rt.Fatal("a run within budget was changed")
		}
		if len(got.Attempts) != n {
			rt.Fatalf("%d attempts kept of %d", len(got.Attempts), n)
		}
		for i, a := range got.Attempts {
			o := r.Attempts[i]
			if a.Attempt != o.Attempt || a.Worker != o.Worker || !a.StartedAt.Equal(o.StartedAt) || !a.FinishedAt.Equal(o.FinishedAt) {
				rt.Fatalf("attempt %d changed beyond its texts: %+v", i+1, a)
			}
			if !utf8.ValidString(a.Output) || !utf8.ValidString(a.Error) {
				rt.Fatalf("attempt %d: invalid UTF-8 after cutting", i+1)
			}
			if (a.Output != o.Output || a.Error != o.Error) != (a.DroppedBytes > 0) {
				rt.Fatalf("attempt %d: texts changed %v, dropped_bytes %d", i+1, a.Output != o.Output || a.Error != o.Error, a.DroppedBytes)
			}
		}
		// With the default budget, the last attempt (the one that decides
		// the run) keeps something of a long output.
		if budget >= store.DefaultMaxRunBytes {
			if last, o := got.Attempts[n-1], r.Attempts[n-1]; len(o.Output) > 0 && len(last.Output) == 0 {
				rt.Fatalf("the last attempt lost all of its %d bytes of output within a %d byte budget", len(o.Output), budget)
			}
		}
	})
	// The extreme: every attempt with 64 KiB of output and of error.
	full := api.Run{ID: "x", Status: api.RunSucceeded}
	for i := range api.MaxAttempts {
		full.Attempts = append(full.Attempts, api.Attempt{Attempt: i + 1, Worker: strings.Repeat("w", 128),
			Output: strings.Repeat("o", store.MaxOutputKeep), Error: strings.Repeat("é", store.MaxOutputKeep/2)})
	}
	if _, val, err := store.FitRun(full, store.DefaultMaxRunBytes); err != nil || len(val) > store.DefaultMaxRunBytes {
		t.Fatalf("the largest run: %d bytes, %v; want at most %d", len(val), err, store.DefaultMaxRunBytes)
	}
	// A document that cannot fit even without texts is refused.
	huge := api.Run{ID: "x", Reason: strings.Repeat("r", 2*store.MinMaxRunBytes)}
	if _, _, err := store.FitRun(huge, 0); err == nil {
		t.Fatal("an over-budget run without texts was accepted")
	}
}
