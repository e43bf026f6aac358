package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/store"
)

// The worst case of a run of steps that validation accepts, as
// worstStepJob builds it: 256 steps with IDs of api.MaxStepIDBytes, 1 024
// needs, each step allowed 78 attempts (256 × 78 ≤ api.MaxShardAttempts).
const (
	worstAttempts = api.MaxShardAttempts / api.MaxSteps // 78
	groupA        = 128                                 // succeed, after worstAttempts-1 failures, with results
	groupB        = 64                                  // die after worstAttempts failures
)

// worstID returns the ID of step k, api.MaxStepIDBytes long.
func worstID(k int) string {
	id := fmt.Sprintf("step-%03d-", k)
	return id + strings.Repeat("x", api.MaxStepIDBytes-len(id))
}

// worstStepJob returns a job of api.MaxSteps steps: group A (steps 0 to
// 127: a root and 127 steps that need it), group B (64 steps, each
// needing one step of A), group C (63 steps, each needing 12 of B) and a
// last step needing all of B and 13 of C: 1 024 needs in all.
// Group C and the last step run when late is "always", and are skipped
// when it is "success".
func worstStepJob(late api.StepWhen) api.Job {
	j := api.Job{ID: "team/worst-pipeline", Schedule: "@every 1h", Retry: api.RetryPolicy{MaxAttempts: worstAttempts}}
	for k := range api.MaxSteps {
		s := step(worstID(k), "")
		if k >= groupA+groupB {
			s.When = late
		}
		switch {
		case k == 0:
		case k < groupA:
			s.Needs = []string{worstID(0)}
		case k < groupA+groupB:
			s.Needs = []string{worstID(k - groupA + 1)}
		case k < api.MaxSteps-1:
			for n := range 12 {
				s.Needs = append(s.Needs, worstID(groupA+(k*7+n*5)%groupB))
			}
		default:
			for n := range groupB {
				s.Needs = append(s.Needs, worstID(groupA+n))
			}
			for n := range 13 {
				s.Needs = append(s.Needs, worstID(groupA+groupB+n))
			}
		}
		j.Steps = append(j.Steps, s)
	}
	return j
}

// Outputs and errors of the worst case's attempts: what a worker reports
// at most, and a long error.
var (
	worstOutput = strings.Repeat("o", store.MaxOutputKeep)
	worstError  = strings.Repeat("e", store.MaxOutputKeep)
	longError   = strings.Repeat("POST https://warehouse.internal/load: 503 Service Unavailable; ", 8)
)

// worstAttemptsOf returns n attempts from start, on long worker IDs, the
// first and the last with 64 KiB of output and (but the last when ok) of
// error, those between with a 512-byte error: the runtime fits the run
// at each attempt's write, so those between were cut long before the
// last came.
func worstAttemptsOf(n int, start time.Time, ok bool) []api.Attempt {
	as := make([]api.Attempt, n)
	for k := range as {
		at := api.ItemTime(start.Add(time.Duration(k) * 1237 * time.Millisecond))
		as[k] = api.Attempt{Attempt: k + 1, Worker: fmt.Sprintf("ip-10-0-%03d-%03d.eu-west-1.compute.internal-%05d", k%256, k%199, 40000+k),
			Credential: "3f9a1c2b7d4e5f60", StartedAt: at, FinishedAt: at.Add(2345 * time.Millisecond), Error: longError}
		if k == 0 || k == n-1 {
			as[k].Output, as[k].Error = worstOutput, worstError
		}
		if ok && k == n-1 {
			as[k].Error = ""
		}
	}
	return as
}

