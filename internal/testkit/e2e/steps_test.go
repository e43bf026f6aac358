package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/egress"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// stepExec is one execution of a step's attempt as the workers saw it:
// the run, round, step and shard, when it started and ended (the start
// taken after it really started, the end before it really ended), and
// what it received of the steps it needs.
type stepExec struct {
	run        string
	round      int
	step       string
	shard      int
	start, end time.Time
	ok         bool
	needs      string
}

// pipeline is the four steps of docs/pipeline.md run by real workers:
// "extract" an HTTP step answered by a local server, "transform" a shell
// step sharded over three regions, "load" a Go handler, "cleanup" a
// shell step that runs always; each records its executions.
type pipeline struct {
	srv  *httptest.Server
	log  string // the shell steps' log file
	mu   sync.Mutex
	seen []stepExec // the HTTP and Go steps'
	// failLoad makes "load" fail in round 0 of the runs of job failJob.
	failJob string
}

func newPipeline(t *testing.T, f *fleettest.Fleet) *pipeline {
	t.Helper()
	p := &pipeline{log: filepath.Join(t.TempDir(), "shell.log")}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		time.Sleep(100 * time.Millisecond)
		round, _ := strconv.Atoi(r.Header.Get(worker.HeaderRound))
		run := r.Header.Get(worker.HeaderRunID)
		p.record(stepExec{run: run, round: round, step: r.Header.Get(worker.HeaderStep), start: start, end: time.Now(), ok: true})
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"file": "s3://bucket/%s.csv"}`, url.QueryEscape(run))
	}))
	t.Cleanup(p.srv.Close)
	lg := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 2 {
		id := fmt.Sprintf("pw%d", i+1)
		w, err := worker.New(worker.Config{ID: id, Orchestrators: worker.StaticOrchestrators(f.URLs()...), Token: f.WorkerToken,
			ServeHTTP: true, AllowShell: true, Concurrency: 4, PollWait: time.Second, ShutdownTimeout: 5 * time.Second,
			RetryInitial: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond, Logger: lg.Named(id),
			HTTPPolicy: egress.Policy{Allow: []string{"127.0.0.1"}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.HandleStep("load-warehouse", p.load); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { w.Run(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return p
}

func (p *pipeline) record(e stepExec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, e)
}

// load is the "load" step: it checks that it got the three transforms'
// results, each carrying extract's, and returns how many it loaded.
func (p *pipeline) load(ctx context.Context, run worker.Run) (json.RawMessage, error) {
	start := time.Now()
	var parts []struct {
		Region string
		Needs  struct{ Extract struct{ File string } }
	}
	err := json.Unmarshal(run.Needs["transform"], &parts)
	if err == nil && len(parts) != 3 {
		err = fmt.Errorf("%d transform results, want 3", len(parts))
	}
	for _, pt := range parts {
		if err == nil && (pt.Region == "" || !strings.HasPrefix(pt.Needs.Extract.File, "s3://bucket/")) {
			err = fmt.Errorf("transform result %+v lacks its region or extract's file", pt)
		}
	}
	if err == nil && run.JobID == p.failJob && run.Round == 0 {
		err = errors.New("the warehouse is down")
	}
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.record(stepExec{run: run.RunID, round: run.Round, step: run.Step, start: start, end: time.Now(), ok: err == nil, needs: string(run.Needs["transform"])})
	if err != nil {
		return nil, err
	}
	return json.RawMessage(fmt.Sprintf(`{"loaded": %d}`, len(parts))), nil
}

// shellStep returns the command of a shell step that logs its start and
// end, sleeping d between, and prints {"region": its shard's parameter,
// "needs": what it received} as its result.
func (p *pipeline) shellStep(d time.Duration) []string {
	script := `s=$(date +%s%N)
