package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/internal/buildinfo"
)

func TestVersionCommand(t *testing.T) {
	out, err := runCLI("version")
	if err != nil {
		t.Fatal(err)
	}
	info := buildinfo.Get()
	for _, want := range []string{"version  " + info.Version, "commit   " + info.Commit, "go       " + runtime.Version()} {
		if !strings.Contains(out, want) {
			t.Errorf("jobfleet version printed %q, lacking %q", out, want)
		}
	}
	out, err = runCLI("version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got buildinfo.Info
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("jobfleet version -o json: %v in %q", err, out)
	}
	if got != info {
		t.Errorf("jobfleet version -o json: got %+v, want %+v", got, info)
	}
	if out, err := runCLI("version", "-o", "yaml"); err != nil || !strings.Contains(out, "version: "+info.Version) {
		t.Errorf("jobfleet version -o yaml: got %q, %v", out, err)
	}
	if _, err := runCLI("version", "-o", "xml"); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("jobfleet version -o xml: got error %v, want one naming --output", err)
	}
}

func TestFlagsListing(t *testing.T) {
	out, err := runCLI("flags")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []commandFlags
	if err := json.Unmarshal([]byte(out), &cmds); err != nil {
		t.Fatalf("jobfleet flags: %v", err)
	}
	byName := map[string]map[string]flagInfo{}
	for _, c := range cmds {
		byName[c.Command] = map[string]flagInfo{}
		for _, f := range c.Flags {
			byName[c.Command][f.Name] = f
		}
	}
	for _, tt := range []struct{ command, flag, typ, env string }{
		{"orchestrator", "etcd-endpoints", "stringSlice", "JOBFLEET_ETCD_ENDPOINTS"},
		{"orchestrator", "lease-ttl", "duration", "JOBFLEET_LEASE_TTL"},
		{"orchestrator", "metrics-listen", "string", "JOBFLEET_METRICS_LISTEN"},
		{"worker", "concurrency", "int", "JOBFLEET_CONCURRENCY"},
		{"worker", "allow-shell", "bool", "JOBFLEET_ALLOW_SHELL"},
		{"job create", "schedule", "string", "JOBFLEET_SCHEDULE"},
		{"etcd", "data-dir", "string", "JOBFLEET_DATA_DIR"},
	} {
		f, ok := byName[tt.command][tt.flag]
		if !ok {
			t.Errorf("jobfleet flags lacks %s --%s", tt.command, tt.flag)
			continue
		}
		if f.Type != tt.typ || f.Env != tt.env {
			t.Errorf("%s --%s: got type %q env %q, want %q %q", tt.command, tt.flag, f.Type, f.Env, tt.typ, tt.env)
		}
	}
	if _, ok := byName["job"]; ok {
		t.Errorf("jobfleet flags lists the command group job, which does not run")
	}
	if _, ok := byName["orchestrator"]["help"]; ok {
		t.Errorf("jobfleet flags lists --help")
	}
	for _, c := range cmds {
		if (c.Command == "etcd" || c.Command == "flags" || c.Command == "cli-docs") != c.Hidden {
			t.Errorf("%s: hidden %v", c.Command, c.Hidden)
		}
	}
}