// worstRound plays one round of run r at now: the steps of group A not
// ended succeed after worstAttempts-1 failures, each with a result of
// api.MaxRunResultsBytes/groupA bytes (the run's results at their cap),
// the steps of group B die after worstAttempts failures; Settle then
// skips the rest, with their reasons.
func worstRound(t *testing.T, r api.Run, now time.Time) api.Run {
	t.Helper()
	result := json.RawMessage(`"` + strings.Repeat("r", api.MaxRunResultsBytes/groupA-2) + `"`)
	for k := range groupA + groupB {
		s := r.Steps[k]
		it := &r.Items[s.First]
		if it.Status.Final() {
			continue
		}
		if k < groupA {
			it.Status, it.Attempts, it.Result = api.RunSucceeded, worstAttemptsOf(worstAttempts, now, true), result
		} else {
			it.Status, it.Attempts = api.RunDead, worstAttemptsOf(worstAttempts, now, false)
		}
	}
	r, _ = dispatch.Settle(r, now)
	for k := groupA + groupB; k < len(r.Steps) && !r.Status.Final(); k++ {
		// "always" steps: they run once B has ended.
		if it := &r.Items[r.Steps[k].First]; !it.Status.Final() {
			it.Status, it.Attempts = api.RunSucceeded, worstAttemptsOf(worstAttempts, now, true)
			r, _ = dispatch.Settle(r, now)
		}
	}
	if r.Status != api.RunDead {
		t.Fatalf("round %d ended %s, want dead", r.Round, r.Status)
	}
	return r
}

// TestWorstRunOfStepsFitsItsDocument: the largest run of steps that
// validation accepts and the runtime lets grow — 256 steps of the longest
// IDs with 1 024 needs, 192 of them with 78 attempts of 64 KiB outputs and
// errors (all 256 steps in the second case), the run's results at api.MaxRunResultsBytes, 63 steps skipped
// with their reasons, and many rounds started again from a step — is
// stored within the run document's bounds, through real etcd, at the
// default budget and at the largest: every step, result, attempt and
// skip reason is read back, and the rounds the run no longer keeps are
// counted.
func TestWorstRunOfStepsFitsItsDocument(t *testing.T) {
	if testing.Short() || dispatch.RaceEnabled {
		// Pure computation on one goroutine, sizes only: the race
		// detector has nothing to find and makes it take minutes.
		t.Skip("encodes runs of 50 MB before fitting them")
	}
	t.Run("skipped steps", func(t *testing.T) { testWorstRunOfSteps(t, api.StepOnSuccess, api.MaxSteps-groupA-groupB) })
	t.Run("every step attempted", func(t *testing.T) { testWorstRunOfSteps(t, api.StepAlways, 0) })
}

