package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"
	"sigs.k8s.io/yaml"
)

// shellJobLine returns a one-line job document.
func shellJobLine(id, extra string) string {
	return `{"id": "` + id + `", "schedule": "@hourly", "executor": {"type": "shell", "command": ["true"]}` + extra + `}`
}

func TestJobApplyBatches(t *testing.T) {
	c := newCLIEnv(t)
	var lines []string
	for i := range 300 {
		extra := ""
		if i == 149 {
			extra = `, "timezone": "Mars/Olympus"`
		}
		lines = append(lines, shellJobLine(fmt.Sprintf("bulk/%03d", i), extra))
	}
	file := writeFile(t, "jobs.jsonl", strings.Join(lines, "\n")+"\n")
	out, err := c.run("", "apply", "-f", file, "--batch-size", "50", "--parallel", "3")
	if err == nil || !strings.Contains(err.Error(), "1 of 300 jobs failed") {
		t.Fatalf("apply with a bad line: got error %v, want 1 of 300 failed\n%s", err, out)
	}
	if want := file + `:150: job "bulk/149": timezone:`; !strings.Contains(out, want) {
		t.Errorf("apply: output does not name the bad line (%q):\n%s", want, out)
	}
	if !strings.Contains(out, "299 created, 0 replaced, 1 failed") {
		t.Errorf("apply: got summary\n%s", out)
	}
	ids := c.ids()
	if len(ids) != 299 {
		t.Fatalf("after apply: got %d jobs, want 299", len(ids))
	}

	// Again, fixed, as a JSON array and a directory of files: everything
	// is replaced, the fixed job created.
	dir := t.TempDir()
	lines[149] = shellJobLine("bulk/149", "")
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte("[\n"+strings.Join(lines[:200], ",\n")+"\n]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(strings.Join(lines[200:], "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not jobs"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = c.run("", "apply", "-f", dir, "-o", "yaml")
	if err != nil {
		t.Fatalf("apply DIR: %v\n%s", err, out)
	}
	var rep applyReport
	if err := yaml.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("apply -o yaml: %v\n%s", err, out)
	}
	if rep.Created != 1 || rep.Replaced != 299 || rep.Failed != 0 || len(rep.Results) != 300 {
		t.Errorf("apply DIR: got %d created, %d replaced, %d failed, %d results; want 1, 299, 0, 300", rep.Created, rep.Replaced, rep.Failed, len(rep.Results))
	}
	if r := rep.Results[150]; r.File != filepath.Join(dir, "a.json") || r.Line != 152 || r.ID != "bulk/150" {
		t.Errorf("result 150: got %+v, want a.json line 152", r)
	}
	if r := rep.Results[200]; r.File != filepath.Join(dir, "b.jsonl") || r.Line != 1 || r.ID != "bulk/200" {
		t.Errorf("result 200: got %+v, want b.jsonl line 1", r)
	}

	// Create mode fails on existing IDs, item by item, and writes the rest.
	file = writeFile(t, "more.jsonl", shellJobLine("bulk/000", "")+"\n"+shellJobLine("bulk/new", ""))
	out, err = c.run("", "apply", "-f", file, "--mode", "create", "-o", "json")
	if err == nil {
		t.Fatalf("create over an existing ID: got success\n%s", out)
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Results[0].Status != 409 || rep.Results[1].Result != "created" {
		t.Errorf("create mode: got %+v", rep.Results)
	}

	for _, tc := range []struct{ name, content, want string }{
		{"no id", "{\"schedule\": \"@daily\"}\n", `:1: the job document has no "id"`},
		{"not json", shellJobLine("x", "") + "\n{oops\n", ":2: not JSON"},
		{"not an object", "[1]", ":1: not a job document"},
		{"duplicate", shellJobLine("x", "") + "\n" + shellJobLine("x", ""), `:2: job "x" is also at`},
		{"empty", "\n", "no job documents"},
		{"id given twice", shellJobLine("y", "") + "\n" + `{"id": "z", "id": "x", "executor": {"type": "shell", "command": ["true"]}}`, `:2: duplicate key "id"`},
		{"payload key given twice", shellJobLine("y", "") + "\n" + shellJobLine("z", `, "payload": {"a":`+"\n"+`{"b": 1, "b": 2}}`), `bad.jsonl:3: payload.a: duplicate key "b"`},
		{"header given twice in an array", `[` + shellJobLine("y", "") + `, {"id": "z", "executor": {"type": "http", "url": "http://h/", "headers": {"X-A": "1", "X-A": "2"}}}]`, `:1: executor.headers: duplicate key "X-A"`},
		{"bytes that are not UTF-8", shellJobLine("y", "") + "\n" + shellJobLine("z", ", \"payload\": \"\xff\""), ":2: payload: byte 0xFF is not valid UTF-8"},
		{"yaml", "id: x\nschedule: '@hourly'\nexecutor:\n  type: shell\n  command: [\"true\"]\n", "this looks like YAML; job documents are JSON"},
		{"too large", shellJobLine("small", "") + "\n" + shellJobLine("big", `, "payload": {"x": "`+strings.Repeat("A", 1<<20)+`"}`), `:2: job "big": the document is 1048686 bytes; a job document takes at most 1048576`},
	} {
		before := len(c.ids())
		c.mustFail([]string{"apply", "-f", writeFile(t, "bad.jsonl", tc.content)}, tc.want)
		if after := len(c.ids()); after != before {
			t.Errorf("%s: a refused file changed the jobs: %d before, %d after", tc.name, before, after)
		}
	}
	c.mustFail([]string{"apply", "-f", file, "--batch-size", "129"}, "--batch-size must be 1 to 128")
}

// TestJobApplyAfter: jobs with after in a file of many are saved on
// their own (a batch refuses them), a cycle is refused naming it while
// the rest is written, and a job whose stored form has after is replaced
// by a document without it.
func TestJobApplyAfter(t *testing.T) {
	c := newCLIEnv(t)
	file := writeFile(t, "chain.jsonl", strings.Join([]string{
		shellJobLine("chain/extract", ""),
		shellJobLine("chain/load", `, "after": [{"job": "chain/transform"}]`),
		shellJobLine("chain/transform", `, "after": [{"job": "chain/extract", "on": ["succeeded"]}]`),
		shellJobLine("chain/report", ""),
	}, "\n"))
	out, err := c.run("", "apply", "-f", file, "-o", "json")
	if err != nil {
		t.Fatalf("apply a chain: %v\n%s", err, out)
	}
	var rep applyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("apply -o json: %v\n%s", err, out)
	}
	if rep.Created != 4 || rep.Failed != 0 {
		t.Fatalf("apply a chain: got %+v, want 4 created", rep)
	}
	if r := rep.Results[1]; r.ID != "chain/load" || r.Line != 2 || r.Result != "created" {
		t.Errorf("result of the job with after: got %+v, want created, line 2", r)
	}
	if got := c.mustGet(t, "chain/load").After; len(got) != 1 || got[0].Job != "chain/transform" {
		t.Errorf("chain/load stored with after %+v, want chain/transform", got)
	}

	// A cycle is refused, naming it; the batch beside it is written.
	file = writeFile(t, "cycle.jsonl", strings.Join([]string{
		shellJobLine("chain/extract", `, "after": [{"job": "chain/load"}]`),
		shellJobLine("chain/more", ""),
	}, "\n"))
	out, err = c.run("", "apply", "-f", file)
	if err == nil || !strings.Contains(out, `:1: job "chain/extract": after: cycle chain/extract -> chain/load -> chain/transform -> chain/extract`) ||
		!strings.Contains(out, "1 created, 0 replaced, 1 failed") {
		t.Errorf("apply a cycle: got %v\n%s", err, out)
	}
	if got := c.mustGet(t, "chain/extract").After; len(got) != 0 {
		t.Errorf("a refused cycle was written: chain/extract after %+v", got)
	}

	// Stored with after, replaced in a file of many without it.
	file = writeFile(t, "flat.jsonl", shellJobLine("chain/load", "")+"\n"+shellJobLine("chain/report", ""))
	out, err = c.run("", "apply", "-f", file)
	if err != nil || !strings.Contains(out, "0 created, 2 replaced, 0 failed") {
		t.Fatalf("replace a job that had after: %v\n%s", err, out)
	}
	if got := c.mustGet(t, "chain/load").After; len(got) != 0 {
		t.Errorf("chain/load keeps after %+v after a replace without it", got)
	}

	// Create mode: an existing job with after fails as any existing ID.
	file = writeFile(t, "create.jsonl", shellJobLine("chain/transform", `, "after": [{"job": "chain/extract"}]`)+"\n"+shellJobLine("chain/new", `, "after": [{"job": "chain/extract"}]`))
	out, err = c.run("", "apply", "-f", file, "--mode", "create")
	if err == nil || !strings.Contains(out, `job "chain/transform"`) || !strings.Contains(out, "1 created, 0 replaced, 1 failed") {
		t.Errorf("create mode with after: got %v\n%s", err, out)
	}
}

// mustGet returns job id as stored.
func (c *cliEnv) mustGet(t *testing.T, id string) api.Job {
	t.Helper()
	j, err := c.get(id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j
}
