package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file measures what a resident job costs the member holding it:
// the heap a partition keeps per job once loaded (spec as the scheduler
// holds it, parsed schedule, state, index entries, run history), through
// the load's own decoding. Run with
//
//	go test -run '^$' -bench ResidentJob -benchtime 1x ./dispatch
//
// It reports bytes per job at 10 000 and 100 000 jobs; the two agree when
// the cost is linear.

// benchJob returns a job as the API stores it: an HTTP executor with a
// header and a small JSON payload, a cron schedule in a zone.
func benchJob(i int) api.Job {
	j := api.Job{
		ID:       fmt.Sprintf("tenant-%03d/report-%07d", i%1000, i),
		Schedule: "*/5 * * * *",
		Timezone: "Europe/Berlin",
		Executor: api.Executor{
			Type:    "http",
			URL:     fmt.Sprintf("https://reports.example.com/hooks/%d", i),
			Method:  "POST",
			Headers: map[string]api.HeaderValue{"X-Tenant": {Value: fmt.Sprintf("tenant-%03d", i%1000)}},
		},
		Payload:   json.RawMessage(fmt.Sprintf(`{"report":"daily-usage","tenant":%d,"format":"csv","recipients":["ops@example.com"]}`, i%1000)),
		CreatedAt: indexT0,
		UpdatedAt: indexT0,
	}
	j.Normalize()
	return j
}

// oneOffJob returns a one-off job as bench scale creates them: a run_at
// (the same for all), a noop executor.
func oneOffJob(i int) api.Job {
	at := indexT0.Add(time.Hour)
	j := api.Job{ID: fmt.Sprintf("scale-%08d", i), RunAt: &at, Executor: api.Executor{Type: "noop"}, CreatedAt: indexT0, UpdatedAt: indexT0}
	j.Normalize()
	return j
}

// residentBytes loads n jobs (benchJob), each with a state and runs final
// runs, into a partition in memory and returns the heap it holds per job.
func residentBytes(tb testing.TB, n, runs int) float64 {
	return residentBytesOf(tb, n, runs, benchJob)
}

// residentBytesOf is residentBytes of the jobs mk makes, loaded as a
// partition's load takes them in: each job's ID is parsed from its key,
// the index is built once they are all in.
func residentBytesOf(tb testing.TB, n, runs int, mk func(i int) api.Job) float64 {
	return residentBytesBy(tb, n, runs, mk, takeIn{})
}

// takeIn says how residentBytesBy takes the jobs in.
type takeIn struct {
	// watched takes each job in as the watch brings it when it is
	// created (apply), then indexes it with its state as its first plan
	// is applied; else as the load does.
	watched bool
	// ns is the namespace of the jobs' keys; "" for memPartition's.
	ns string
}

// residentBytesBy is residentBytesOf, the jobs taken in as how says.
func residentBytesBy(tb testing.TB, n, runs int, mk func(i int) api.Job, how takeIn) float64 {
	clock := clockwork.NewFakeClockAt(indexT0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	pt := memPartition(clock)
	if how.ns != "" {
		pt.d.keys.NS = how.ns
	}
	ctx := context.Background()
	for i := range n {
		j := mk(i)
		val, err := json.Marshal(j)
		if err != nil {
			tb.Fatal(err)
		}
		kv := &mvccpb.KeyValue{Key: []byte(pt.d.keys.Spec(0, j.ID)), Value: val, ModRevision: int64(100 + i)}
		st, _ := json.Marshal(api.JobState{Last: indexT0, Next: indexT0.Add(5 * time.Minute), SpecRevision: int64(100 + i), Fired: 12, Runs: runs})
		var state api.JobState
		if err := json.Unmarshal(st, &state); err != nil {
			tb.Fatal(err)
		}
		if how.watched {
			pt.apply(ctx, []*clientv3.Event{{Type: mvccpb.PUT, Kv: kv}})
			pt.mu.Lock()
			e := pt.jobs[j.ID]
			if e == nil {
				pt.mu.Unlock()
				tb.Fatalf("job %s was not taken in", j.ID)
			}
			e.setState(state)
			pt.indexLocked(j.ID)
			pt.mu.Unlock()
		} else {
			id, _, ok := pt.d.keys.ParseSpecKey(0, string(kv.Key))
			e := pt.entryFromKV(kv)
			if !ok || e == nil {
				tb.Fatalf("job %s did not load", j.ID)
			}
			e.setState(state)
			pt.jobs[e.internID(id)] = e
		}
		for r := range runs {
			pt.hist.created(j.ID, indexT0.Add(-time.Duration(r+1)*5*time.Minute), 600, true)
		}
	}
	if !how.watched {
		pt.mu.Lock()
		pt.reindexLocked()
		pt.mu.Unlock()
	}

	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(pt)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// BenchmarkResidentJob reports the heap per resident job without runs
// and with 10 and 100 final runs in its history (the default max_runs is
// 100), at 10 000 and 100 000 jobs; and per one-off job as bench scale
// creates them (oneOffJob), without runs.
func BenchmarkResidentJob(b *testing.B) {
	b.Run("oneoff/jobs=100000", func(b *testing.B) {
		var per float64
		for range b.N {
			per = residentBytesOf(b, 100_000, 0, oneOffJob)
		}
		b.ReportMetric(per, "B/job")
	})
	b.Run("oneoff/watched/jobs=100000", func(b *testing.B) {
		var per float64
		for range b.N {
			per = residentBytesBy(b, 100_000, 0, oneOffJob, takeIn{watched: true})
		}
		b.ReportMetric(per, "B/job")
	})
	for _, n := range []int{10_000, 100_000} {
		for _, runs := range []int{0, 10, 100} {
			b.Run(fmt.Sprintf("jobs=%d/runs=%d", n, runs), func(b *testing.B) {
				var per float64
				for range b.N {
					per = residentBytes(b, n, runs)
				}
				b.ReportMetric(per, "B/job")
			})
		}
	}
}

// TestResidentJobMemory keeps what a resident job costs within 560 bytes
// (474–495 measured on 2026-12-03; 1 KiB before the entry was made
// smaller), plus at most 20 bytes per final run in its history (measured
// between 10 and 50 runs; a job's first run also costs the history's
// per-job entry).
func TestResidentJobMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("loads 10 000 jobs three times and measures the heap: run without -short and without -race")
	}
	const n = 10_000
	bare := residentBytes(t, n, 0)
	r10 := residentBytes(t, n, 10)
	r50 := residentBytes(t, n, 50)
	perRun := (r50 - r10) / 40
	t.Logf("%.0f bytes per resident job; %.0f for its history's entry; %.1f per final run", bare, r10-bare-10*perRun, perRun)
	if bare > 560 || perRun > 20 {
		t.Fatalf("a resident job costs %.0f bytes and %.1f per final run, over the budget of 560 and 20", bare, perRun)
	}
}

