package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// The checker's tests build histories by hand: a fleet that behaved, and
// the same fleet with one fault of each kind the checker must catch.

const (
	testNS         = "/chaos/"
	testPartitions = 8
)

var t0 = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// builder builds a checker Input.
type builder struct {
	in  Input
	rev int64
}

func newBuilder() *builder {
	return &builder{in: Input{
		Partitions:  testPartitions,
		Grace:       5 * time.Second,
		History:     History{Specs: map[string][]SpecVersion{}, Runs: map[string]*RunHistory{}},
		Jobs:        map[string]JobRecord{},
		Listed:      map[string]api.Job{},
		Workers:     map[string]WorkerLife{"w1.0": {ID: "w1.0", Started: at(-100), Credential: testCred}},
		Credentials: map[string]string{testCred: ""},
	}}
}

func (b *builder) nextRev() int64 { b.rev++; return b.rev }

// job records a spec write of job id at second sec (its creation if it is
// the first), accepted by the API.
func (b *builder) job(id, schedule string, sec float64, paused bool) {
	vs := b.in.History.Specs[id]
	created := at(sec)
	if len(vs) > 0 && !vs[len(vs)-1].Deleted {
		created = vs[len(vs)-1].Job.CreatedAt
	}
	j := api.Job{ID: id, Schedule: schedule, Paused: paused, CreatedAt: created, UpdatedAt: at(sec),
		Partition: shard.Partition(id, testPartitions), Payload: []byte(fmt.Sprintf(`{"v":%d}`, len(vs)+1))}
	b.in.History.Specs[id] = append(vs, SpecVersion{Rev: b.nextRev(), Seen: at(sec), Job: j})
	b.in.Jobs[id] = JobRecord{ID: id, Accepted: true, Version: len(vs) + 1, Schedule: schedule}
	b.in.Listed[id] = j
}

// oneOff records the creation of a one-off job due at runAt.
func (b *builder) oneOff(id string, sec, runAt float64) {
	r := at(runAt)
	j := api.Job{ID: id, RunAt: &r, CreatedAt: at(sec), UpdatedAt: at(sec), Partition: shard.Partition(id, testPartitions), Payload: []byte(`{"v":1}`)}
	b.in.History.Specs[id] = []SpecVersion{{Rev: b.nextRev(), Seen: at(sec), Job: j}}
	b.in.Jobs[id] = JobRecord{ID: id, Accepted: true, Version: 1}
	b.in.Listed[id] = j
}

// deleteJob records job id's deletion at second sec.
func (b *builder) deleteJob(id string, sec float64) {
	b.in.History.Specs[id] = append(b.in.History.Specs[id], SpecVersion{Rev: b.nextRev(), Seen: at(sec), Deleted: true})
	r := b.in.Jobs[id]
	r.Deleted = true
	b.in.Jobs[id] = r
	delete(b.in.Listed, id)
}

// fire records a run of job id at scheduled second sec, fired by its
// owner, with one attempt by w1.0 that succeeded, executed once.
func (b *builder) fire(id string, sec float64) *RunHistory {
	p := shard.Partition(id, testPartitions)
	t := at(sec)
	key := store.Keys{NS: testNS}.Run(p, id, t)
	h := b.in.History.Runs[key]
	if h == nil {
		h = &RunHistory{Key: key, Partition: p, JobID: id, At: t}
		b.in.History.Runs[key] = h
	}
	run := api.Run{ID: store.RunID(id, t), JobID: id, Partition: p, ScheduledAt: t, FiredAt: t.Add(5 * time.Millisecond),
		Status: api.RunPending, Attempts: []api.Attempt{}, Owner: "m1", Epoch: 1}
	rev := b.nextRev()
	h.Creates = append(h.Creates, RunCreate{Rev: rev, Seen: run.FiredAt, Owner: "m1", Epoch: 1, KeyOwner: "m1", KeyEpoch: 1})
	h.Versions = append(h.Versions, RunVersion{Rev: rev, Seen: run.FiredAt, Run: run})
	b.attempt(h, "w1.0", "", true)
	return h
}

// testCred is the credential of the builder's workers.
const testCred = "cred-w"

// attempt appends an attempt by worker to h's run, finished with errMsg
// ("" is success), and records its execution if executed.
func (b *builder) attempt(h *RunHistory, worker, errMsg string, executed bool) {
	b.attemptAs(h, worker, testCred, errMsg, executed)
}

// attemptAs is attempt with the credential the attempt was handed to.
func (b *builder) attemptAs(h *RunHistory, worker, cred, errMsg string, executed bool) {
	run := h.Last()
	start := run.ScheduledAt.Add(10 * time.Millisecond * time.Duration(len(run.Attempts)+1))
	run = startAttempt(run, worker, start)
	run.Attempts[len(run.Attempts)-1].Credential = cred
	h.Versions = append(h.Versions, RunVersion{Rev: b.nextRev(), Seen: start, Run: run})
	n := len(run.Attempts)
	fin := run
	fin.Attempts = slices.Clone(run.Attempts)
	fin.Attempts[n-1].FinishedAt = start.Add(time.Millisecond)
	fin.Attempts[n-1].Error = errMsg
	fin.Status = api.RunSucceeded
	if errMsg != "" {
		fin.Status = api.RunFailed
	}
	h.Versions = append(h.Versions, RunVersion{Rev: b.nextRev(), Seen: fin.Attempts[n-1].FinishedAt, Run: fin})
	if executed {
		status := 200
		if errMsg != "" {
			status = 500
		}
		b.in.Executions = append(b.in.Executions, Execution{Job: h.JobID, Run: run.ID, ScheduledAt: api.FormatTime(h.At),
			Attempt: n, Endpoint: endpointFast, Start: start, End: start, Status: status})
	}
}