printf 'start %s %s %s %s %s\n' "$JOBFLEET_RUN_ID" "$JOBFLEET_ROUND" "$JOBFLEET_STEP" "$JOBFLEET_SHARD_INDEX" "$s" >> "$1"
sleep ` + strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + `
needs=null
[ -n "$JOBFLEET_NEEDS_FILE" ] && needs=$(cat "$JOBFLEET_NEEDS_FILE")
printf 'end %s %s %s %s %s %s\n' "$JOBFLEET_RUN_ID" "$JOBFLEET_ROUND" "$JOBFLEET_STEP" "$JOBFLEET_SHARD_INDEX" "$(date +%s%N)" "$needs" >> "$1"
echo "{\"region\": ${JOBFLEET_SHARD_PARAM:-null}, \"needs\": $needs}"`
	return []string{"/bin/sh", "-c", script, "step", p.log}
}

// job returns the pipeline as job id; extra steps are appended.
func (p *pipeline) job(id string, extra ...jfapi.Step) jfapi.Job {
	region := func(s string) json.RawMessage { return json.RawMessage(strconv.Quote(s)) }
	steps := []jfapi.Step{
		{ID: "extract", Executor: jfapi.Executor{Type: "http", URL: p.srv.URL}},
		{ID: "transform", Needs: []string{"extract"}, Executor: jfapi.Executor{Type: "shell", Command: p.shellStep(500 * time.Millisecond)},
			Shards: &jfapi.Shards{Params: []json.RawMessage{region("eu"), region("us"), region("ap")}}},
		{ID: "load", Needs: []string{"transform"}, Executor: jfapi.Executor{Type: "load-warehouse"}, Retry: jfapi.RetryPolicy{MaxAttempts: 1}},
		{ID: "cleanup", Needs: []string{"load"}, When: jfapi.StepAlways, Executor: jfapi.Executor{Type: "shell", Command: p.shellStep(50 * time.Millisecond)}},
	}
	return jfapi.Job{ID: id, RunAt: ptrTime(time.Now().Add(24 * time.Hour)), Steps: append(steps, extra...)}
}

// executions returns every execution recorded so far, the shell steps'
// from their log (those that ended).
func (p *pipeline) executions(t *testing.T) []stepExec {
	t.Helper()
	p.mu.Lock()
	out := append([]stepExec(nil), p.seen...)
	p.mu.Unlock()
	f, err := os.Open(p.log)
	if errors.Is(err, os.ErrNotExist) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	starts := map[string]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fs := strings.SplitN(sc.Text(), " ", 7)
		if len(fs) < 6 {
			t.Fatalf("shell log line %q", sc.Text())
		}
		ns, _ := strconv.ParseInt(fs[5], 10, 64)
		key := strings.Join(fs[1:5], " ")
		if fs[0] == "start" {
			starts[key] = time.Unix(0, ns)
			continue
		}
		round, _ := strconv.Atoi(fs[2])
		shard, _ := strconv.Atoi(fs[4])
		e := stepExec{run: fs[1], round: round, step: fs[3], shard: shard, start: starts[key], end: time.Unix(0, ns), ok: true}
		if len(fs) == 7 {
			e.needs = fs[6]
		}
		out = append(out, e)
	}
	return out
}

// started reports whether an execution of step of run has logged its
// start (shell steps).
func (p *pipeline) started(t *testing.T, run, step string) bool {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Contains(string(b), "start "+run+" 0 "+step+" ")
}

// checkOrder asserts that no execution of a step of run r in round
// started before the end of the last execution, in that round or an
// earlier one, of each step it needs (the steps of the pipeline all need
// their needs to succeed or, with "always", to end).
func checkOrder(t *testing.T, r jfapi.Run, execs []stepExec) {
	t.Helper()
	lastEnd := map[string]time.Time{}
	for _, e := range execs {
		if e.run == r.ID && e.end.After(lastEnd[e.step]) {
			lastEnd[e.step] = e.end
		}
	}
	for _, e := range execs {
		if e.run != r.ID {
			continue
		}
		k := r.StepIndex(e.step)
		if k < 0 {
			t.Fatalf("an execution of step %q, which run %s does not have", e.step, r.ID)
		}
		for _, n := range r.Steps[k].Needs {
			var end time.Time
			for _, ne := range execs {
				if ne.run == r.ID && ne.step == n && ne.round <= e.round && ne.end.After(end) {
					end = ne.end
				}
			}
			if end.IsZero() || e.start.Before(end) {
				t.Fatalf("step %s (round %d, shard %d) started at %s, before step %s it needs ended (%s)",
					e.step, e.round, e.shard, e.start.Format("15:04:05.000"), n, end.Format("15:04:05.000"))
			}
		}
	}
}

// countExecs counts the successful executions of run by step, shard and
// round ("transform/2@0").
func countExecs(execs []stepExec, run string) map[string]int {
	n := map[string]int{}
	for _, e := range execs {
		if e.run == run && e.ok {
			n[fmt.Sprintf("%s/%d@%d", e.step, e.shard, e.round)]++
		}
	}
	return n
}

// finalRun waits until run id (of job) is final and returns it.
func finalRun(t *testing.T, f *fleettest.Fleet, job, id string) jfapi.Run {
	t.Helper()
	var out jfapi.Run
	waitFor(t, 60*time.Second, func() bool {
		for _, r := range runsOf(t, f.AdminToken, f.URLs()[0], job) {
			if r.ID == id && r.Status.Final() {
				out = r
				return true
			}
		}
		return false
	})
	return out
}

// checkSucceededOnce asserts that every item of run r ended succeeded
// with exactly one succeeded attempt, and every step succeeded.
func checkSucceededOnce(t *testing.T, r jfapi.Run) {
	t.Helper()
	for _, s := range r.Steps {
		if s.Status != jfapi.RunSucceeded {
			t.Fatalf("step %s %s (%s), want succeeded", s.ID, s.Status, s.Reason)
		}
	}
	for i, it := range r.Items {
		ok := 0
		for _, a := range it.Attempts {
			if a.Error == "" && !a.FinishedAt.IsZero() {
				ok++
			}
		}
		if it.Status != jfapi.RunSucceeded || ok != 1 {
			t.Fatalf("item %d (step %s) %s with %d succeeded attempts of %d, want succeeded once", i, it.Step, it.Status, ok, len(it.Attempts))
		}
	}
}

// TestPipelineSurvivesItsOwnersCrash: the four-step pipeline of
// docs/pipeline.md on real workers, its partition's owner crashed while
// the sharded transform runs: the run succeeds, each step's items ran
// exactly once (none twice, none lost) as the workers saw them, no step
// started before the steps it needs ended, and each step received the
// results of those it needs (load the three regions with extract's file,
// cleanup load's count).
func TestPipelineSurvivesItsOwnersCrash(t *testing.T) {
	t.Parallel()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, Quiet: true})
	for _, m := range []string{"m1", "m2", "m3"} {
		f.Join(m)
	}
	f.WaitSettled(15 * time.Second)
	p := newPipeline(t, f)
	af := &afterFleet{f: f}
	id := af.idOwnedBy(t, "team/etl", "m1", false)
	af.save(t, p.job(id))
	run := af.trigger(t, id, `{"night": 1}`)
	waitFor(t, 30*time.Second, func() bool { return p.started(t, run, "transform") })
	f.Crash("m1")

	r := finalRun(t, f, id, run)
	if r.Status != jfapi.RunSucceeded {
		t.Fatalf("run %s, want succeeded: %+v", r.Status, r.Steps)
	}
	checkSucceededOnce(t, r)
	execs := p.executions(t)
	got := countExecs(execs, run)
	want := map[string]int{"extract/0@0": 1, "transform/0@0": 1, "transform/1@0": 1, "transform/2@0": 1, "load/0@0": 1, "cleanup/0@0": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("executions by step/shard@round: %v, want %v", got, want)
	}
	checkOrder(t, r, execs)
	for _, e := range execs {
		if e.step == "cleanup" && e.needs != `{"load":{"loaded":3}}` {
			t.Fatalf("cleanup received %s, want load's result", e.needs)
		}
	}
	if res := compactJSON(t, string(r.StepResult(r.StepIndex("load")))); res != `{"loaded":3}` {
		t.Fatalf("load's recorded result %s", res)
	}
}

// TestFailedStepThenRetryFromIt: the pipeline with a "publish" step
// after load; load fails: publish is skipped with the reason, cleanup
// (always) runs, the run is dead. POST /v1/runs/{id}/retry {"from":
// "load"} starts round 1: load gets transform's results of round 0 and
// succeeds, publish and cleanup run, extract and transform do not run
// again, and the run records round 0.
func TestFailedStepThenRetryFromIt(t *testing.T) {
	t.Parallel()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	p := newPipeline(t, f)
	af := &afterFleet{f: f}
	const id = "team/etl-fails"
	p.failJob = id
	publish := jfapi.Step{ID: "publish", Needs: []string{"load"}, Executor: jfapi.Executor{Type: "http", URL: p.srv.URL}}
	af.save(t, p.job(id, publish))
	run := af.trigger(t, id, `{"night": 2}`)

	r := finalRun(t, f, id, run)
	if r.Status != jfapi.RunDead {
		t.Fatalf("run %s, want dead: %+v", r.Status, r.Steps)
	}
	status := map[string]jfapi.RunStatus{}
	for _, s := range r.Steps {
		status[s.ID] = s.Status
	}
	if want := (map[string]jfapi.RunStatus{"extract": "succeeded", "transform": "succeeded", "load": "dead", "cleanup": "succeeded", "publish": "skipped"}); fmt.Sprint(status) != fmt.Sprint(want) {
		t.Fatalf("steps %v, want %v", status, want)
	}
	if s := r.Steps[r.StepIndex("publish")]; !strings.Contains(s.Reason, `"load" dead`) {
		t.Fatalf("publish skipped because %q, want load named", s.Reason)
	}
	transformResults := compactJSON(t, string(r.StepResult(r.StepIndex("transform"))))

	var retried jfapi.Run
	code := api(t, f.AdminToken, "POST", f.URLs()[1], "/v1/runs/"+url.PathEscape(run)+"/retry", map[string]string{"from": "load"}, &retried)
	if code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("retry: %d", code)
	}
	waitFor(t, 60*time.Second, func() bool {
		r = finalRun(t, f, id, run)
		return r.Round == 1
	})
	if r.Status != jfapi.RunSucceeded {
		t.Fatalf("round 1 ended %s, want succeeded: %+v", r.Status, r.Steps)
	}
	checkSucceededOnce(t, r)
	if len(r.Rounds) != 1 || r.Rounds[0].Status != jfapi.RunDead || r.Rounds[0].From != "load" {
		t.Fatalf("rounds %+v, want round 0 dead, started again from load", r.Rounds)
	}
	if got := compactJSON(t, string(r.StepResult(r.StepIndex("transform")))); got != transformResults {
		t.Fatalf("transform's results %s after the retry, want those of round 0 %s", got, transformResults)
	}
	execs := p.executions(t)
	got := countExecs(execs, run)
	want := map[string]int{"extract/0@0": 1, "transform/0@0": 1, "transform/1@0": 1, "transform/2@0": 1,
		"cleanup/0@0": 1, "load/0@1": 1, "publish/0@1": 1, "cleanup/0@1": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("successful executions by step/shard@round: %v, want %v", got, want)
	}
	checkOrder(t, r, execs)
	for _, e := range execs {
		if e.step == "load" && e.round == 1 && compactJSON(t, e.needs) != transformResults {
			t.Fatalf("load in round 1 received %s, want round 0's %s", e.needs, transformResults)
		}
	}
}

// compactJSON returns s without insignificant space.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return b.String()
}
