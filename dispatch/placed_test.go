package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/workers"
)

// registerLabeled registers worker with credential cred (whose worker
// label selector is allowed), serving http, with labels.
func registerLabeled(t *testing.T, reg *workers.Registry, worker, cred, allowed string, labels map[string]string) error {
	t.Helper()
	_, err := reg.Register(context.Background(), api.RegisterRequest{Worker: worker, Credential: cred, WorkerLabels: allowed, Executors: []string{"http"}, Concurrency: 8, Labels: labels})
	return err
}

// pollNow polls once without waiting, as worker with credential cred.
func (h *harness) pollNow(worker, cred string) ([]api.AttemptGrant, error) {
	h.t.Helper()
	resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: worker, Credential: cred, Executors: []string{"http"}, Max: 10})
	return resp.Attempts, err
}

// onceNow is a one-off job that fires as soon as it is stored.
func onceNow(id, selector string, retryElsewhere *bool) api.Job {
	j := api.Job{ID: id, Retry: api.RetryPolicy{MaxAttempts: 5, InitialBackoff: api.Duration(time.Second)}}
	if selector != "" || retryElsewhere != nil {
		j.Placement = &api.PlacementPolicy{Selector: selector, RetryElsewhere: retryElsewhere}
	}
	return j
}

func jobIDs(as []api.AttemptGrant) []string {
	var ids []string
	for _, a := range as {
		ids = append(ids, a.JobID)
	}
	slices.Sort(ids)
	return ids
}

// TestPlacementHandsRunsOnlyToMatchingWorkers: a job's runs go only to a
// worker whose registered labels match its selector; a worker without a
// registration takes only jobs without one.
func TestPlacementHandsRunsOnlyToMatchingWorkers(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	for w, l := range map[string]map[string]string{
		"w-gpu-eu": {"pool": "gpu", "region": "eu-west"},
		"w-gpu-us": {"pool": "gpu", "region": "us-east"},
		"w-cpu":    {"pool": "cpu"},
		"w-bare":   nil,
	} {
		if err := registerLabeled(t, reg, w, "cred", "", l); err != nil {
			t.Fatal(err)
		}
	}
	waitWorkers(t, reg, "w-bare", "w-cpu", "w-gpu-eu", "w-gpu-us")
	h.create(onceNow("gpu-eu", "pool=gpu,region in (eu-west,eu-central),!spot", nil))
	h.create(onceNow("gpu", "pool=gpu", nil))
	h.create(onceNow("not-cpu", "pool!=cpu", nil))
	h.create(onceNow("any", "", nil))
	h.waitRuns("gpu-eu", 1)
	h.waitRuns("any", 1)

	for _, tt := range []struct {
		worker string
		want   []string
	}{
		{"w-stranger", []string{"any"}}, // no registration: no labels
		{"w-cpu", nil},
		{"w-gpu-us", []string{"gpu", "not-cpu"}},
		{"w-gpu-eu", []string{"gpu-eu"}},
		{"w-bare", nil},
	} {
		got, err := h.pollNow(tt.worker, "cred")
		if err != nil {
			t.Fatalf("poll as %s: %v", tt.worker, err)
		}
		if ids := jobIDs(got); !slices.Equal(ids, tt.want) {
			t.Errorf("poll as %s got jobs %q, want %q", tt.worker, ids, tt.want)
		}
	}
}