func startAttempt(r api.Run, worker string, now time.Time) api.Run {
	r.Attempts = append(slices.Clone(r.Attempts), api.Attempt{Attempt: len(r.Attempts) + 1, Worker: worker, StartedAt: now, Credential: testCred})
	r.Status = api.RunRunning
	return r
}

// fireEverySecond fires job id at every whole second in (from, to].
func (b *builder) fireEverySecond(id string, from, to int) {
	for s := from + 1; s <= to; s++ {
		b.fire(id, float64(s))
	}
}

func (b *builder) fault(k Kind, start, recovered float64, partitions []int) {
	b.in.Faults = append(b.in.Faults, Fault{Kind: k, Start: at(start), Recovered: at(recovered),
		Failover: at(recovered).Sub(at(start)),
		Windows:  []Window{{Start: at(start), End: at(recovered), Partitions: partitions}}})
}

// check runs the checker with the end at second end.
func (b *builder) check(end float64) Result {
	b.in.End = at(end)
	return Check(b.in)
}

// violations returns the checks that failed, sorted, with their counts.
func violations(r Result) string {
	n := map[string]int{}
	for _, v := range r.Violations {
		n[v.Check]++
	}
	var out []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range n {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, fmt.Sprintf("%s×%d", k, n[k]))
	}
	return strings.Join(out, " ")
}

func dump(t *testing.T, r Result) {
	t.Helper()
	for _, v := range r.Violations {
		t.Logf("  %s [%s]: %s", v.Check, v.Kind, v.Detail)
	}
}

// healthy builds a job "a" every second from 0 to 20, paused at 20.5.
func healthy() *builder { return everySecondUntil(20) }

// everySecondUntil builds a job "a" every second from 0 to until, fired
// at each, and paused half a second after.
func everySecondUntil(until int) *builder {
	b := newBuilder()
	b.job("a", "@every 1s", 0, false)
	b.fireEverySecond("a", 0, until)
	b.job("a", "@every 1s", float64(until)+0.5, true)
	return b
}

// misfire sets the misfire policy of every spec version of job id.
func (b *builder) misfire(id string, p api.MisfirePolicy) {
	for i := range b.in.History.Specs[id] {
		b.in.History.Specs[id][i].Job.MisfirePolicy = p
	}
}

// expectViolations checks that r found the violations want, as
// violations writes them, dumping them where it did not.
func expectViolations(t *testing.T, r Result, want string) {
	t.Helper()
	if got := violations(r); got != want {
		dump(t, r)
		t.Errorf("got violations %q, want %q", got, want)
	}
}

// checkMissed is expectViolations, and checks that r allowed allowed
// missed fires.
func checkMissed(t *testing.T, r Result, want string, allowed int) {
	t.Helper()
	expectViolations(t, r, want)
	if r.Total.MissedAllowed != allowed {
		t.Errorf("missed (allowed) %d, want %d", r.Total.MissedAllowed, allowed)
	}
}

func TestCheckHealthyHistoryPasses(t *testing.T) {
	r := healthy().check(25)
	if !r.OK() {
		dump(t, r)
		t.Fatalf("got violations %s, want none", violations(r))
	}
	if got, want := r.Total.FiresExpected, 19; got != want { // 20 is within a second of the pause
		t.Errorf("fires expected %d, want %d", got, want)
	}
	if got, want := r.Total.FiresExecuted, 20; got != want {
		t.Errorf("fires executed %d, want %d", got, want)
	}
}

func TestCheckScheduleChanges(t *testing.T) {
	b := newBuilder()
	b.job("a", "@every 1s", 0.01, false)
	b.fireEverySecond("a", 0, 1)
	b.job("a", "@every 2s", 1.2, false)
	for s := 2; s <= 90; s += 2 {
		b.fire("a", float64(s))
	}
	b.job("a", "@every 1s", 91.7, false)
	b.fireEverySecond("a", 91, 94)
	b.job("a", "@every 2s", 94.6, false)
	b.deleteJob("a", 95)
	r := b.check(100)
	if !r.OK() {
		dump(t, r)
		t.Fatalf("got violations %s, want none", violations(r))
	}
}

// TestCheckTimesInAnyLocation: the harness's clock readings (fault
// windows) are local times with monotonic readings, the history's are UTC;
// the checker must compare instants, not time.Time values.
func TestCheckTimesInAnyLocation(t *testing.T) {
	b := newBuilder()
	b.job("a", "@every 1s", 0.01, false)
	b.fireEverySecond("a", 0, 10)
	b.job("a", "@every 2s", 10.5, false) // inside the window below
	for s := 12; s <= 30; s += 2 {
		b.fire("a", float64(s))
	}
	b.job("a", "@every 2s", 30.5, true)
	zone := time.FixedZone("elsewhere", 3*3600)
	b.in.Faults = []Fault{{Kind: OrchestratorKill, Start: at(9).In(zone), Recovered: at(11).In(zone), Failover: 2 * time.Second,
		Windows: []Window{{Start: at(9).In(zone), End: at(11).In(zone)}}}}
	r := b.check(35)
	if !r.OK() {
		dump(t, r)
		t.Fatalf("got violations %s, want none", violations(r))
	}
}

