package dispatch_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

type completeAnswer struct {
	a    api.AttemptGrant
	resp api.CompleteResponse
	err  error
}

// herd creates n jobs (herd-0, herd-1, …), fires them and takes an
// attempt of each.
func herd(n int) func(h *harness) []api.AttemptGrant {
	return func(h *harness) []api.AttemptGrant {
		for i := range n {
			h.create(api.Job{ID: fmt.Sprintf("herd-%d", i), Schedule: "@every 1m"})
		}
		h.advance(time.Minute)
		for i := range n {
			h.waitRuns(fmt.Sprintf("herd-%d", i), 1)
		}
		var as []api.AttemptGrant
		for len(as) < n {
			as = append(as, h.poll("w1", n-len(as))...)
		}
		return as
	}
}

// held is what heldResults does: setup makes the attempts to report,
// prepare (if set) configures the harness before its dispatcher starts,
// result makes each report (nil: succeeded), and before (if set) runs
// once the reports are queued, before etcd's answers are let through.
type held struct {
	setup   func(h *harness) []api.AttemptGrant
	prepare func(h *harness)
	result  func(a api.AttemptGrant) api.CompleteRequest
	before  func(h *harness, as []api.AttemptGrant)
}

// heldResults takes the attempts o.setup returns, then reports them all
// while etcd's answers are held: the first result's write waits for its
// answer and the others queue behind it. It returns the harness, each
// report's answer and how many writes (revisions) changed the
// partition's runs from the reports on.
func heldResults(t *testing.T, o held) (*harness, []completeAnswer, int) {
	t.Helper()
	h := newHarness(t)
	if o.prepare != nil {
		o.prepare(h)
	}
	bridge := etcdtest.NewBridge(t, etcd.ClientAddr())
	h.dispClient = etcdtest.NewClient(t, bridge.Endpoints())
	h.start("m1")
	as := o.setup(h)
	cur, err := h.client.Get(context.Background(), "probe")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writes := h.client.Watch(wctx, h.store.Keys().PartitionRunsPrefix(0), clientv3.WithPrefix(), clientv3.WithRev(cur.Header.Revision+1))

	bridge.CutReplies()
	answers := make(chan completeAnswer, len(as))
	report := func(a api.AttemptGrant) {
		req := api.CompleteRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt, Success: true}
		if o.result != nil {
			req = o.result(a)
		}
		r, err := h.disp.Complete(context.Background(), req)
		answers <- completeAnswer{a, r, err}
	}
	go report(as[0])
	h.waitFor("the first result's write", func() bool { return h.disp.WriterBusy(0) })
	for _, a := range as[1:] {
		go report(a)
	}
	h.waitFor("the other results to queue", func() bool { return h.disp.ReportsWaiting(0) == len(as)-1 })
	if o.before != nil {
		o.before(h, as)
	}
	bridge.Restore()
	var out []completeAnswer
	for range as {
		out = append(out, <-answers)
	}
	// Every run's key as it is now: the writes up to there are the
	// reports' (and a re-read's, none of which writes).
	last, err := h.client.Get(context.Background(), h.store.Keys().PartitionRunsPrefix(0), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	upTo := int64(0)
	for _, kv := range last.Kvs {
		upTo = max(upTo, kv.ModRevision)
	}
	revs := map[int64]bool{}
	for seen := int64(0); seen < upTo; {
		select {
		case wr := <-writes:
			for _, ev := range wr.Events {
				revs[ev.Kv.ModRevision] = true
				seen = ev.Kv.ModRevision
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the runs' writes up to revision %d not seen within 10s", upTo)
		}
	}
	return h, out, len(revs)
}

// failed makes a's report: failed.
func failed(a api.AttemptGrant) api.CompleteRequest {
	return api.CompleteRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt, Error: "boom"}
}

// Results of many runs of one partition that wait for its writer lock
// are recorded in one write, each answered with its own run's status.
func TestResultsOfManyRunsRecordedTogether(t *testing.T) {
	const n = 12
	_, answers, writes := heldResults(t, held{setup: herd(n)})
	for _, a := range answers {
		if a.err != nil || a.resp.Status != api.RunSucceeded {
			t.Fatalf("the result of %s answered %+v, %v; want succeeded", a.a.RunID, a.resp, a.err)
		}
	}
	// The first result's write, then one for the other eleven.
	if writes > 2 {
		t.Fatalf("%d writes for %d results of %d runs, want 2 (the first, then the rest together)", writes, n, n)
	}
	t.Logf("%d results of %d runs recorded in %d writes", n, n, writes)
}