// TestPlacementHonoursTheCredentialsWorkerLabels: a registration outside
// its credential's worker label selector is refused (ErrForbidden naming
// the rule); a worker registered while its credential allowed its labels
// is refused its polls once the credential says otherwise; a worker with
// a limited credential and no registration takes nothing.
func TestPlacementHonoursTheCredentialsWorkerLabels(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	err := registerLabeled(t, reg, "w-cpu", "gpu-only", "pool=gpu", map[string]string{"pool": "cpu"})
	if !errors.Is(err, dispatch.ErrForbidden) || !strings.Contains(err.Error(), `matching "pool=gpu"`) || !strings.Contains(err.Error(), "pool=cpu") {
		t.Fatalf("registering pool=cpu with a pool=gpu credential: %v; want ErrForbidden naming both", err)
	}
	if err := registerLabeled(t, reg, "w-gpu", "gpu-only", "pool=gpu", map[string]string{"pool": "gpu"}); err != nil {
		t.Fatal(err)
	}
	// Registered before its credential was limited.
	if err := registerLabeled(t, reg, "w-old", "was-open", "", map[string]string{"pool": "cpu"}); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, reg, "w-gpu", "w-old")
	if ws, _ := reg.Workers(); ws[0].Labels["pool"] != "gpu" {
		t.Fatalf("registration of w-gpu = %+v, want its labels", ws[0])
	}
	h.create(onceNow("any", "", nil))
	h.waitRuns("any", 1)

	_, err = h.disp.Poll(context.Background(), api.PollRequest{Worker: "w-old", Credential: "was-open", WorkerLabels: "pool=gpu", Executors: []string{"http"}, Max: 1})
	if !errors.Is(err, dispatch.ErrForbidden) || !strings.Contains(err.Error(), `"pool=cpu"`) {
		t.Fatalf("poll of a worker whose labels its credential no longer allows: %v, want ErrForbidden", err)
	}
	resp, err := h.disp.Poll(context.Background(), api.PollRequest{Worker: "w-unregistered", Credential: "gpu-only", WorkerLabels: "pool=gpu", Executors: []string{"http"}, Max: 1})
	if err != nil || len(resp.Attempts) != 0 {
		t.Fatalf("poll of an unregistered worker with a limited credential: %+v, %v; want nothing", resp.Attempts, err)
	}
	resp, err = h.disp.Poll(context.Background(), api.PollRequest{Worker: "w-gpu", Credential: "gpu-only", WorkerLabels: "pool=gpu", Executors: []string{"http"}, Max: 1})
	if err != nil || len(resp.Attempts) != 1 {
		t.Fatalf("poll of w-gpu: %+v, %v; want the run", resp.Attempts, err)
	}
}

// TestUnplaceableRunWaitsWithItsReason: a run no live worker matches
// waits, its reason names the selector, and the gauges count it, until a
// matching worker registers.
func TestUnplaceableRunWaitsWithItsReason(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	if err := registerLabeled(t, reg, "w-cpu", "cred", "", map[string]string{"pool": "cpu"}); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, reg, "w-cpu")
	h.create(onceNow("train", "pool=gpu", nil))
	h.waitRuns("train", 1)
	if got, want := reg.WhyPending("train", "http", "pool=gpu", ""), "no live worker matches pool=gpu"; !strings.HasPrefix(got, want) {
		t.Fatalf("WhyPending = %q, want it to start %q", got, want)
	}
	waitStats(t, h.disp, func(st dispatch.Stats) bool { return st.Unplaceable == 1 && st.Unservable["http"] == 1 })
	if got, _ := h.pollNow("w-cpu", "cred"); len(got) != 0 {
		t.Fatalf("w-cpu took %+v", got)
	}
	if err := registerLabeled(t, reg, "w-gpu", "cred", "", map[string]string{"pool": "gpu"}); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, reg, "w-cpu", "w-gpu")
	if got := reg.WhyPending("train", "http", "pool=gpu", ""); got != "" {
		t.Fatalf("WhyPending with a gpu worker = %q, want none", got)
	}
	waitStats(t, h.disp, func(st dispatch.Stats) bool { return st.Unplaceable == 0 && len(st.Unservable) == 0 })
}

func waitStats(t *testing.T, d *dispatch.Dispatcher, cond func(dispatch.Stats) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st := d.Stats()
		if cond(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: condition not met after 10s", st)
		}
	}
}