func (b *builder) run(id string, sec float64) *RunHistory {
	return b.in.History.Runs[store.Keys{NS: testNS}.Run(shard.Partition(id, testPartitions), id, at(sec))]
}

// drop removes the run of job id at second sec from the history and its
// executions from the recorder: it never fired.
func (b *builder) drop(id string, sec float64) {
	h := b.run(id, sec)
	delete(b.in.History.Runs, h.Key)
	b.in.Executions = slices.DeleteFunc(b.in.Executions, func(e Execution) bool { return e.Run == store.RunID(id, at(sec)) })
}

func TestCheckFindsViolations(t *testing.T) {
	p := shard.Partition("a", testPartitions)
	for _, tt := range []struct {
		name   string
		mutate func(b *builder)
		want   string
	}{
		{"a fire lost in steady state", func(b *builder) { b.drop("a", 7) }, "missed×1"},
		{"a fire lost during a short failover", func(b *builder) {
			b.fault(OrchestratorKill, 6.5, 9, []int{p}) // 2.5s: shorter than the grace
			b.drop("a", 7)
		}, "missed×1"},
		{"a fire lost in another partition's window", func(b *builder) {
			b.fault(OrchestratorKill, 6.5, 20, []int{p + 1})
			b.drop("a", 7)
		}, "missed×1"},
		{"a run_all fire lost in a long window", func(b *builder) {
			b.in.History.Specs["a"][0].Job.MisfirePolicy = api.MisfireRunAll
			b.fault(EtcdRestart, 6.5, 15, nil)
			b.drop("a", 7)
		}, "missed×1"},
		{"a fire twice", func(b *builder) {
			h := b.run("a", 7)
			h.Creates = append(h.Creates, h.Creates[0])
		}, "duplicate_fires×1"},
		{"a fire by a member that does not own the partition", func(b *builder) {
			b.run("a", 7).Creates[0].KeyEpoch = 2
		}, "unfenced_fires×1"},
		{"a fire at a time the schedule does not have", func(b *builder) { b.fire("a", 7.5) }, "unexpected_fires×1"},
		{"a fire after the pause", func(b *builder) { b.fire("a", 24) }, "unexpected_fires×1"},
		{"an attempt executed twice", func(b *builder) {
			b.in.Executions = append(b.in.Executions, b.in.Executions[3])
		}, "duplicate_executions×1"},
		{"a success with no successful execution", func(b *builder) {
			b.in.Executions[3].Status = 500
		}, "runs_lost×1 stale_reports_accepted×1"},
		{"a success reported by a worker killed mid-attempt", func(b *builder) {
			b.in.Executions[3].Status, b.in.Executions[3].Aborted = 0, true
		}, "runs_lost×1 stale_reports_accepted×1"},
		{"a finished attempt rewritten by a late report", func(b *builder) {
			h := b.run("a", 7)
			r := h.Last()
			r.Attempts = slices.Clone(r.Attempts)
			r.Attempts[0].Error = "late report"
			h.Versions = append(h.Versions, RunVersion{Rev: b.nextRev(), Run: r})
		}, "stale_reports_accepted×1"},
		{"two attempts running at once", func(b *builder) {
			h := b.run("a", 7)
			r := h.Versions[1].Run // attempt 1 running
			both := RunVersion{Rev: h.Versions[1].Rev, Run: startAttempt(r, "w1.0", at(7.5))}
			h.Versions = slices.Insert(h.Versions, 2, both)
		}, "stale_reports_accepted×1"},
		{"a report accepted from a worker that had ended", func(b *builder) {
			// Reports of runs 7 to 20 come more than 2s after its end.
			b.in.Workers["w1.0"] = WorkerLife{ID: "w1.0", Started: at(-100), Ended: at(5), Killed: true}
		}, "stale_reports_accepted×14"},
		{"an execution of a run never fired", func(b *builder) {
			b.in.Executions = append(b.in.Executions, Execution{Job: "a", Run: store.RunID("a", at(7.5)), ScheduledAt: api.FormatTime(at(7.5)), Attempt: 1, Status: 200})
		}, "unknown_runs_executed×1"},
		{"an execution of an attempt never recorded", func(b *builder) {
			e := b.in.Executions[3]
			e.Attempt = 2
			b.in.Executions = append(b.in.Executions, e)
		}, "unrecorded_attempts_executed×1"},
		{"a run left pending", func(b *builder) {
			h := b.run("a", 7)
			h.Versions = h.Versions[:1]
			b.in.Executions = slices.DeleteFunc(b.in.Executions, func(e Execution) bool { return e.Run == store.RunID("a", at(7)) })
		}, "runs_unfinished×1"},
		{"an accepted job missing at the end", func(b *builder) { delete(b.in.Listed, "a") }, "accepted_jobs_missing×1"},
		{"an accepted update lost", func(b *builder) {
			r := b.in.Jobs["a"]
			r.Version++
			b.in.Jobs["a"] = r
		}, "accepted_writes_lost×1"},
		{"a deleted job still listed", func(b *builder) {
			r := b.in.Jobs["a"]
			r.Deleted = true
			b.in.Jobs["a"] = r
		}, "accepted_writes_lost×1"},
		{"two owners of a partition", func(b *builder) {
			b.in.History.OwnerOverlaps = append(b.in.History.OwnerOverlaps, OwnerOverlap{Partition: 1, Rev: 5, Detail: "test"})
		}, "owner_overlaps×1"},
		{"a fault the fleet did not recover from", func(b *builder) {
			b.fault(OrchestratorPause, 30, 30, nil)
			b.in.Faults[0].Recovered = time.Time{}
		}, "faults_not_recovered×1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := healthy()
			tt.mutate(b)
			expectViolations(t, b.check(25), tt.want)
		})
	}
}