// A resident job costs the same whatever its key's length: its owner
// keeps the ID decoded from its spec, not the one parsed from its key,
// which pointed into the whole key (namespace, partition and ID) and kept
// it, 32 bytes more per job in bench scale's namespace.
func TestResidentJobKeepsNoKey(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("loads 10 000 jobs four times and measures the heap: run without -short and without -race")
	}
	const n = 10_000
	long := "/" + strings.Repeat("a-long-namespace-", 6) + "/"
	for _, watched := range []bool{false, true} {
		short := residentBytesBy(t, n, 0, oneOffJob, takeIn{watched: watched})
		longer := residentBytesBy(t, n, 0, oneOffJob, takeIn{watched: watched, ns: long})
		t.Logf("watched %v: %.0f bytes per resident job under %q, %.0f under a namespace of %d bytes", watched, short, "/t/", longer, len(long))
		if longer-short > 8 {
			t.Errorf("watched %v: a resident job costs %.0f bytes under a namespace of %d bytes, %.0f under %q: want the same", watched, longer, len(long), short, "/t/")
		}
	}
}

// A job's executor and payload, kept encoded while it is resident, come
// back as stored when a run is handed out, whatever they hold.
func TestCompactedWorkRoundTrips(t *testing.T) {
	j := benchJob(7)
	j.Executor.Headers["Authorization"] = api.HeaderValue{SecretEnv: "HOOK_TOKEN"}
	j.Executor.Body = json.RawMessage(`{"html":"<b>&amp;</b>","n":[1,2.50,"\u00e9"]}`)
	j.Payload = json.RawMessage(`{"q":"<a href=\"x\">&</a>","unicode":"\u2028 é"}`)
	j.Steps = []api.Step{{ID: "a", Executor: api.Executor{Type: "shell", Command: []string{"echo", "a"}}}, {ID: "b", Executor: api.Executor{Type: "http", URL: "https://b.example.com/"}}}
	want := j
	want.Executor.Headers = map[string]api.HeaderValue{"X-Tenant": j.Executor.Headers["X-Tenant"], "Authorization": j.Executor.Headers["Authorization"]}
	work, err := compactWork(&j)
	if err != nil {
		t.Fatal(err)
	}
	if j.Executor.URL != "" || j.Executor.Headers != nil || j.Payload != nil || j.Executor.Type != "http" {
		t.Fatalf("compacted spec keeps %+v and payload %q, want only the executor's type", j.Executor, j.Payload)
	}
	spec := specOf(&j)
	got, err := work.decodeFor(&spec)
	if err != nil {
		t.Fatal(err)
	}
	for k, st := range want.Steps {
		if k >= len(got.Steps) || !reflect.DeepEqual(got.Steps[k].Executor, st.Executor) {
			t.Fatalf("decoded steps %+v, want the executors of %+v", got.Steps, want.Steps)
		}
	}
	gotJSON, _ := json.Marshal(got.Executor)
	wantJSON, _ := json.Marshal(want.Executor)
	if string(gotJSON) != string(wantJSON) || string(got.Payload) != string(want.Payload) || string(got.Executor.Body) != string(want.Executor.Body) {
		t.Fatalf("decoded %s with payload %s, want %s with %s", gotJSON, got.Payload, wantJSON, want.Payload)
	}
}
