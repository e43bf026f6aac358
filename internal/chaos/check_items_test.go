package chaos

import (
	"slices"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// fireItems records a run of job id at scheduled second sec with n items
// (pinned to workers, if given: a broadcast run), fired by its owner.
func (b *builder) fireItems(id string, sec float64, n int, pins ...string) *RunHistory {
	p := shard.Partition(id, testPartitions)
	t := at(sec)
	key := store.Keys{NS: testNS}.Run(p, id, t)
	h := &RunHistory{Key: key, Partition: p, JobID: id, At: t}
	b.in.History.Runs[key] = h
	run := api.Run{ID: store.RunID(id, t), JobID: id, Partition: p, ScheduledAt: t, FiredAt: t.Add(5 * time.Millisecond),
		Status: api.RunPending, Attempts: []api.Attempt{}, Owner: "m1", Epoch: 1, Broadcast: len(pins) > 0}
	for i := range n {
		it := api.Item{Index: i, Status: api.RunPending, Attempts: []api.Attempt{}}
		if len(pins) > 0 {
			it.Worker = pins[i]
		}
		run.Items = append(run.Items, it)
	}
	rev := b.nextRev()
	h.Creates = append(h.Creates, RunCreate{Rev: rev, Seen: run.FiredAt, Owner: "m1", Epoch: 1, KeyOwner: "m1", KeyEpoch: 1})
	h.Versions = append(h.Versions, RunVersion{Rev: rev, Seen: run.FiredAt, Run: run})
	return h
}

// version appends a version of h's run made by edit.
func (b *builder) version(h *RunHistory, edit func(r *api.Run)) {
	r := h.Last()
	r.Items = slices.Clone(r.Items)
	for i := range r.Items {
		r.Items[i].Attempts = slices.Clone(r.Items[i].Attempts)
	}
	edit(&r)
	seen := h.Versions[len(h.Versions)-1].Seen.Add(time.Millisecond)
	h.Versions = append(h.Versions, RunVersion{Rev: b.nextRev(), Seen: seen, Run: r})
}

// itemAttempt records an attempt of item i by worker, finished with
// errMsg ("" is success) and executed (answered as it ended) if so.
func (b *builder) itemAttempt(h *RunHistory, i int, worker, errMsg string, executed bool) {
	var n int
	var start time.Time
	b.version(h, func(r *api.Run) {
		it := &r.Items[i]
		n = len(it.Attempts) + 1
		start = r.ScheduledAt.Add(time.Duration(10*(i+1)+n) * time.Millisecond)
		it.Attempts = append(it.Attempts, api.Attempt{Attempt: n, Worker: worker, StartedAt: start, Credential: testCred})
		it.Status, r.Status = api.RunRunning, api.RunRunning
	})
	b.version(h, func(r *api.Run) {
		it := &r.Items[i]
		a := &it.Attempts[n-1]
		a.FinishedAt, a.Error = start.Add(time.Millisecond), errMsg
		it.Status = api.RunSucceeded
		if errMsg != "" {
			it.Status = api.RunFailed
		}
	})
	if executed {
		status := 200
		if errMsg != "" {
			status = 500
		}
		item := i
		b.in.Executions = append(b.in.Executions, Execution{Job: h.JobID, Run: store.RunID(h.JobID, h.At), ScheduledAt: api.FormatTime(h.At),
			Attempt: n, Item: &item, Items: len(h.Last().Items), Endpoint: endpointFast, Start: start, End: start, Status: status})
	}
}

// itemsJob records job id, firing once at second 1 (paused at 1.5), and
// its run of n items, each succeeded once on w1.0 unless told otherwise
// afterwards; the run is not settled.
func itemsJob(b *builder, id string, n int, pins ...string) *RunHistory {
	b.job(id, "@every 1s", 0, false)
	b.job(id, "@every 1s", 1.5, true)
	return b.fireItems(id, 1, n, pins...)
}

func settle(status api.RunStatus) func(*api.Run) {
	return func(r *api.Run) { r.Status = status }
}

func TestCheckItemRuns(t *testing.T) {
	allSucceed := func(b *builder, h *RunHistory) {
		for i := range h.Last().Items {
			b.itemAttempt(h, i, "w1.0", "", true)
		}
	}
	tests := []struct {
		name  string
		build func(b *builder, h *RunHistory)
		want  string // the violations, "" for none
	}{
		{name: "healthy", build: func(b *builder, h *RunHistory) { allSucceed(b, h); b.version(h, settle(api.RunSucceeded)) }},
		{name: "an item retried", build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 1, "w1.0", "boom", true)
			allSucceed(b, h)
			b.version(h, settle(api.RunSucceeded))
		}},
		{name: "an item succeeds twice", build: func(b *builder, h *RunHistory) {
			allSucceed(b, h)
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.version(h, settle(api.RunSucceeded))
		}, want: "items_succeeded_twice×1"},
		{name: "a success undone", build: func(b *builder, h *RunHistory) {
			allSucceed(b, h)
			b.version(h, func(r *api.Run) { r.Items[2].Status = api.RunFailed })
			b.itemAttempt(h, 2, "w1.0", "", true)
			b.version(h, settle(api.RunSucceeded))
		}, want: "items_succeeded_twice×1"},
		{name: "a success no execution had", build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", false)
			b.itemAttempt(h, 1, "w1.0", "", true)
			b.itemAttempt(h, 2, "w1.0", "", true)
			b.version(h, settle(api.RunSucceeded))
		}, want: "stale_reports_accepted×1"},
		{name: "an item attempt executed twice", build: func(b *builder, h *RunHistory) {
			allSucceed(b, h)
			b.in.Executions = append(b.in.Executions, b.in.Executions[len(b.in.Executions)-1])
			b.version(h, settle(api.RunSucceeded))
		}, want: "duplicate_executions×1"},
		{name: "succeeded with a dead item", build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.itemAttempt(h, 1, "w1.0", "", true)
			b.version(h, func(r *api.Run) { r.Items[2].Status = api.RunDead; r.Status = api.RunSucceeded })
		}, want: "item_status_mismatch×1 items_lost×1"},
		{name: "decided with an item left pending", build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.itemAttempt(h, 1, "w1.0", "", true)
			b.version(h, settle(api.RunSucceeded))
		}, want: "item_status_mismatch×1 items_lost×1"},
		{name: "an item dead", build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.itemAttempt(h, 1, "w1.0", "boom", true)
			b.version(h, func(r *api.Run) {
				r.Items[1].Status, r.Items[2].Status, r.Status = api.RunDead, api.RunSkipped, api.RunDead
			})
		}, want: "items_lost×1"},
		{name: "not final at the end", build: func(b *builder, h *RunHistory) { b.itemAttempt(h, 0, "w1.0", "", true) }, want: "runs_unfinished×1"},
		{name: "cancelled on request", build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.version(h, func(r *api.Run) {
				r.Items[1].Status, r.Items[2].Status, r.Status = api.RunSkipped, api.RunSkipped, api.RunCancelled
			})
		}},
		{name: "cancelled, an item succeeding twice", build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.version(h, func(r *api.Run) {
				r.Items[1].Status, r.Items[2].Status, r.Status = api.RunSkipped, api.RunSkipped, api.RunCancelled
			})
		}, want: "items_succeeded_twice×1"},
		{name: "an item lost from the run", build: func(b *builder, h *RunHistory) {
			allSucceed(b, h)
			b.version(h, func(r *api.Run) { r.Items = r.Items[:2]; r.Status = api.RunSucceeded })
		}, want: "item_status_mismatch×1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder()
			h := itemsJob(b, "s", 3)
			tt.build(b, h)
			r := b.check(5)
			if got := violations(r); got != tt.want {
				dump(t, r)
				t.Fatalf("violations %q, want %q", got, tt.want)
			}
			if r.Global.Items.Runs != 1 || r.Global.Items.Items != len(h.Last().Items) {
				t.Errorf("items figures %+v", r.Global.Items)
			}
		})
	}
}