// A run cancelled on request owes no execution: it is neither lost nor
// unfinished, whatever its attempts did.
func TestCheckCancelledRun(t *testing.T) {
	b := healthy()
	h := b.run("a", 7)
	h.Versions = h.Versions[:2] // its attempt running
	r := h.Last()
	r.Attempts = slices.Clone(r.Attempts)
	r.Attempts[0].FinishedAt, r.Attempts[0].Error = at(7.1), "cancelled: the run was cancelled by ops"
	r.Status, r.Reason = api.RunCancelled, "cancelled by ops; its running attempt was cancelled"
	h.Versions = append(h.Versions, RunVersion{Rev: b.nextRev(), Seen: at(7.1), Run: r})
	b.in.Executions = slices.DeleteFunc(b.in.Executions, func(e Execution) bool { return e.Run == r.ID })
	res := b.check(25)
	if got := violations(res); got != "" {
		dump(t, res)
		t.Fatalf("got violations %q, want none", got)
	}
}

func TestCheckAllowsMissesInsideLongWindows(t *testing.T) {
	for _, tt := range []struct {
		name    string
		misfire api.MisfirePolicy
		drop    []float64
		allowed int
		want    string
	}{
		// The window is [6.5, 20]: times in [5.5, 16] may be more than the
		// 5s grace old when the next owner looks at them.
		{"run_once", api.MisfireRunOnce, []float64{7, 8, 9, 10, 11, 12, 13, 14}, 8, ""},
		{"skip", api.MisfireSkip, []float64{6, 16}, 2, ""},
		{"skip, beyond the window's reach", api.MisfireSkip, []float64{17}, 0, "missed×1"},
		{"run_all", api.MisfireRunAll, []float64{7}, 0, "missed×1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := everySecondUntil(30)
			b.misfire("a", tt.misfire)
			b.fault(EtcdLeaderKill, 6.5, 20, nil)
			for _, s := range tt.drop {
				b.drop("a", s)
			}
			checkMissed(t, b.check(35), tt.want, tt.allowed)
		})
	}
}

// TestCheckRunOnceCollapsesIntoATimeOnTime: under run_once a time missed
// by more than the grace when the next time fired within it is skipped
// by design (schedule.RunOnce: a time fired on time in the same decision
// takes the missed ones' place), outside any fault window too; a time
// missing while the next one fired promptly is still a missed fire.
func TestCheckRunOnceCollapsesIntoATimeOnTime(t *testing.T) {
	for _, tt := range []struct {
		name    string
		nextAt  float64 // when the run of second 10 fired
		allowed int
		want    string
	}{
		{"the next time fired late, within its grace", 14.5, 1, ""},
		{"the next time fired on time", 10.005, 0, "missed×1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := everySecondUntil(30)
			b.drop("a", 9)
			b.run("a", 10).Versions[0].Run.FiredAt = at(tt.nextAt)
			checkMissed(t, b.check(35), tt.want, tt.allowed)
		})
	}
}

// TestCheckJoinsFaultsInARow: two faults back to back are one outage.
// The first's window ends when the nemesis saw the fleet healthy (its
// owners' leases not yet expired), the second strikes before the owners
// are back: a time from inside the first may be the grace old when the
// partition is owned again after the second, though neither window alone
// is long enough for that. Windows apart keep their own reach.
func TestCheckJoinsFaultsInARow(t *testing.T) {
	for _, tt := range []struct {
		name    string
		second  float64 // start of the second fault, recovered 5.1s later
		drop    []float64
		allowed int
		want    string
	}{
		// [10, 12.4] and [12.46, 17.56]: one outage [10, 17.56]; times in
		// [9, 13.56] may be missed (5s grace).
		{"in a row", 12.46, []float64{11, 12}, 2, ""},
		// [10, 12.4] and [16, 21.1] stay apart: 11 is reached by neither.
		{"apart", 16, []float64{11}, 0, "missed×1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := everySecondUntil(30)
			b.misfire("a", api.MisfireSkip)
			b.fault(EtcdLeaderCut, 10, 12.4, nil)
			b.fault(EtcdLeaderCut, tt.second, tt.second+5.1, nil)
			for _, s := range tt.drop {
				b.drop("a", s)
			}
			checkMissed(t, b.check(35), tt.want, tt.allowed)
		})
	}
}

func TestCheckOneOffs(t *testing.T) {
	b := newBuilder()
	b.oneOff("early", 5, 4.2) // run_at before its creation: fires at once
	b.fire("early", 4.2)
	b.oneOff("later", 5, 8.3)
	b.fire("later", 8.3)
	b.oneOff("lost", 5, 9.1)
	b.fault(EtcdRestart, 8, 30, nil) // a one-off fires even after a long outage (run_once)
	r := b.check(40)
	if got, want := violations(r), "missed×1"; got != want {
		dump(t, r)
		t.Fatalf("got violations %q, want %q", got, want)
	}
}

