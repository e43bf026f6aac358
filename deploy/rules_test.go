package deploy

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// metricName matches a metric's name where the code defines it:
// prometheus.*Opts{Name: "..."}, or prometheus.NewDesc("...", ...) of a
// collector.
var metricName = regexp.MustCompile(`(?:Name:\s*|NewDesc\(\s*)"(jobfleet_[a-z0-9_]+)"`)

// definedMetrics returns the metric names the binary's code defines
// (Go files outside tests and outside this module), with the series
// names a histogram adds.
func definedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(repoFile(), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "deploy" || strings.HasPrefix(d.Name(), ".")) && path != repoFile() {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range metricName.FindAllSubmatch(src, -1) {
			n := string(m[1])
			names[n] = true
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[n+suffix] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The search must find what is certainly there.
	for _, n := range []string{"jobfleet_partitions_owned", "jobfleet_schedule_lag_seconds_bucket", "jobfleet_build_info", "jobfleet_runs_waiting"} {
		if !names[n] {
			t.Fatalf("found no definition of %s: the search is broken", n)
		}
	}
	return names
}

// ruleMetrics returns the metric names the alert expressions of file
// select, by alert.
func ruleMetrics(t *testing.T, file string) map[string][]string {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(file, false, model.LegacyValidation, p, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("%s: %v", file, err)
	}
	if groups == nil {
		t.FailNow()
	}
	out := map[string][]string{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("%s: %s: %v", file, r.Alert, err)
				continue
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					out[r.Alert] = append(out[r.Alert], vs.Name)
				}
				return nil
			})
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: %s lacks a severity, summary or description", file, r.Alert)
			}
		}
	}
	return out
}

func TestRules(t *testing.T) {
	defined := definedMetrics(t)
	alerts := ruleMetrics(t, filepath.Join("prometheus", "rules.yaml"))
	for _, want := range []string{
		"JobfleetPartitionsWithoutOwner", "JobfleetLeaseKeepaliveFailing", "JobfleetFencingFailures",
		"JobfleetScheduleLagHigh", "JobfleetDeadRuns", "JobfleetEtcdNearQuota", "JobfleetJobsOverdue", "JobfleetMisfires",
	} {
		if _, ok := alerts[want]; !ok {
			t.Errorf("no alert %s", want)
		}
	}
	for _, alert := range sortedKeys(alerts) {
		for _, m := range alerts[alert] {
			if !defined[m] {
				t.Errorf("%s: the binary defines no metric %s", alert, m)
			}
		}
	}
}

func TestRulesCheckFails(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "jobfleet_fencing_failures_total", "jobfleet_fencing_failure_total", 1)
	file := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	defined := definedMetrics(t)
	found := false
	for _, ms := range ruleMetrics(t, file) {
		for _, m := range ms {
			if !defined[m] {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("a rule naming an undefined metric passes")
	}
}