func TestCheckBroadcastRuns(t *testing.T) {
	lost := `worker "w2.0" lost: the registration it had when the run fired ended (crashed, stopped, or cut off from the fleet); a broadcast item runs on its worker only`
	tests := []struct {
		name    string
		workers map[string]WorkerLife
		build   func(b *builder, h *RunHistory)
		want    string
	}{
		{name: "healthy", build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.itemAttempt(h, 1, "w2.0", "", true)
			b.version(h, settle(api.RunSucceeded))
		}},
		{name: "its worker died", workers: map[string]WorkerLife{"w2.0": {ID: "w2.0", Started: at(-100), Ended: at(1.2), Killed: true}}, build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.version(h, func(r *api.Run) {
				r.Items[1].Status, r.Items[1].Reason, r.Status = api.RunDead, lost, api.RunDead
			})
		}},
		{name: "its worker lived on", build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.version(h, func(r *api.Run) {
				r.Items[1].Status, r.Items[1].Reason, r.Status = api.RunDead, lost, api.RunDead
			})
		}, want: "items_lost×1"},
		{name: "run on another worker", build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.itemAttempt(h, 1, "w1.0", "", true)
			b.version(h, settle(api.RunSucceeded))
		}, want: "broadcast_misplaced×1"},
		{name: "pinned to a worker started after the fire", workers: map[string]WorkerLife{"w2.0": {ID: "w2.0", Started: at(2)}}, build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.itemAttempt(h, 1, "w2.0", "", true)
			b.version(h, settle(api.RunSucceeded))
		}, want: "broadcast_misplaced×1"},
		{name: "a worker missed", workers: map[string]WorkerLife{"w3.0": {ID: "w3.0", Started: at(-100)}}, build: func(b *builder, h *RunHistory) {
			b.itemAttempt(h, 0, "w1.0", "", true)
			b.itemAttempt(h, 1, "w2.0", "", true)
			b.version(h, settle(api.RunSucceeded))
		}, want: "broadcast_workers_missed×1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder()
			b.in.Workers["w2.0"] = WorkerLife{ID: "w2.0", Started: at(-100)}
			for id, l := range tt.workers {
				b.in.Workers[id] = l
			}
			h := itemsJob(b, "bc", 2, "w1.0", "w2.0")
			tt.build(b, h)
			r := b.check(5)
			if got := violations(r); got != tt.want {
				dump(t, r)
				t.Fatalf("violations %q, want %q", got, tt.want)
			}
			if r.Global.Items.BroadcastRuns != 1 {
				t.Errorf("broadcast runs %d, want 1", r.Global.Items.BroadcastRuns)
			}
			if tt.name == "its worker died" && r.Global.Items.BroadcastWorkerLost != 1 {
				t.Errorf("broadcast items lost with their worker %d, want 1", r.Global.Items.BroadcastWorkerLost)
			}
		})
	}
}

