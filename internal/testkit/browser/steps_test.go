package browser_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// TestConsoleSteps drives the run page and the job page of a job made
// of four steps on a real fleet and worker: extract, transform (sharded
// in three), load (which fails, twice) and notify (skipped, as load
// did not succeed). The run page draws a box per step coloured by its
// status and an edge per need; a click on a box shows that step's
// attempts. The job page draws the job's steps and its dependencies.
func TestConsoleSteps(t *testing.T) {
	exe := browser(t)
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.WaitSettled(30 * time.Second)
	m1 := f.Member("m1").URL

	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/extract":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintln(w, `{"rows": 1200, "file": "s3://etl/2026-12-01.csv"}`)
		case "/transform":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"shard": %s, "rows": 400}`+"\n", r.Header.Get(worker.HeaderShardIndex))
		case "/load":
			http.Error(w, "warehouse refused the batch: disk quota exceeded", http.StatusInsufficientStorage)
		default:
			fmt.Fprintln(w, "ok")
		}
	}))
	defer hook.Close()
	startWorker(t, f.URLs(), f.WorkerToken)

	const job = "team/nightly-etl"
	at := time.Now().Add(24 * time.Hour)
	step := func(id, path string, needs ...string) api.Step {
		return api.Step{ID: id, Needs: needs, Executor: api.Executor{Type: "http", URL: hook.URL + path}}
	}
	transform := step("transform", "/transform", "extract")
	transform.Shards = &api.Shards{Count: 3}
	load := step("load", "/load", "transform")
	load.Retry = api.RetryPolicy{MaxAttempts: 2, InitialBackoff: api.Duration(50 * time.Millisecond)}
	j := api.Job{ID: job, RunAt: &at, Steps: []api.Step{step("extract", "/extract"), transform, load, step("notify", "/notify", "load")}}
	if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs", j, nil); code != http.StatusCreated {
		t.Fatalf("create %s: %d", job, code)
	}
	// A job that runs after it, for the job page's dependencies.
	const report = "team/etl-report"
	after := api.Job{ID: report, RunAt: &at, Executor: api.Executor{Type: "http", URL: hook.URL + "/report"}, After: []api.Dependency{{Job: job, On: []api.RunStatus{api.RunSucceeded, api.RunDead}}}}
	if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs", after, nil); code != http.StatusCreated {
		t.Fatalf("create %s: %d", report, code)
	}
	var trig api.Triggered
	if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs/"+url.PathEscape(job)+"/trigger", nil, &trig); code != http.StatusAccepted {
		t.Fatalf("trigger %s: %d", job, code)
	}

	p, closeBrowser := openBrowser(t, exe, m1, 900)
	defer closeBrowser()
	p.signIn(f.Token(api.RoleViewer, "team/"))

	p.open("#/run/" + url.PathEscape(trig.RunID))
	p.waitJS("the run dead with its four steps ended", `document.getElementById('run-status')?.textContent === 'dead' &&
		document.querySelectorAll('#steps-graph g.node').length === 4 &&
		document.querySelectorAll('#steps-graph g.node.st-pending, #steps-graph g.node.st-running, #steps-graph g.node.st-failed').length === 0`, 30*time.Second)
	type graphState struct {
		Boxes   map[string]string `json:"boxes"` // step: class
		Edges   []string          `json:"edges"` // "from>to"
		Colours []string          `json:"colours"`
		Left    map[string]int    `json:"left"` // step: x of its box
		Steps   string            `json:"steps"`
	}
	got := eval[graphState](p, `(() => {
		const boxes = {}, left = {};
		for (const g of document.querySelectorAll('#steps-graph g.node')) {
			boxes[g.dataset.node] = g.getAttribute('class');
			left[g.dataset.node] = Math.round(g.getBoundingClientRect().left);
		}
		const edges = [...document.querySelectorAll('#steps-graph path.edge')].map(e => e.dataset.from + '>' + e.dataset.to).sort();
		const colours = [...new Set([...document.querySelectorAll('#steps-graph g.node rect')].map(r => getComputedStyle(r).stroke))];
		return {boxes, edges, colours, left, steps: document.getElementById('run-steps').textContent};
	})()`)
	want := map[string]string{"extract": "succeeded", "transform": "succeeded", "load": "dead", "notify": "skipped"}
	for id, st := range want {
		if !slices.Contains(strings.Fields(got.Boxes[id]), "st-"+st) {
			t.Errorf("step %s's box has class %q, want st-%s", id, got.Boxes[id], st)
		}
	}
	if wantEdges := []string{"extract>transform", "load>notify", "transform>load"}; !slices.Equal(got.Edges, wantEdges) {
		t.Errorf("edges %v, want %v", got.Edges, wantEdges)
	}
	if len(got.Colours) != 3 {
		t.Errorf("the boxes' borders are in colours %v; want three (succeeded, dead, skipped)", got.Colours)
	}
	if !(got.Left["extract"] < got.Left["transform"] && got.Left["transform"] < got.Left["load"] && got.Left["load"] < got.Left["notify"]) {
		t.Errorf("boxes at %v: want each step right of the step it needs", got.Left)
	}
	if !strings.Contains(got.Steps, "2/4 steps succeeded") {
		t.Errorf("the run's steps: %q", got.Steps)
	}

	// A click on load's box shows its two failed attempts; on
	// transform's, its three items' attempts and results.
	p.do("click load", chromedp.Click(chromedp.CSS(`#steps-graph g.node[data-node="load"]`)))
	p.waitJS("load's attempts", `document.getElementById('step-detail').textContent.includes('Stepload')`, 5*time.Second)
	detail := eval[string](p, `document.getElementById('step-detail').textContent`)
	if n := strings.Count(detail, "disk quota exceeded"); n != 2 || !strings.Contains(detail, "console-worker") || !strings.Contains(detail, "Attempts2") {
		t.Errorf("load's detail (the error %d times) %q: want its two attempts, their worker and error", n, detail)
	}
	p.screenshot("console-steps.png")
	p.do("click transform", chromedp.Click(chromedp.CSS(`#steps-graph g.node[data-node="transform"]`)))
	p.waitJS("transform's items", `document.getElementById('step-detail').textContent.includes('Steptransform')`, 5*time.Second)
	var result []map[string]int
	if err := json.Unmarshal([]byte(eval[string](p, `document.getElementById('step-result').textContent`)), &result); err != nil || len(result) != 3 || result[2]["shard"] != 2 {
		t.Errorf("transform's result %v (%v): want its three shards' results", result, err)
	}
	if n := eval[int](p, `[...document.querySelectorAll('#step-detail h3')].filter(h => h.textContent.startsWith('Item ')).length`); n != 3 {
		t.Errorf("transform's detail shows %d items, want 3", n)
	}
	// The keyboard picks a box too.
	p.do("Enter on notify", script(`document.querySelector('#steps-graph g.node[data-node="notify"]').focus()`), chromedp.KeyEvent("\r"))
	p.waitJS("notify's reason", `document.getElementById('step-detail').textContent.includes('Stepnotify') && document.getElementById('step-status').textContent === 'skipped'`, 5*time.Second)

	// The job page: its steps, and the job that runs after it.
	p.open("#/job/" + url.PathEscape(job))
	p.waitJS("the job's graphs", `document.querySelectorAll('#job-steps g.node').length === 4 && document.querySelectorAll('#job-steps path.edge').length === 3 &&
		!!document.querySelector('#job-dependencies g.node[data-node="before:`+report+`"]') &&
		!!document.querySelector('#job-dependencies path.edge[data-from="job:`+job+`"][data-to="before:`+report+`"]')`, 15*time.Second)
	if sub := eval[string](p, `document.querySelector('#job-steps g.node[data-node="transform"] text.sub').textContent`); !strings.Contains(sub, "3 shards") {
		t.Errorf("transform's box on the job page says %q, want its shards", sub)
	}
	if sub := eval[string](p, `document.querySelector('#job-dependencies g.node[data-node="before:`+report+`"] text.sub').textContent`); sub != "on succeeded/dead" {
		t.Errorf("the dependent's box says %q, want the states that fire it", sub)
	}
	p.waitJS("the job's run", `!!document.querySelector('tr[data-run]')`, 15*time.Second)
	p.screenshot("console-job-steps.png")
	p.do("follow the dependent", chromedp.Click(chromedp.CSS(`#job-dependencies g.node[data-node="before:`+report+`"]`)))
	p.waitJS("the dependent's page, its upstream drawn", `document.querySelector('#view h1')?.textContent === 'Job `+report+`' &&
		!!document.querySelector('#job-dependencies g.node[data-node="after:`+job+`"]')`, 15*time.Second)
	if len(eval[[]string](p, `[...document.querySelectorAll('#view .actions button')].map(b => b.id)`)) != 0 {
		t.Error("a viewer is offered actions on the job page")
	}
}
