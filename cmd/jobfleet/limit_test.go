package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"
)

// limit runs `jobfleet limit --server URL --token TOKEN args...`.
func (c *cliEnv) limit(args ...string) (string, error) {
	c.t.Helper()
	return c.runCmd("", append([]string{"limit", "--server", c.url, "--token", c.token}, args...)...)
}

func TestLimitCommands(t *testing.T) {
	c := newCLIEnv(t)
	if out, err := c.limit("set", "billing-db", "--max-running", "5"); err != nil || !strings.Contains(out, `created limit "billing-db" (max running 5, rate -)`) {
		t.Fatalf("limit set: %q, %v", out, err)
	}
	if out, err := c.limit("set", "partner-api", "--rate", "100", "--per", "1m"); err != nil || !strings.Contains(out, "rate 100/1m") {
		t.Fatalf("limit set --rate: %q, %v", out, err)
	}
	doc := writeFile(t, "db.json", `{"max_running": 0, "rate": {"count": 3, "per": "10s"}}`)
	if out, err := c.limit("set", "billing-db", "-f", doc); err != nil || !strings.Contains(out, `replaced limit "billing-db" (max running 0, rate 3/10s)`) {
		t.Fatalf("limit set -f: %q, %v", out, err)
	}
	out, err := c.limit("get", "billing-db")
	for _, want := range []string{"MAX RUNNING", "3/10s", "RUNNING"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("limit get: %q (%v) lacks %q", out, err, want)
		}
	}
	out, err = c.limit("ls")
	if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, "partner-api") {
		t.Errorf("limit ls: %q, %v; want a header and two rows", out, err)
	}
	var list api.LimitList
	out, _ = c.limit("ls", "-o", "json", "--prefix", "partner")
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Limits) != 1 {
		t.Errorf("limit ls -o json --prefix partner: %q (%v)", out, err)
	}
	for _, bad := range [][]string{
		{"set", "x"},
		{"set", "x", "--max-running", "-1"},
		{"set", "x", "--rate", "5"},
		{"set", "x", "--rate", "5", "--per", "1ms"},
		{"set", "x", "-f", doc, "--max-running", "1"},
		{"get", "nope"},
	} {
		if out, err := c.limit(bad...); err == nil {
			t.Errorf("limit %q: got success %q, want an error", bad, out)
		}
	}
	out, err = c.runCmd("", "cluster", "limits", "--server", c.url, "--token", c.token)
	if err != nil || !strings.Contains(out, "KEY") || !strings.Contains(out, "partner-api") || !strings.Contains(out, "100/1m") {
		t.Errorf("cluster limits: %q, %v", out, err)
	}
	if out, err := c.limit("rm", "billing-db"); err != nil || !strings.Contains(out, `deleted limit "billing-db"`) {
		t.Errorf("limit rm: %q, %v", out, err)
	}
	if _, err := c.limit("rm", "billing-db"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("limit rm again: %v, want not found", err)
	}
}