func TestCheckDeletedJob(t *testing.T) {
	b := newBuilder()
	b.job("a", "@every 1s", 0, false)
	b.fireEverySecond("a", 0, 10)
	b.fire("a", 11) // fired in the moment the owner had not yet seen the delete
	b.deleteJob("a", 10.8)
	b.in.DeleteRequested = map[string]time.Time{"a": at(10.8)}
	for _, h := range b.in.History.Runs {
		h.Deleted = true
	}
	r := b.check(20)
	if !r.OK() {
		dump(t, r)
		t.Fatalf("got violations %s, want none", violations(r))
	}
	if got, want := r.Total.FiresExpected, 9; got != want {
		t.Errorf("fires expected %d, want %d", got, want)
	}
}

func TestLeaseLossesFromLogs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orch-1.log")
	lines := []string{
		"===== orch-1 incarnation 0 started",
		fmt.Sprintf(`{"level":"info","ts":%.6f,"msg":"partitions acquired","member":"orch-1","partitions":[1,2],"epoch":7}`, float64(at(1).UnixMicro())/1e6),
		fmt.Sprintf(`{"level":"warn","ts":%.6f,"msg":"lease not renewed within the renew deadline; fencing","member":"orch-1","renew_deadline":1.2,"last_renewal":%.6f}`, float64(at(10).UnixMicro())/1e6, float64(at(8.8).UnixMicro())/1e6),
		fmt.Sprintf(`{"level":"warn","ts":%.6f,"msg":"session ended; stopped acting as owner","member":"orch-1","partitions":[1,2],"error":"lease not renewed"}`, float64(at(10).UnixMicro())/1e6),
		fmt.Sprintf(`{"level":"warn","ts":%.6f,"msg":"partition ownership lost","member":"orch-1","partitions":[3]}`, float64(at(20).UnixMicro())/1e6),
		fmt.Sprintf(`{"level":"warn","ts":%.6f,"msg":"session ended; stopped acting as owner","member":"orch-1","partitions":[1]}`, float64(at(50).UnixMicro())/1e6),
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	acquired := map[int][]time.Time{1: {at(1), at(12)}, 2: {at(1), at(13.5)}, 3: {at(2)}}
	got := leaseLosses([]string{path}, acquired, at(40))
	if len(got) != 2 {
		t.Fatalf("got %d lease losses, want 2 (the third is after the end): %+v", len(got), got)
	}
	// The member fenced itself at 10s for a lease last renewed at 8.8s:
	// it may have been unable to write from then on.
	if f := got[0]; f.Target != "orch-1" || !f.Start.Equal(at(8.8)) || !f.Windows[0].Start.Equal(at(8.8)) || !f.Recovered.Equal(at(13.5)) || !slices.Equal(f.Windows[0].Partitions, []int{1, 2}) {
		t.Errorf("first lease loss %+v, want orch-1's partitions 1 and 2 from its last renewal at 8.8s, owned again at 13.5s", f)
	}
	if f := got[1]; !f.Start.Equal(at(20)) {
		t.Errorf("second lease loss from %v, want 20s (no fencing line of its own)", f.Start)
	}
	if f := got[1]; !f.Recovered.IsZero() {
		t.Errorf("second lease loss recovered at %v, want never (partition 3 was not acquired again)", f.Recovered)
	}
}

func TestCheckLeaseLossWindows(t *testing.T) {
	b := everySecondUntil(30)
	p := shard.Partition("a", testPartitions)
	// A member lost its lease at 6.5s on its own; its partitions were
	// owned again at 14s: times up to 10s may have been skipped.
	b.in.LeaseLosses = []Fault{{Kind: LeaseLoss, Target: "m1", Start: at(6.5), Recovered: at(14), Failover: 7500 * time.Millisecond,
		Windows: []Window{{Start: at(6.5), End: at(14), Partitions: []int{p}}}}}
	// One lease loss during an injected fault: its window counts, but it is
	// the fault's, not a row of its own.
	b.fault(OrchestratorKill, 19.5, 21, []int{p})
	b.in.LeaseLosses = append(b.in.LeaseLosses, Fault{Kind: LeaseLoss, Target: "m2", Start: at(20), Recovered: at(28),
		Windows: []Window{{Start: at(20), End: at(28), Partitions: []int{p}}}})
	for _, s := range []float64{7, 8, 9, 21, 22} {
		b.drop("a", s)
	}
	r := b.check(35)
	if !r.OK() {
		dump(t, r)
		t.Fatalf("got violations %s, want none", violations(r))
	}
	var losses *KindStats
	for i := range r.Kinds {
		if r.Kinds[i].Kind == LeaseLoss {
			losses = &r.Kinds[i]
		}
	}
	if losses == nil || losses.Injected != 1 || losses.MissedAllowed != 3 {
		t.Errorf("lease-loss row %+v, want 1 event and 3 allowed misses", losses)
	}
}

func TestCheckRecreatedJob(t *testing.T) {
	// Job a fires until 8s, when its partition loses its owner; it is
	// deleted at 10.3s and created again at 10.4s.
	build := func() *builder {
		b := newBuilder()
		b.job("a", "@every 1s", 0, false)
		b.fireEverySecond("a", 0, 8)
		b.fault(OrchestratorKill, 8.5, 11, nil)
		b.deleteJob("a", 10.3)
		b.in.DeleteRequested = map[string]time.Time{"a": at(10.3)}
		for _, h := range b.in.History.Runs {
			h.Deleted = true
		}
		b.job("a", "@every 1s", 10.4, false)
		return b
	}
	t.Run("afresh", func(t *testing.T) {
		b := build()
		b.fireEverySecond("a", 10, 20)
		b.job("a", "@every 1s", 20.5, true)
		if r := b.check(25); !r.OK() {
			dump(t, r)
			t.Fatalf("got violations %s, want none", violations(r))
		}
	})
	t.Run("old state carried over", func(t *testing.T) {
		b := build()
		// The new job's owner plans from the old job's state (last fired
		// at 8s): it fires 9s and 10s, before the new job's creation.
		b.fireEverySecond("a", 8, 20)
		b.job("a", "@every 1s", 20.5, true)
		r := b.check(25)
		if got, want := violations(r), "unexpected_fires×2"; got != want {
			dump(t, r)
			t.Fatalf("got violations %q, want %q", got, want)
		}
	})
}