// TestRetryGoesElsewhere: the worker whose attempt failed is passed over
// for the retry while another live worker may take it; not when the job
// says retry_elsewhere false, nor once one run lease has passed, nor when
// no other worker may take it.
func TestRetryGoesElsewhere(t *testing.T) {
	h := newHarness(t)
	reg := h.withRegistry("m1")
	h.start("m1")
	for _, w := range []string{"w-a", "w-b"} {
		if err := registerLabeled(t, reg, w, "cred", "", map[string]string{"pool": "p"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := registerLabeled(t, reg, "w-other", "cred", "", map[string]string{"pool": "q"}); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, reg, "w-a", "w-b", "w-other")
	no := false
	jobs := []api.Job{onceNow("elsewhere", "pool=p", nil), onceNow("stay", "pool=p", &no), onceNow("later", "pool=p", nil), onceNow("alone", "pool=q", nil)}
	for _, j := range jobs {
		h.create(j)
		h.waitRuns(j.ID, 1)
	}
	// w-a fails the first attempt of the first three, w-other of the last.
	first := map[string]api.AttemptGrant{}
	for _, w := range []string{"w-a", "w-other"} {
		got, err := h.pollNow(w, "cred")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range got {
			first[a.JobID] = a
			if _, err := h.disp.Complete(context.Background(), api.CompleteRequest{Worker: w, Credential: "cred", RunID: a.RunID, Attempt: 1, Error: "boom"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(first) != 4 {
		t.Fatalf("first attempts of %v, want all four jobs", first)
	}
	h.advance(time.Second) // the retries are due

	got, err := h.pollNow("w-a", "cred")
	if err != nil {
		t.Fatal(err)
	}
	if ids := jobIDs(got); !slices.Equal(ids, []string{"stay"}) {
		t.Fatalf("w-a, whose attempts failed, took retries of %q; want only the job that does not retry elsewhere", ids)
	}
	got, _ = h.pollNow("w-other", "cred")
	if ids := jobIDs(got); !slices.Equal(ids, []string{"alone"}) {
		t.Fatalf("w-other took retries of %q; want its own job's, which no other worker matches", ids)
	}
	got, _ = h.pollNow("w-b", "cred")
	if ids := jobIDs(got); !slices.Equal(ids, []string{"elsewhere", "later"}) {
		t.Fatalf("w-b took retries of %q; want those w-a failed", ids)
	}
	// "later": w-b gives it back as failed, and its retry passes w-b over
	// for one run lease only.
	for _, a := range got {
		if a.JobID == "later" {
			if _, err := h.disp.Complete(context.Background(), api.CompleteRequest{Worker: "w-b", Credential: "cred", RunID: a.RunID, Attempt: 2, Error: "boom"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.advance(3 * time.Second)
	if got, _ := h.pollNow("w-b", "cred"); len(got) != 0 {
		t.Fatalf("w-b took %q within the retry's window", jobIDs(got))
	}
	h.advance(runLease)
	if got, _ := h.pollNow("w-b", "cred"); !slices.Equal(jobIDs(got), []string{"later"}) {
		t.Fatalf("w-b took %q after the window, want later's retry", jobIDs(got))
	}
}

// TestSpreadPrefersTheFreestWorker: of two polls waiting for a run, the
// one of the worker with more free slots gets it, every time; the other
// gets the next run once the first has ended its poll.
func TestSpreadPrefersTheFreestWorker(t *testing.T) {
	h := newHarness(t)
	h.withRegistry("m1")
	h.start("m1")
	type result struct {
		attempts []api.AttemptGrant
		err      error
	}
	start := func(ctx context.Context, worker string, free int) <-chan result {
		ch := make(chan result, 1)
		go func() {
			resp, err := h.disp.Poll(ctx, api.PollRequest{Worker: worker, Executors: []string{"http"}, Max: 1, Free: free, Wait: api.Duration(api.MaxPollWait)})
			ch <- result{resp.Attempts, err}
		}()
		return ch
	}
	// receive waits for a poll's result, at most 10s (real time: the
	// fake clock does not end a poll).
	receive := func(ch <-chan result, what string) result {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no result after 10s", what)
			return result{}
		}
	}
	waitPolls := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); len(h.disp.Polls()) != n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d polls in progress after 10s, want %d", len(h.disp.Polls()), n)
			}
		}
	}
	for i := range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel) // also when a round fails
		// Either poll starts first (the first to wait is not the first
		// served, or the last: the scheduler decides).
		var busy, idle <-chan result
		if i%2 == 0 {
			busy = start(ctx, "w-busy", 1)
			waitPolls(1)
			idle = start(ctx, "w-idle", 6)
		} else {
			idle = start(ctx, "w-idle", 6)
			waitPolls(1)
			busy = start(ctx, "w-busy", 1)
		}
		waitPolls(2)
		h.create(onceNow(fmt.Sprintf("job-%d", i), "", nil))
		r := receive(idle, "the freest worker's poll")
		if r.err != nil || len(r.attempts) != 1 {
			cancel()
			t.Fatalf("round %d: the freest worker's poll got %+v, %v; want the run", i, r.attempts, r.err)
		}
		// The other poll goes on waiting, and gets the next run.
		waitPolls(1)
		h.create(onceNow(fmt.Sprintf("next-%d", i), "", nil))
		r = receive(busy, "the other poll")
		cancel()
		if r.err != nil || len(r.attempts) != 1 || r.attempts[0].JobID != fmt.Sprintf("next-%d", i) {
			t.Fatalf("round %d: the other poll got %+v, %v; want next-%d", i, r.attempts, r.err, i)
		}
	}
}
