package chaos

import (
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// placedBuilder is a healthy history with pools: workers g1.0 (pool=gpu,
// credential cred-gpu limited to pool=gpu) and c1.0 (pool=cpu,
// cred-cpu), and a job "train" that selects pool=gpu, fired at 1..5 and
// run on g1.0.
func placedBuilder() *builder {
	b := newBuilder()
	b.in.Workers["g1.0"] = WorkerLife{ID: "g1.0", Started: at(-100), Labels: map[string]string{"pool": "gpu"}, Credential: "cred-gpu"}
	b.in.Workers["c1.0"] = WorkerLife{ID: "c1.0", Started: at(-100), Labels: map[string]string{"pool": "cpu"}, Credential: "cred-cpu"}
	b.in.Credentials["cred-gpu"] = "pool=gpu"
	b.in.Credentials["cred-cpu"] = "pool=cpu"
	b.placedJob("train", "pool=gpu", 0)
	for s := 1; s <= 5; s++ {
		b.bareFire("train", float64(s))
		b.attemptAs(b.run("train", float64(s)), "g1.0", "cred-gpu", "", true)
	}
	b.job("train", "@every 1s", 5.5, true) // paused
	b.setSelector("train", "pool=gpu")
	return b
}

// placedJob records job id every second with a placement selector.
func (b *builder) placedJob(id, selector string, sec float64) {
	b.job(id, "@every 1s", sec, false)
	b.setSelector(id, selector)
}

// setSelector gives the latest spec version of id the selector.
func (b *builder) setSelector(id, selector string) {
	vs := b.in.History.Specs[id]
	vs[len(vs)-1].Job.Placement = &api.PlacementPolicy{Selector: selector}
}

// bareFire records a run of job id at sec with no attempt yet.
func (b *builder) bareFire(id string, sec float64) *RunHistory {
	h := b.fire(id, sec)
	h.Versions = h.Versions[:1] // drop fire's attempt by w1.0
	b.in.Executions = b.in.Executions[:len(b.in.Executions)-1]
	return h
}

func TestCheckPlacementHealthy(t *testing.T) {
	r := placedBuilder().check(10)
	if !r.OK() {
		dump(t, r)
		t.Fatalf("got violations %s, want none", violations(r))
	}
	if r.Global.AttemptsPlaced != 5 || r.Global.AttemptsMisplaced != 0 {
		t.Errorf("attempts placed %d, misplaced %d; want 5 and 0", r.Global.AttemptsPlaced, r.Global.AttemptsMisplaced)
	}
}

// TestCheckPlacementFindsMisplacedAttempts: an attempt on a worker its
// job's selector does not match, one on a worker whose credential does
// not allow its labels, one on a worker or under a credential the
// harness does not know, are each caught; an attempt decided with the
// selector of before a change (the owner's watch lags) is not.
func TestCheckPlacementFindsMisplacedAttempts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(b *builder)
		want   string // in the detail; "" for none
	}{
		{"selector not matched", func(b *builder) {
			b.attemptAs(b.run("train", 3), "c1.0", "cred-cpu", "", true)
		}, "match none of its job's selectors"},
		{"labels outside the credential", func(b *builder) {
			b.in.Workers["c2.0"] = WorkerLife{ID: "c2.0", Started: at(-100), Labels: map[string]string{"pool": "gpu"}, Credential: "cred-cpu"}
			b.attemptAs(b.run("train", 2), "c2.0", "cred-cpu", "", true)
		}, `its credential cred-cpu (worker labels "pool=cpu") does not allow`},
		{"unknown worker", func(b *builder) {
			b.attemptAs(b.run("train", 4), "x9.0", "cred-gpu", "", true)
		}, "a worker the harness never started"},
		{"unknown credential", func(b *builder) {
			b.attemptAs(b.run("train", 4), "g1.0", "cred-stolen", "", true)
		}, "no worker credential of the run"},
		{"decided before a change", func(b *builder) {
			// The job selected pool=cpu; its run at 6 was fired then, and
			// handed to c1.0 after the change to pool=gpu was written.
			b.placedJob("batch", "pool=cpu", 0)
			h := b.bareFire("batch", 6)
			b.job("batch", "@every 1s", 6.2, false)
			b.setSelector("batch", "pool=gpu")
			b.attemptAs(h, "c1.0", "cred-cpu", "", true)
			b.job("batch", "@every 1s", 6.5, true)
			b.setSelector("batch", "pool=gpu")
		}, ""},
		{"fired after a change", func(b *builder) {
			b.placedJob("batch", "pool=cpu", 0)
			b.job("batch", "@every 1s", 5.8, false)
			b.setSelector("batch", "pool=gpu")
			b.attemptAs(b.bareFire("batch", 6), "c1.0", "cred-cpu", "", true)
			b.job("batch", "@every 1s", 6.5, true)
			b.setSelector("batch", "pool=gpu")
		}, "match none of its job's selectors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := placedBuilder()
			tt.mutate(b)
			r := b.check(10)
			var got []string
			for _, v := range r.Violations {
				if v.Check == "attempts_misplaced" {
					got = append(got, v.Detail)
				}
			}
			switch {
			case tt.want == "" && len(got) > 0:
				t.Fatalf("misplaced: %q, want none", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want) || r.Global.AttemptsMisplaced != 1):
				dump(t, r)
				t.Fatalf("misplaced %d: %q, want one saying %q", r.Global.AttemptsMisplaced, got, tt.want)
			}
		})
	}
}

// TestSelectorsOfTheWorkload: every job's selector parses, and each
// matches a worker of the run (whatever the number of workers), so that
// no job of the workload waits for ever.
func TestSelectorsOfTheWorkload(t *testing.T) {
	for workers := 1; workers <= 4; workers++ {
		for _, id := range []string{"rec-01", "rec-02", "rec/ü 03", "rec-04", "rec-05", "flaky-1", "flaky-2", "slow-1", "slow-2", "once-00003", "once-00004", "burst-0001"} {
			sel := selectorFor(id, workers)
			if _, err := placement.Parse(sel); err != nil {
				t.Fatalf("job %s: %v", id, err)
			}
			matched := false
			for i := 1; i <= workers; i++ {
				matched = matched || placement.Allows(sel, workerLabels(i, workers))
			}
			if !matched {
				t.Errorf("%d workers: job %s's selector %q matches none", workers, id, sel)
			}
		}
	}
}
