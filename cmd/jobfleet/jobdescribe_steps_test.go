package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// stepTree reads the STEPS section of job describe's output: for each
// step (the first word after the tree's lines) the step it is drawn
// under (the nearest line above drawn further left; "" at the top), and
// the rest of its line.
func stepTree(t *testing.T, out string) (parent, line map[string]string, order []string) {
	t.Helper()
	_, section, ok := strings.Cut(out, "\nSTEPS")
	if !ok {
		t.Fatalf("no STEPS section in\n%s", out)
	}
	section, _, _ = strings.Cut(section, "\n\n")
	parent, line = map[string]string{}, map[string]string{}
	type open struct {
		col int
		id  string
	}
	var stack []open
	for _, l := range strings.Split(section, "\n")[1:] {
		rest := strings.TrimLeft(l, " │├└─")
		if rest == "" {
			continue
		}
		col := len([]rune(l)) - len([]rune(rest))
		id, tail, _ := strings.Cut(rest, " ")
		for len(stack) > 0 && stack[len(stack)-1].col >= col {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			parent[id] = stack[len(stack)-1].id
		} else {
			parent[id] = ""
		}
		line[id] = strings.TrimSpace(tail)
		order = append(order, id)
		stack = append(stack, open{col, id})
	}
	return parent, line, order
}

// TestDescribeDrawsStepsAsATree: job describe draws each step under the
// step it needs, a step needing several once (under the deepest of them)
// with its needs named, and each step's executor, when, shards and retry.
func TestDescribeDrawsStepsAsATree(t *testing.T) {
	shell := func(cmd string) api.Executor { return api.Executor{Type: api.ExecutorShell, Command: []string{cmd}} }
	j := api.Job{ID: "nightly-etl", Schedule: "0 2 * * *", Steps: []api.Step{
		{ID: "extract", Executor: api.Executor{Type: api.ExecutorHTTP, Method: "POST", URL: "https://etl.example/extract"}},
		{ID: "audit", Executor: shell("./audit.sh")},
		{ID: "transform", Needs: []string{"extract"}, Executor: shell("./transform.sh"), Shards: &api.Shards{Params: []json.RawMessage{[]byte(`"eu"`), []byte(`"us"`), []byte(`"ap"`)}, MaxParallel: 2}},
		{ID: "load", Needs: []string{"transform"}, Executor: api.Executor{Type: "load-warehouse"}, Retry: api.RetryPolicy{MaxAttempts: 5, InitialBackoff: api.Duration(time.Second), MaxBackoff: api.Duration(time.Minute)}},
		{ID: "report", Needs: []string{"load", "audit"}, Executor: shell("./report.sh")},
		{ID: "cleanup", Needs: []string{"load"}, When: api.StepAlways, Executor: shell("./cleanup.sh"), Timeout: api.Duration(30 * time.Second)},
	}}
	var out bytes.Buffer
	if err := printDescribed(&out, described{Job: j, Runs: []api.Run{}}, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	parent, line, order := stepTree(t, out.String())
	want := map[string]string{"extract": "", "audit": "", "transform": "extract", "load": "transform", "report": "load", "cleanup": "load"}
	for id, p := range want {
		if got, ok := parent[id]; !ok || got != p {
			t.Errorf("step %s drawn under %q (present: %v), want under %q:\n%s", id, got, ok, p, out.String())
		}
	}
	if len(order) != len(j.Steps) {
		t.Errorf("%d step lines, want %d (each step once):\n%s", len(order), len(j.Steps), out.String())
	}
	for id, parts := range map[string][]string{
		"extract":   {"http POST https://etl.example/extract"},
		"transform": {"shell ./transform.sh", "shards 3, 2 at once"},
		"load":      {"handler load-warehouse", "retry 5 (1s to 1m)"},
		"report":    {"needs: load, audit"},
		"cleanup":   {"when always", "timeout 30s"},
	} {
		for _, p := range parts {
			if !strings.Contains(line[id], p) {
				t.Errorf("step %s's line %q lacks %q", id, line[id], p)
			}
		}
	}
	if strings.Contains(line["load"], "needs:") {
		t.Errorf("a step of one need names it: %q", line["load"])
	}
	if !strings.Contains(out.String(), "6 steps, each with its own") {
		t.Errorf("the EXECUTOR row does not say the job is made of steps:\n%s", out.String())
	}
	// A job the server would refuse (a cycle, an unknown need) is drawn
	// all the same, each step once.
	out.Reset()
	bad := api.Job{ID: "bad", Steps: []api.Step{{ID: "a", Needs: []string{"b"}}, {ID: "b", Needs: []string{"a", "nowhere"}}, {ID: "c", Needs: []string{"c"}}}}
	printStepTree(&out, bad)
	if _, _, order := stepTree(t, out.String()); len(order) != 3 {
		t.Errorf("a cyclic job drew %v:\n%s", order, out.String())
	}
}

// TestRunGetShowsSteps: run get lists each step of a run with its
// status, attempts, duration and result.
func TestRunGetShowsSteps(t *testing.T) {
	at := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	att := func(n int, from, to time.Duration, errText string) api.Attempt {
		return api.Attempt{Attempt: n, Worker: "w1", StartedAt: at.Add(from), FinishedAt: at.Add(to), Error: errText}
	}
	r := api.Run{ID: "etl@x", JobID: "etl", ScheduledAt: at, FiredAt: at, Status: api.RunDead, Attempts: []api.Attempt{},
		Steps: []api.RunStep{
			{ID: "extract", First: 0, Items: 1, Status: api.RunSucceeded},
			{ID: "transform", Needs: []string{"extract"}, First: 1, Items: 2, Sharded: true, Status: api.RunSucceeded},
			{ID: "load", Needs: []string{"transform"}, First: 3, Items: 1, Status: api.RunDead},
			{ID: "notify", Needs: []string{"load"}, First: 4, Items: 1, Status: api.RunSkipped, Reason: "load is dead"},
		},
		Items: []api.Item{
			{Index: 0, Status: api.RunSucceeded, Attempts: []api.Attempt{att(1, 0, 2*time.Second, "")}, Result: json.RawMessage(`{"rows": 3}`)},
			{Index: 1, Status: api.RunSucceeded, Attempts: []api.Attempt{att(1, 3*time.Second, 4*time.Second, "")}, Result: json.RawMessage(`"eu"`)},
			{Index: 2, Status: api.RunSucceeded, Attempts: []api.Attempt{att(1, 3*time.Second, 5*time.Second, "")}, Result: json.RawMessage(`"us"`)},
			{Index: 3, Status: api.RunDead, Attempts: []api.Attempt{att(1, 6*time.Second, 7*time.Second, "boom"), att(2, 8*time.Second, 9500*time.Millisecond, "boom")}},
			{Index: 4, Status: api.RunSkipped, Attempts: []api.Attempt{}, Reason: "load is dead"},
		}}
	if err := r.UnmarshalJSON(mustJSON(t, r)); err != nil { // fills each item's step
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printRunDetail(&out, r, false, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	for id, want := range map[string]string{
		"extract":   `extract succeeded 1 2s {"rows":3}`,
		"transform": `transform extract succeeded 2 2s ["eu","us"]`,
		"load":      `load transform dead 2 3.5s -`,
		"notify":    `notify load skipped 0 - - load is dead`,
	} {
		if got := strings.Join(rows[id], " "); got != want {
			t.Errorf("step row %q, want %q:\n%s", got, want, out.String())
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