// TestCheckRunFiredAfterItsJobsDeletion: an owner fires a time of a job it
// has not yet heard is deleted, then removes the run with the job's data;
// the job is created again meanwhile. That run is neither lost nor
// unfinished.
func TestCheckRunFiredAfterItsJobsDeletion(t *testing.T) {
	b := newBuilder()
	b.job("a", "@every 1s", 0, false)
	b.fireEverySecond("a", 0, 9)
	b.deleteJob("a", 9.98)
	b.in.DeleteRequested = map[string]time.Time{"a": at(9.98)}
	b.job("a", "@every 1s", 9.99, false)
	h := b.fire("a", 10)
	h.Versions = h.Versions[:1] // pending, then deleted with the old job's data
	h.Deleted, h.DeletedRev = true, b.nextRev()
	b.in.Executions = slices.DeleteFunc(b.in.Executions, func(e Execution) bool { return e.Run == store.RunID("a", at(10)) })
	b.fireEverySecond("a", 10, 20)
	b.job("a", "@every 1s", 20.5, true)
	if r := b.check(25); !r.OK() {
		dump(t, r)
		t.Fatalf("got violations %s, want none", violations(r))
	}
}

// TestCheckCountsRepeatedExecutions: a run executed successfully twice is
// at-least-once delivery, not a violation; the report tells whether the
// first execution's worker died before it could report.
func TestCheckCountsRepeatedExecutions(t *testing.T) {
	for _, tt := range []struct {
		name      string
		ended     time.Time
		wantAlive int
	}{
		{"worker killed right after the execution", at(7.02), 0},
		{"worker alive: the report was lost", time.Time{}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := healthy()
			b.in.Workers["w9.0"] = WorkerLife{ID: "w9.0", Started: at(-100), Ended: tt.ended}
			h := b.run("a", 7)
			for _, v := range h.Versions[1:] {
				v.Run.Attempts[0].Worker = "w9.0"
			}
			// Attempt 1 executed, its report lost: its lease expired.
			h.Versions[len(h.Versions)-1].Run.Attempts[0].Error = "run lease expired: the worker stopped heartbeating"
			h.Versions[len(h.Versions)-1].Run.Status = api.RunFailed
			b.attempt(h, "w2.0", "", true)
			b.in.Workers["w2.0"] = WorkerLife{ID: "w2.0", Started: at(-100)}
			r := b.check(25)
			if !r.OK() {
				dump(t, r)
				t.Fatalf("got violations %s, want none", violations(r))
			}
			if r.Global.RunsRepeated != 1 || r.Global.RunsRepeatedWorkerAlive != tt.wantAlive {
				t.Errorf("runs repeated %d (%d with the worker alive), want 1 (%d)", r.Global.RunsRepeated, r.Global.RunsRepeatedWorkerAlive, tt.wantAlive)
			}
		})
	}
}

// setCreated moves the creation of job id's run at second sec to second
// seen (as the history saw it) and names the member that fired it.
func (b *builder) setCreated(id string, sec, seen float64, owner string) {
	h := b.run(id, sec)
	h.Creates[0].Seen, h.Creates[0].Owner, h.Creates[0].KeyOwner = at(seen), owner, owner
	h.Versions[0].Seen = at(seen)
	for i := range h.Versions {
		h.Versions[i].Run.Owner = owner
	}
}

// clock records a clock-offset fault on member from start to healed.
func (b *builder) clock(member string, off time.Duration, start, healed float64, partitions []int) {
	end := at(healed)
	if off < 0 {
		end = end.Add(-off)
	}
	b.in.Faults = append(b.in.Faults, Fault{Kind: ClockOffset, Target: member, ClockOffset: off, Start: at(start),
		Healed: at(healed), Recovered: at(healed + 1), Failover: time.Second,
		Windows: []Window{{Start: at(start), End: end, Partitions: partitions, Skew: off}}})
}

// TestCheckFiredEarly: a run created before its scheduled time is a
// violation unless the member that fired it had its clock set ahead by at
// least that much at the time.
func TestCheckFiredEarly(t *testing.T) {
	p := shard.Partition("a", testPartitions)
	for _, tt := range []struct {
		name   string
		mutate func(b *builder)
		want   string
	}{
		{"no offset", func(b *builder) { b.setCreated("a", 10, 9.5, "m1") }, "fired_early×1"},
		{"within the offset", func(b *builder) {
			b.clock("m1", 3*time.Second, 8, 12, []int{p})
			b.setCreated("a", 10, 7.2+0.8, "m1") // 2s early, 3s allowed
		}, ""},
		{"more than the offset", func(b *builder) {
			b.clock("m1", time.Second, 8, 12, []int{p})
			b.setCreated("a", 10, 8.5, "m1")
		}, "fired_early×1"},
		{"an offset of another member", func(b *builder) {
			b.clock("m2", 3*time.Second, 8, 12, []int{p})
			b.setCreated("a", 10, 8.5, "m1")
		}, "fired_early×1"},
		{"after the offset was undone", func(b *builder) {
			b.clock("m1", 3*time.Second, 2, 5, []int{p})
			b.setCreated("a", 10, 8.5, "m1")
		}, "fired_early×1"},
		{"an offset behind", func(b *builder) {
			b.clock("m1", -3*time.Second, 8, 12, []int{p})
			b.setCreated("a", 10, 9.5, "m1")
		}, "fired_early×1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := healthy()
			tt.mutate(b)
			r := b.check(25)
			expectViolations(t, r, tt.want)
			if r.Total.MaxEarly == 0 {
				t.Errorf("max early 0, want the early fire's")
			}
		})
	}
}

