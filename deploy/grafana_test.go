package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// dashboard is what the tests read of a Grafana dashboard's JSON model.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID      string `json:"refId"`
		Expr       string `json:"expr"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// grafanaVars are the dashboard's template variables as a query sees
// them, replaced by values PromQL parses.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$namespace", ".*", "${namespace}", ".*")

// dashboardMetrics reads the dashboard at file and returns the metric
// names its queries select, by panel title; it fails t on a dashboard
// Grafana would show broken: a query that does not parse, a panel
// without a title, a description or a data source from the variable,
// two panels with one ID, or a panel outside the 24 columns.
func dashboardMetrics(t *testing.T, file string) map[string][]string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(src, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("%s: no title or uid", file)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] || !vars["namespace"] {
		t.Errorf("%s: template variables %v, want datasource and namespace", file, vars)
	}
	p := parser.NewParser(parser.Options{})
	ids := map[int]string{}
	out := map[string][]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, pn := range ps {
			name := fmt.Sprintf("panel %d %q", pn.ID, pn.Title)
			if prev, dup := ids[pn.ID]; dup {
				t.Errorf("%s: %s has the ID of %s", file, name, prev)
			}
			ids[pn.ID] = name
			if g := pn.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: %s at %+v, outside the grid's 24 columns", file, name, g)
			}
			walk(pn.Panels)
			if pn.Type == "row" {
				continue
			}
			if pn.Title == "" || pn.Description == "" {
				t.Errorf("%s: %s lacks a title or a description", file, name)
			}
			if pn.Datasource == nil || pn.Datasource.UID != "${datasource}" {
				t.Errorf("%s: %s does not query the dashboard's data source variable", file, name)
			}
			if len(pn.Targets) == 0 {
				t.Errorf("%s: %s has no query", file, name)
			}
			for _, tg := range pn.Targets {
				expr, err := p.ParseExpr(grafanaVars.Replace(tg.Expr))
				if err != nil {
					t.Errorf("%s: %s, query %s: %v", file, name, tg.RefID, err)
					continue
				}
				parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
					if vs, ok := n.(*parser.VectorSelector); ok {
						out[pn.Title] = append(out[pn.Title], vs.Name)
					}
					return nil
				})
			}
		}
	}
	walk(d.Panels)
	return out
}

// TestDashboard: every metric the Grafana dashboard queries is one the
// binary defines, and it shows what an operator looks at first.
func TestDashboard(t *testing.T) {
	defined := definedMetrics(t)
	panels := dashboardMetrics(t, filepath.Join("grafana", "jobfleet.json"))
	shown := map[string]bool{}
	for _, title := range sortedKeys(panels) {
		for _, m := range panels[title] {
			shown[m] = true
			if !defined[m] {
				t.Errorf("panel %q: the binary defines no metric %s", title, m)
			}
		}
	}
	for _, m := range []string{
		"jobfleet_fires_total", "jobfleet_schedule_lag_seconds_bucket", "jobfleet_runs_finished_total", "jobfleet_misfires_total",
		"jobfleet_jobs_overdue", "jobfleet_runs_waiting", "jobfleet_notifications_total", "jobfleet_partitions_owned",
	} {
		if !shown[m] {
			t.Errorf("the dashboard shows no %s", m)
		}
	}
}

// TestDashboardCheckFails: a dashboard naming a metric the binary does
// not define fails the check.
func TestDashboardCheckFails(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("grafana", "jobfleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "jobfleet_jobs_overdue{", "jobfleet_job_overdue{", 1)
	if bad == string(src) {
		t.Fatal("the dashboard has no jobfleet_jobs_overdue query to break")
	}
	file := filepath.Join(t.TempDir(), "jobfleet.json")
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	defined := definedMetrics(t)
	found := false
	for _, ms := range dashboardMetrics(t, file) {
		for _, m := range ms {
			if !defined[m] {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("a dashboard naming an undefined metric passes")
	}
}
