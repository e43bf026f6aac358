package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// afterHistory builds job "up" every second from 1 to 10, "down" after
// up on succeeded and "alert" after up on dead, both created first; each
// run of up (all succeed) fires down once, named in caused_by; up is
// paused at 10.5.
func afterHistory() (*builder, map[float64]*RunHistory) {
	b := newBuilder()
	b.job("down", "", 0, false)
	vs := b.in.History.Specs["down"]
	vs[0].Job.After = []api.Dependency{{Job: "up", On: []api.RunStatus{api.RunSucceeded}}}
	b.in.Listed["down"] = vs[0].Job
	b.job("alert", "", 0, false)
	vs = b.in.History.Specs["alert"]
	vs[0].Job.After = []api.Dependency{{Job: "up", On: []api.RunStatus{api.RunDead}}}
	b.in.Listed["alert"] = vs[0].Job
	b.job("up", "@every 1s", 0, false)
	ups := map[float64]*RunHistory{}
	for s := 1; s <= 10; s++ {
		ups[float64(s)] = b.fire("up", float64(s))
	}
	for s := 1; s <= 10; s++ {
		b.fireAfter("down", ups[float64(s)], float64(s))
	}
	b.job("up", "@every 1s", 10.5, true)
	return b, ups
}

// fireAfter records a run of job id at second sec caused by up's run.
func (b *builder) fireAfter(id string, up *RunHistory, sec float64) *RunHistory {
	h := b.fire(id, sec)
	last := up.Last()
	for i := range h.Versions {
		h.Versions[i].Run.CausedBy = &api.RunCause{Job: up.JobID, Run: last.ID, Status: last.Status}
	}
	return h
}

// downKey is the run key of down's run at second sec.
func downKey(sec float64) string {
	return store.Keys{NS: testNS}.Run(shard.Partition("down", testPartitions), "down", at(sec))
}

// dropRun removes the run of key from the history, with its executions.
func (b *builder) dropRun(key string) {
	id := b.in.History.Runs[key].Last().ID
	delete(b.in.History.Runs, key)
	b.in.Executions = slices.DeleteFunc(b.in.Executions, func(e Execution) bool { return e.Run == id })
}

func TestCheckAfterHealthyHistoryPasses(t *testing.T) {
	b, _ := afterHistory()
	r := b.check(20)
	if !r.OK() {
		dump(t, r)
		t.Fatalf("violations: %s", violations(r))
	}
	if a := r.Global.After; a.UpstreamRuns != 10 || a.Fired != 10 {
		t.Fatalf("after = %+v, want 10 upstream runs and 10 fired", a)
	}
}

// Each way to break invariant 3 is caught: an upstream run that fires
// nothing, one that fires twice, a run naming an upstream run that ended
// in a state not listed.
func TestCheckAfterCatchesBadHistories(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(b *builder, ups map[float64]*RunHistory)
		want  string
	}{
		{name: "missed", spoil: func(b *builder, ups map[float64]*RunHistory) {
			b.dropRun(downKey(3))
		}, want: "after_missed×1"},
		{name: "duplicated", spoil: func(b *builder, ups map[float64]*RunHistory) {
			b.fireAfter("down", ups[5], 5.001)
		}, want: "after_duplicated×1"},
		{name: "unlisted state", spoil: func(b *builder, ups map[float64]*RunHistory) {
			b.fireAfter("alert", ups[4], 4)
		}, want: "after_unexpected×1"},
		{name: "no such upstream run", spoil: func(b *builder, ups map[float64]*RunHistory) {
			h := b.fire("down", 11)
			h.Versions[0].Run.CausedBy = &api.RunCause{Job: "up", Run: "up@2000-01-01T00:00:00.000Z", Status: api.RunSucceeded}
		}, want: "after_unexpected×1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, ups := afterHistory()
			tc.spoil(b, ups)
			r := b.check(20)
			if got := violations(r); !strings.Contains(got, tc.want) {
				dump(t, r)
				t.Fatalf("violations %q, want %s", got, tc.want)
			}
		})
	}
}

// An upstream run that ended just before the end need not have fired
// yet (its hand-over may be in flight), but may not fire twice.
func TestCheckAfterSparesTheLastSeconds(t *testing.T) {
	b, _ := afterHistory()
	b.dropRun(downKey(10))
	if r := b.check(12); !r.OK() {
		dump(t, r)
		t.Fatalf("violations: %s", violations(r))
	}
	if r := b.check(20); !strings.Contains(violations(r), "after_missed×1") {
		t.Fatalf("violations %q, want the run missed once the end is far enough", violations(r))
	}
}

// A run handed over from an upstream run that fired early (its owner's
// clock ahead, within the offset) takes the upstream run's scheduled time
// and may be created before it: that is no early fire of its own. The
// same early creation of a run without a cause still is.
func TestCheckAfterHandOverBeforeItsTimeIsNotEarly(t *testing.T) {
	b, _ := afterHistory()
	b.clock("m2", 3*time.Second, 2, 6, []int{shard.Partition("up", testPartitions)})
	b.setCreated("up", 5, 3, "m2") // 2 s early on a clock 3 s ahead: allowed
	down := b.in.History.Runs[downKey(5)]
	down.Creates[0].Seen, down.Versions[0].Seen = at(4.6), at(4.6) // after up's end, before 5
	if r := b.check(20); r.Global.After.Fired != 10 || violations(r) != "" {
		dump(t, r)
		t.Fatalf("violations: %s, want none", violations(r))
	}
	b.setCreated("down", 7, 6.0, "m1") // no offset on m1
	down = b.in.History.Runs[downKey(7)]
	down.Versions[0].Run.CausedBy = nil
	if got := violations(b.check(20)); !strings.Contains(got, "fired_early") {
		t.Fatalf("violations %q, want fired_early for a run without a cause created a second early", got)
	}
}