// TestCheckClockAheadBeforeAPause: a member whose clock is ahead fires a
// job's times up to its offset before the job is paused; those fires are
// allowed (and with no offset they are not).
func TestCheckClockAheadBeforeAPause(t *testing.T) {
	for _, tt := range []struct {
		name string
		off  time.Duration
		want string
	}{{"ahead", 5 * time.Second, ""}, {"no offset", 0, "fired_early×4 unexpected_fires×2"}} {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder()
			b.job("a", "@every 1s", 0, false)
			b.fireEverySecond("a", 0, 20)
			for s := 21; s <= 24; s++ { // fired before the pause at 20.5
				b.fire("a", float64(s))
				b.setCreated("a", float64(s), float64(s)-4.5, "m1")
			}
			b.job("a", "@every 1s", 20.5, true)
			if tt.off != 0 {
				b.clock("m1", tt.off, 15, 22, nil)
			}
			expectViolations(t, b.check(30), tt.want)
		})
	}
}

// TestCheckCutOffReports: a worker cut off from its orchestrator holds
// attempt 1; the attempt is reassigned (its lease expired) and attempt 2
// runs elsewhere; once the cut heals, the cut-off worker's report of
// attempt 1 must not be accepted.
func TestCheckCutOffReports(t *testing.T) {
	build := func(lateReport bool, cut bool) Result {
		b := healthy()
		b.in.Workers["w2.0"] = WorkerLife{ID: "w2.0", Started: at(-100)}
		h := b.run("a", 10)
		r := h.Versions[0].Run
		r1 := startAttempt(r, "w2.0", at(10.1))
		expired := r1
		expired.Attempts = slices.Clone(r1.Attempts)
		expired.Attempts[0].FinishedAt, expired.Attempts[0].Error = at(14.2), "run lease expired"
		r2 := startAttempt(expired, "w1.0", at(14.3))
		done := r2
		done.Attempts = slices.Clone(r2.Attempts)
		done.Attempts[1].FinishedAt = at(14.4)
		done.Status = api.RunSucceeded
		h.Versions = []RunVersion{h.Versions[0],
			{Rev: b.nextRev(), Seen: at(10.1), Run: r1}, {Rev: b.nextRev(), Seen: at(14.2), Run: expired},
			{Rev: b.nextRev(), Seen: at(14.3), Run: r2}, {Rev: b.nextRev(), Seen: at(14.4), Run: done}}
		b.in.Executions = slices.DeleteFunc(b.in.Executions, func(e Execution) bool { return e.Run == r.ID })
		b.in.Executions = append(b.in.Executions,
			Execution{Job: "a", Run: r.ID, ScheduledAt: api.FormatTime(at(10)), Attempt: 1, Start: at(10.1), End: at(12.6), Status: 200},
			Execution{Job: "a", Run: r.ID, ScheduledAt: api.FormatTime(at(10)), Attempt: 2, Start: at(14.3), End: at(14.35), Status: 200})
		if lateReport {
			// The report of attempt 1, sent when the cut healed, accepted
			// over the expiry.
			stale := done
			stale.Attempts = slices.Clone(done.Attempts)
			stale.Attempts[0].FinishedAt, stale.Attempts[0].Error = at(15.5), ""
			h.Versions = append(h.Versions, RunVersion{Rev: b.nextRev(), Seen: at(15.5), Run: stale})
		}
		if cut {
			b.in.Faults = append(b.in.Faults, Fault{Kind: WorkerOrchestratorCut, Target: "w2.0-m1", Start: at(10.5),
				Recovered: at(14.3), Failover: 3800 * time.Millisecond, Healed: at(15.4), CutWorkers: []string{"w2.0"}})
		}
		return b.check(25)
	}
	for _, tt := range []struct {
		name        string
		late, cut   bool
		want        string
		cutAccepted int
	}{
		{"refused", false, true, "", 0},
		{"accepted", true, true, "cut_off_reports_accepted×1 stale_reports_accepted×1", 1},
		{"accepted, no cut", true, false, "stale_reports_accepted×1", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := build(tt.late, tt.cut)
			expectViolations(t, r, tt.want)
			if r.Global.CutOffReportsAccepted != tt.cutAccepted {
				t.Errorf("cut-off reports accepted %d, want %d", r.Global.CutOffReportsAccepted, tt.cutAccepted)
			}
		})
	}
}