// TestCheckBroadcastWithSelector: a broadcast job with a placement
// selector reaches every live worker the selector matches and no other:
// a worker outside it is not missed, one pinned or run outside it is
// misplaced, one inside it without an item is missed.
func TestCheckBroadcastWithSelector(t *testing.T) {
	tests := []struct {
		name  string
		pins  []string
		extra map[string]WorkerLife
		run   []string // the worker of each item's attempt
		want  string
	}{
		{name: "the pool's workers only", pins: []string{"w1.0", "w2.0"}, run: []string{"w1.0", "w2.0"}},
		{name: "pinned outside the selector", pins: []string{"w1.0", "w3.0"}, run: []string{"w1.0", "w3.0"},
			want: "attempts_misplaced×1 broadcast_misplaced×1 broadcast_workers_missed×1"},
		{name: "a pool worker missed", pins: []string{"w1.0", "w2.0"}, run: []string{"w1.0", "w2.0"},
			extra: map[string]WorkerLife{"w4.0": {ID: "w4.0", Started: at(-100), Labels: map[string]string{"pool": "a"}}},
			want:  "broadcast_workers_missed×1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder()
			pool := func(p string) map[string]string { return map[string]string{"pool": p} }
			b.in.Workers["w1.0"] = WorkerLife{ID: "w1.0", Started: at(-100), Labels: pool("a")}
			b.in.Workers["w2.0"] = WorkerLife{ID: "w2.0", Started: at(-100), Labels: pool("a")}
			b.in.Workers["w3.0"] = WorkerLife{ID: "w3.0", Started: at(-100), Labels: pool("b")}
			for id, l := range tt.extra {
				b.in.Workers[id] = l
			}
			b.job("bc", "@every 1s", 0, false)
			b.setSelector("bc", "pool=a")
			b.job("bc", "@every 1s", 1.5, true)
			b.setSelector("bc", "pool=a")
			h := b.fireItems("bc", 1, len(tt.pins), tt.pins...)
			for i, w := range tt.run {
				b.itemAttempt(h, i, w, "", true)
			}
			b.version(h, settle(api.RunSucceeded))
			r := b.check(5)
			if got := violations(r); got != tt.want {
				dump(t, r)
				t.Fatalf("violations %q, want %q", got, tt.want)
			}
			if r.Global.AttemptsPlaced != len(tt.run) {
				t.Errorf("attempts placed %d, want %d (the items' attempts)", r.Global.AttemptsPlaced, len(tt.run))
			}
		})
	}
}