// testWorstRunOfSteps is TestWorstRunOfStepsFitsItsDocument with the late
// steps run when late says, skipped of them.
func testWorstRunOfSteps(t *testing.T, late api.StepWhen, skipped int) {
	j := worstStepJob(late)
	if err := j.Validate(api.DefaultLimits()); err != nil {
		t.Fatalf("the worst case is refused: %v", err)
	}
	fired := time.Date(2026, 6, 1, 2, 0, 0, 0, time.UTC)
	steps, items := dispatch.NewStepItems(&j)
	r := api.Run{ID: store.RunID(j.ID, fired), JobID: j.ID, ScheduledAt: fired, FiredAt: fired, Status: api.RunPending,
		Attempts: []api.Attempt{}, Owner: "orchestrator-eu-1.internal:8080", Epoch: 123456, Steps: steps, Items: items}
	const rounds = 3 * api.MaxRunRounds
	now := fired
	for round := range rounds {
		now = now.Add(time.Hour)
		r = worstRound(t, r, now)
		if round < rounds-1 {
			var err error
			if r, err = dispatch.RetryFrom(r, worstID(groupA+round%groupB), "cred-of-the-operator", now); err != nil {
				t.Fatal(err)
			}
		}
	}
	raw, err := store.EncodeRun(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worst run of steps: %d attempts, %d bytes of results, %d rounds, stored untrimmed %d bytes", r.AttemptCount(), r.ResultsBytes(), r.Round+1, len(raw))
	for _, part := range []struct {
		name string
		v    any
	}{{"steps", r.Steps}, {"rounds", r.Rounds}, {"reason", r.Reason}} {
		b, _ := json.Marshal(part.v)
		t.Logf("  of which %s %d bytes", part.name, len(b))
	}
	reasons := 0
	for _, it := range r.Items {
		reasons += len(it.Reason)
	}
	t.Logf("  of which items' reasons %d bytes", reasons)
	c := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, budget := range []int{store.DefaultMaxRunBytes, 1 << 20} {
		_, val, err := store.FitRun(r, budget)
		if err != nil {
			t.Fatalf("budget %d: %v", budget, err)
		}
		t.Logf("budget %d: fitted %d bytes", budget, len(val))
		if bound := store.MaxItemRunBytes + api.MaxRunResultsBytes; len(val) > bound {
			t.Fatalf("budget %d: fitted document %d bytes, over the bound of %d", budget, len(val), bound)
		}
		key := fmt.Sprintf("/worst-run-of-steps/%d", budget)
		if _, err := c.Put(ctx, key, string(val)); err != nil {
			t.Fatalf("budget %d: etcd refused the run document of %d bytes: %v", budget, len(val), err)
		}
		resp, err := c.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var back api.Run
		if err := json.Unmarshal(resp.Kvs[0].Value, &back); err != nil {
			t.Fatal(err)
		}
		checkWorstRun(t, r, back, skipped)
	}
}

// checkWorstRun checks run back, read from etcd, against r as it was
// before fitting: nothing accepted is lost silently.
func checkWorstRun(t *testing.T, r, back api.Run, wantSkipped int) {
	t.Helper()
	if len(back.Steps) != api.MaxSteps || len(back.Items) != api.MaxSteps || back.AttemptCount() != r.AttemptCount() {
		t.Fatalf("read back %d steps, %d items, %d attempts; want %d, %d, %d", len(back.Steps), len(back.Items), back.AttemptCount(), api.MaxSteps, api.MaxSteps, r.AttemptCount())
	}
	if back.ResultsBytes() != r.ResultsBytes() || back.Round != r.Round || back.Status != api.RunDead || back.Reason == "" {
		t.Fatalf("read back %d bytes of results, round %d, %s (%q); want %d, %d, dead with a reason", back.ResultsBytes(), back.Round, back.Status, back.Reason, r.ResultsBytes(), r.Round)
	}
	skipped := 0
	for k, s := range back.Steps {
		if s.ID != r.Steps[k].ID || s.Status != r.Steps[k].Status || len(s.Needs) != len(r.Steps[k].Needs) {
			t.Fatalf("step %d read back as %s %s, %d needs; want %s %s, %d", k, s.ID, s.Status, len(s.Needs), r.Steps[k].ID, r.Steps[k].Status, len(r.Steps[k].Needs))
		}
		if s.Status == api.RunSkipped {
			skipped++
			if s.Reason == "" || back.Items[s.First].Reason == "" {
				t.Fatalf("skipped step %s read back without its reason (step %q, item %q)", s.ID, s.Reason, back.Items[s.First].Reason)
			}
		}
		it, want := back.Items[s.First], r.Items[s.First]
		if len(it.Attempts) != len(want.Attempts) || string(it.Result) != string(want.Result) {
			t.Fatalf("step %s read back with %d attempts, %d bytes of result; want %d, %d", s.ID, len(it.Attempts), len(it.Result), len(want.Attempts), len(want.Result))
		}
		for n, a := range it.Attempts {
			w := want.Attempts[n]
			if a.Worker != w.Worker || !a.StartedAt.Equal(w.StartedAt) || len(a.Output)+len(a.Error)+a.DroppedBytes < len(w.Output)+len(w.Error) {
				t.Fatalf("step %s attempt %d read back as %s %v, %d+%d bytes and %d dropped; want %s %v, %d bytes", s.ID, n+1, a.Worker, a.StartedAt,
					len(a.Output), len(a.Error), a.DroppedBytes, w.Worker, w.StartedAt, len(w.Output)+len(w.Error))
			}
		}
	}
	if skipped != wantSkipped {
		t.Fatalf("%d steps read back skipped, want %d", skipped, wantSkipped)
	}
	if kept := len(back.Rounds) + back.RoundsDropped; kept != r.Round {
		t.Fatalf("read back %d rounds and %d dropped, want %d ended rounds accounted for", len(back.Rounds), back.RoundsDropped, r.Round)
	}
	if len(back.Rounds) != api.MaxRunRounds || back.Rounds[0].Round != 0 {
		t.Fatalf("read back %d rounds from round %d, want the first and the latest, %d in all", len(back.Rounds), back.Rounds[0].Round, api.MaxRunRounds)
	}
	if last := back.Rounds[len(back.Rounds)-1]; last.Round != r.Round-1 || last.From == "" || last.Reason == "" || len(last.Reason) > api.MaxReasonBytes {
		t.Fatalf("the last round read back as %+v, want round %d with its step and its reason within %d bytes", last, r.Round-1, api.MaxReasonBytes)
	}
}