// A run of the write that changed behind the owner's back is refused on
// its own (its report answered "report it again", the run read again);
// the others of the write apply.
func TestResultsWriteRefusesOneRunAlone(t *testing.T) {
	const n = 6
	var changed string
	h, answers, _ := heldResults(t, held{setup: herd(n), before: func(h *harness, as []api.AttemptGrant) {
		// Rewrite the last run's document as it is: its revision moves,
		// so its compare-and-swap fails.
		changed = as[n-1].RunID
		key := h.store.Keys().Run(0, as[n-1].JobID, t0.Add(time.Minute))
		got, err := h.client.Get(context.Background(), key)
		if err != nil || len(got.Kvs) != 1 {
			t.Fatalf("reading %s: %v", key, err)
		}
		if _, err := h.client.Put(context.Background(), key, string(got.Kvs[0].Value)); err != nil {
			t.Fatal(err)
		}
	}})
	refused := 0
	var again api.AttemptGrant
	for _, a := range answers {
		switch {
		case a.a.RunID == changed:
			if a.err == nil {
				t.Fatalf("the result of the run changed behind the owner's back answered %+v, want an error", a.resp)
			}
			refused++
			again = a.a
		case a.err != nil || a.resp.Status != api.RunSucceeded:
			t.Fatalf("the result of %s answered %+v, %v; want succeeded", a.a.RunID, a.resp, a.err)
		}
	}
	if refused != 1 {
		t.Fatalf("%d answers of the changed run, want 1", refused)
	}
	// Read again, the run still has the attempt running: reported again,
	// the result is recorded.
	h.waitFor("the changed run read again", func() bool { return h.disp.HoldsRun(again.JobID, again.RunID) })
	if resp, err := h.complete(again, "w1", true, ""); err != nil || resp.Status != api.RunSucceeded {
		t.Fatalf("reporting the changed run's result again answered %+v, %v; want succeeded", resp, err)
	}
}

// Two runs of one job never share a write: the job's count of runs in a
// row that ended dead is decided from the run before, so two failures
// reported at once pause a job that pauses after two.
func TestResultsOfOneJobCountedInTurn(t *testing.T) {
	var id string
	h, answers, writes := heldResults(t, held{result: failed, setup: func(h *harness) []api.AttemptGrant {
		// The first result, of another job, is written alone; the two of
		// fragile wait together behind it.
		other := h.create(api.Job{ID: "other", Schedule: "@every 2m"})
		j := h.create(api.Job{ID: "fragile", Schedule: "@every 1m", ConcurrencyPolicy: api.ConcurrencyAllow, PauseAfterFailures: 2})
		id = j.ID
		h.advance(time.Minute)
		h.waitRuns(j.ID, 1)
		h.advance(time.Minute)
		h.waitRuns(j.ID, 2)
		h.waitRuns(other.ID, 1)
		var as []api.AttemptGrant
		for len(as) < 3 {
			as = append(as, h.poll("w1", 3-len(as))...)
		}
		slices.SortFunc(as, func(a, b api.AttemptGrant) int { return strings.Compare(b.JobID, a.JobID) }) // other first
		return as
	}})
	for _, a := range answers {
		if a.err != nil || a.resp.Status != api.RunDead {
			t.Fatalf("the result of %s answered %+v, %v; want dead", a.a.RunID, a.resp, a.err)
		}
	}
	if writes != 3 {
		t.Fatalf("%d writes for one run of a job and two of another, want one each", writes)
	}
	paused := h.waitJob(id, func(j api.Job) bool { return j.Paused })
	if paused.State == nil || paused.State.Failures != 2 {
		t.Fatalf("paused job's state %+v, want 2 failures", paused.State)
	}
}

// A write of results stays within etcd's request limit, counting what
// each run's write carries besides its document (its copies in the
// notifications and in the pause event): six runs near the document
// budget, each pausing its job and notifying, all recorded.
func TestResultsWriteStaysUnderTheRequestLimit(t *testing.T) {
	const n = 6
	big := strings.Repeat("x", 60<<10)
	_, answers, writes := heldResults(t, held{
		prepare: func(h *harness) { h.withSender(&recordingSender{}) },
		setup: func(h *harness) []api.AttemptGrant {
			for i := range n {
				h.create(api.Job{ID: fmt.Sprintf("big-%d", i), Schedule: "@every 1m", PauseAfterFailures: 1,
					Notify: []api.Notification{{On: []api.RunStatus{api.RunDead, api.NotifyPaused}, URL: "https://hooks.example/x"}}})
			}
			h.advance(time.Minute)
			var as []api.AttemptGrant
			for len(as) < n {
				as = append(as, h.poll("w1", n-len(as))...)
			}
			return as
		},
		result: func(a api.AttemptGrant) api.CompleteRequest {
			return api.CompleteRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt, Error: big, Output: big}
		},
	})
	for _, a := range answers {
		if a.err != nil || a.resp.Status != api.RunDead {
			t.Fatalf("the result of %s answered %+v, %v; want dead", a.a.RunID, a.resp, a.err)
		}
	}
	t.Logf("%d results of about %d KiB each recorded in %d writes", n, 2*len(big)>>10, writes)
}