// TestCheckClockStepMisses: a member whose clock is set ahead by about
// the grace or more sees the times its timers wake for as that old, and
// its misfire policy may skip them; a smaller offset excuses nothing.
func TestCheckClockStepMisses(t *testing.T) {
	p := shard.Partition("a", testPartitions)
	for _, tt := range []struct {
		name    string
		off     time.Duration
		misfire api.MisfirePolicy
		want    string
	}{
		{"ahead by more than the grace, skip", 6 * time.Second, api.MisfireSkip, ""},
		{"behind by more than the grace, run_once", -6 * time.Second, api.MisfireRunOnce, ""},
		{"ahead by less than the grace", 2 * time.Second, api.MisfireSkip, "missed×1"},
		{"ahead by more than the grace, run_all", 6 * time.Second, api.MisfireRunAll, "missed×1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := healthy()
			b.misfire("a", tt.misfire)
			b.clock("m1", tt.off, 8, 13, []int{p})
			b.drop("a", 9)
			expectViolations(t, b.check(25), tt.want)
		})
	}
}

// TestCheckClockBehindThenOutage: a member whose clock is behind looks at
// a time only its offset late; if its partition then has no working
// owner until more than the grace after the time, the misfire policy may
// have skipped it. Faults compound.
func TestCheckClockBehindThenOutage(t *testing.T) {
	p := shard.Partition("a", testPartitions)
	for _, tt := range []struct {
		name   string
		outage [2]float64 // no working owner, from and to (seconds)
		off    time.Duration
		want   string
	}{
		{"the outage holds the late look", [2]float64{11.5, 16}, -3 * time.Second, ""},
		{"the outage begins after the late look", [2]float64{14, 18}, -3 * time.Second, "missed×1"},
		{"no offset", [2]float64{11.5, 16}, 0, "missed×1"},
		{"an offset ahead", [2]float64{11.5, 16}, 3 * time.Second, "missed×1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := healthy()
			if tt.off != 0 {
				b.clock("m1", tt.off, 8, 10, []int{p})
			}
			b.fault(OrchestratorKill, tt.outage[0], tt.outage[1], []int{p})
			b.drop("a", 9) // looked at 12s with the offset; 9s + 5s grace < 16s
			expectViolations(t, b.check(25), tt.want)
		})
	}
}

// TestCheckRecoveryBounds: each kind with a bound reports it, with the
// faults that recovered later than it (or never) counted; kinds without
// one report none.
func TestCheckRecoveryBounds(t *testing.T) {
	b := newBuilder()
	fault := func(k Kind, start, failover float64) Fault {
		f := Fault{Kind: k, Target: "o1", Start: at(start)}
		if failover >= 0 {
			f.Recovered = at(start + failover)
			f.Failover = f.Recovered.Sub(f.Start)
		}
		return f
	}
	b.in.Faults = []Fault{
		fault(OrchestratorKill, 10, 0.4),
		fault(OrchestratorKill, 20, 1.5), // late
		fault(OrchestratorKill, 30, -1),  // never
		fault(OrchestratorPause, 40, 2.5),
		fault(EtcdRestart, 50, 9),
	}
	b.in.Bounds = Config{LeaseTTL: 2 * time.Second}.bounds()
	res := Check(b.in)
	got := map[Kind]KindStats{}
	for _, s := range res.Kinds {
		got[s.Kind] = s
	}
	for _, tt := range []struct {
		kind  Kind
		bound time.Duration
		over  int
	}{
		{OrchestratorKill, KillBound, 2},
		{OrchestratorPause, 3 * time.Second, 0},
		{EtcdRestart, 0, 0},
	} {
		if s := got[tt.kind]; s.Bound != tt.bound || s.OverBound != tt.over {
			t.Errorf("%s: bound %v, over bound %d; want %v and %d", tt.kind, s.Bound, s.OverBound, tt.bound, tt.over)
		}
	}
	var out strings.Builder
	(&Report{Result: res}).WriteTable(&out)
	if !strings.Contains(out.String(), "over bound") {
		t.Errorf("the report lacks the bound columns:\n%s", out.String())
	}
}

// TestCheckNoisyTenant: the noisy tenant's job is left out of the fire
// checks (its pauses and resumes make its schedule anyone's guess); a
// request of the tenant refused for lack of space in etcd, or a flood
// that got nothing done, is a violation.
func TestCheckNoisyTenant(t *testing.T) {
	build := func(n NoisyStats) *builder {
		b := healthy()
		b.job(noisyJobID, "@every 1s", 0, false) // never fired: ignored
		b.fire(noisyJobID, 3)
		b.in.Noisy = &n
		return b
	}
	ok := NoisyStats{Operator: map[string]int{"200": 40, "429": 300, "507": 3}, Worker: map[string]int{"200": 20, "429": 900}}
	if r := build(ok).check(25); !r.OK() || r.Noisy == nil || r.Noisy.Operator["200"] != 40 {
		dump(t, r)
		t.Fatalf("a noisy tenant held by the budgets: %s, noisy %+v; want no violation, the tenant's figures reported", violations(r), r.Noisy)
	}
	filled := ok
	filled.NoSpace = 2
	if got := violations(build(filled).check(25)); got != "noisy_tenant_filled_etcd×1" {
		t.Errorf("requests refused for lack of space: %q, want noisy_tenant_filled_etcd", got)
	}
	idle := ok
	idle.Worker = map[string]int{"429": 900, "0": 3}
	if got := violations(build(idle).check(25)); got != "noisy_tenant_idle×1" {
		t.Errorf("a worker flood that got nothing done: %q, want noisy_tenant_idle", got)
	}
	// Without the exemption the noisy job's missed fires would be found.
	b := build(ok)
	b.job("other", "@every 1s", 0, false)
	if got := violations(b.check(25)); !strings.Contains(got, "missed") {
		t.Errorf("another job never fired: %q, want missed fires", got)
	}
}
