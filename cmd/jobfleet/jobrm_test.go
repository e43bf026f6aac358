package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"
)

func TestJobRemovePrefix(t *testing.T) {
	c := newCLIEnv(t)
	var lines []string
	for i := range 1200 {
		lines = append(lines, shellJobLine(fmt.Sprintf("tmp/%04d", i), ""))
	}
	for _, id := range []string{"tmp", "tmpx", "keep/1", "bar/tmp/1", "billing/tmp-1", "billing/keep"} {
		lines = append(lines, shellJobLine(id, ""))
	}
	c.mustRun("apply", "-f", writeFile(t, "jobs.jsonl", strings.Join(lines, "\n")))
	all := len(c.ids())
	if out := c.mustRun("ls", "--prefix", "billing/"); strings.Count(out, "\n") != 3 || !strings.Contains(out, "billing/keep") {
		t.Errorf("ls --prefix billing/: got\n%s", out)
	}

	out := c.mustRun("rm", "--prefix", "tmp/", "--dry-run")
	if !strings.Contains(out, "would delete 1200 jobs") || !strings.Contains(out, "tmp/0042\n") {
		t.Errorf("rm --dry-run: got %.300s…", out)
	}
	if n := len(c.ids()); n != all {
		t.Fatalf("rm --dry-run deleted %d jobs", all-n)
	}
	c.mustFail([]string{"rm", "--prefix", "tmp/"}, "without --yes")
	c.mustFail([]string{"rm", "--prefix", ""}, "must not be empty")
	c.mustFail([]string{"rm", "--prefix", "tmp/", "tmp"}, "not both")
	c.mustFail([]string{"rm", "tmp", "--yes"}, "go with --prefix")
	if n := len(c.ids()); n != all {
		t.Fatalf("refused removals deleted %d jobs", all-n)
	}

	out = c.mustRun("rm", "--prefix", "tmp/", "--yes", "-o", "json")
	var doc removed
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Deleted != 1200 || doc.Failed != 0 || len(doc.Results) != 1200 {
		t.Errorf("rm --prefix: got %d deleted, %d failed, %d results", doc.Deleted, doc.Failed, len(doc.Results))
	}
	left := c.ids()
	if want := []string{"bar/tmp/1", "billing/keep", "billing/tmp-1", "keep/1", "tmp", "tmpx"}; !slices.Equal(left, want) {
		t.Errorf("after rm --prefix tmp/: got %q, want %q", left, want)
	}

	// A viewer is told at once that it may not delete, before any
	// question and any request per job.
	viewer := c.credential(api.CreateRequest{Role: api.RoleViewer}).Secret
	if _, err := c.runCmd("yes\n", "job", "--server", c.url, "--token", viewer, "rm", "--prefix", "billing/", "--yes"); err == nil ||
		!strings.Contains(err.Error(), "(role viewer) may not delete jobs (an operator or admin may); nothing deleted") {
		t.Errorf("a viewer's rm --prefix: got %v, want it refused at once", err)
	}
	if n := len(c.ids()); n != len(left) {
		t.Errorf("a viewer's rm --prefix deleted %d jobs", len(left)-n)
	}

	// A scoped credential deletes within its prefix only.
	billing := c.credential(api.CreateRequest{Role: api.RoleOperator, Prefix: "billing/"}).Secret
	out, err := c.runCmd("", "job", "--server", c.url, "--token", billing, "rm", "--prefix", "b", "--yes")
	if err != nil || !strings.Contains(out, "deleted 2 jobs") {
		t.Errorf("scoped rm --prefix b: got %q, %v", out, err)
	}
	out, err = c.runCmd("", "job", "--server", c.url, "--token", billing, "rm", "--prefix", "tmp", "--yes")
	if err != nil || !strings.Contains(out, "no job's ID starts with") {
		t.Errorf("scoped rm --prefix tmp: got %q, %v", out, err)
	}
	if got, want := c.ids(), []string{"bar/tmp/1", "keep/1", "tmp", "tmpx"}; !slices.Equal(got, want) {
		t.Errorf("after the scoped removals: got %q, want %q", got, want)
	}
}

// TestIsTerminal: rm --prefix asks only on a terminal. /dev/null (the
// standard input of cron jobs and CI steps) is a character device but
// no terminal: there it must refuse without --yes, not ask.
func TestIsTerminal(t *testing.T) {
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		name string
		in   io.Reader
	}{
		{"/dev/null", devNull},
		{"a pipe", r},
		{"a reader", strings.NewReader("yes\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if isTerminal(tc.in) {
				t.Errorf("isTerminal(%s) = true, want false", tc.name)
			}
		})
	}
}
