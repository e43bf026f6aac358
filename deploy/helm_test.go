package deploy

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/runtime"
)

// renderChart renders the chart as release "jobfleet" in namespace
// "jobfleet" with values overriding the defaults, and decodes the
// manifests strictly.
func renderChart(t *testing.T, values map[string]any) ([]runtime.Object, map[string]string) {
	t.Helper()
	ch, err := loader.Load(filepath.Join("helm", "jobfleet"))
	if err != nil {
		t.Fatal(err)
	}
	return renderLoaded(t, ch, values)
}

func renderLoaded(t *testing.T, ch *chart.Chart, values map[string]any) ([]runtime.Object, map[string]string) {
	t.Helper()
	if err := chartutil.ValidateAgainstSchema(ch, values); err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: "jobfleet", Namespace: "jobfleet", Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for _, name := range sortedKeys(out) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		o, err := decodeObjects(name, []byte(out[name]))
		if err != nil {
			t.Error(err)
			continue
		}
		objs = append(objs, o...)
	}
	return objs, out
}

// chartSecrets are the keys of the Secrets the chart's defaults name:
// the same shapes as deploy/kubernetes/secrets.
func chartSecrets(t *testing.T) map[string]map[string]bool {
	t.Helper()
	s := secretKeys(decodeFiles(t, filepath.Join("kubernetes", "secrets")))
	s["jobfleet-client-ca"] = map[string]bool{"ca.crt": true}
	return s
}

func TestChartRenders(t *testing.T) {
	needBinary(t)
	secrets := chartSecrets(t)
	for _, tt := range []struct {
		name   string
		values map[string]any
		kinds  []string
	}{
		{name: "defaults: API over TLS, probes over HTTPS", values: nil,
			kinds: []string{"StatefulSet", "Deployment", "PodDisruptionBudget", "NetworkPolicy", "Service"}},
		{name: "client certificates required: probes on the metrics port",
			values: map[string]any{"tls": map[string]any{"clientCASecret": "jobfleet-client-ca"}}},
		{name: "API without TLS (behind a mesh that encrypts)",
			values: map[string]any{"tls": map[string]any{"enabled": false}}},
		{name: "etcd TLS off, no bootstrap admin, five members",
			values: map[string]any{"etcd": map[string]any{"tlsSecret": "", "endpoints": []any{"http://10.0.0.21:2379"}}, "auth": map[string]any{"adminSecret": ""}, "orchestrator": map[string]any{"replicas": 5}}},
		{name: "monitoring and worker policies",
			values: map[string]any{
				"metrics": map[string]any{"serviceMonitor": true, "prometheusRule": true},
				"worker":  map[string]any{"allowShell": true, "httpAllow": []any{"10.0.5.0/24", "*.internal.example"}, "replicas": 5},
			},
			kinds: []string{"ServiceMonitor", "PrometheusRule"}},
		{name: "no network policies", values: map[string]any{"networkPolicy": map[string]any{"enabled": false}}},
		{name: "extra flags",
			values: map[string]any{"orchestrator": map[string]any{"extraArgs": []any{"--run-lease=1m"}}, "worker": map[string]any{"extraArgs": []any{"--poll-wait=10s"}}}},
		{name: "extra settings, over the chart's",
			values: map[string]any{"orchestrator": map[string]any{"config": map[string]any{"history-max-runs": 50, "lease-ttl": "10s", "warm-standby": true}},
				"worker": map[string]any{"config": map[string]any{"secret-env": []any{"BILLING_TOKEN"}, "concurrency": 16}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs, _ := renderChart(t, tt.values)
			shape := checkFleet(t, "chart ("+tt.name+")", objs, secrets)
			for _, k := range tt.kinds {
				if shape.kinds[k] == 0 {
					t.Errorf("no %s rendered", k)
				}
			}
		})
	}
}

// TestChartMatchesManifests checks that the chart's defaults, rendered as
// release "jobfleet" in namespace "jobfleet", run the binary exactly as
// the plain manifests do.
func TestChartMatchesManifests(t *testing.T) {
	needBinary(t)
	objs, _ := renderChart(t, nil)
	secrets := chartSecrets(t)
	rec := &recorder{}
	chartShape := checkFleet(rec, "chart", objs, secrets)
	plain := checkFleet(rec, "manifests", decodeFiles(t, "kubernetes"), secrets)
	if rec.failed {
		t.Fatalf("checks failed: %v", rec.errors)
	}
	sorted := func(s []string) []string { s = slices.Clone(s); sort.Strings(s); return s }
	if a, b := sorted(chartShape.orchestratorArgs), sorted(plain.orchestratorArgs); !slices.Equal(a, b) {
		t.Errorf("orchestrator arguments differ:\nchart     %q\nmanifests %q", a, b)
	}
	if a, b := sorted(chartShape.workerArgs), sorted(plain.workerArgs); !slices.Equal(a, b) {
		t.Errorf("worker arguments differ:\nchart     %q\nmanifests %q", a, b)
	}
	for _, c := range []struct {
		what          string
		chart, manual map[string]string
	}{{"orchestrator", chartShape.orchestratorFlags, plain.orchestratorFlags}, {"worker", chartShape.workerFlags, plain.workerFlags}} {
		if !maps.Equal(c.chart, c.manual) || len(c.chart) < 5 {
			t.Errorf("%s settings differ:\nchart     %v\nmanifests %v", c.what, c.chart, c.manual)
		}
	}
}

func TestChartRefusesBadValues(t *testing.T) {
	ch, err := loader.Load(filepath.Join("helm", "jobfleet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"no etcd", map[string]any{"etcd": map[string]any{"endpoints": []any{}}}, "etcd.endpoints"},
		{"no worker credential", map[string]any{"auth": map[string]any{"workerSecret": ""}}, "auth.workerSecret"},
		{"no partitions", map[string]any{"cluster": map[string]any{"partitions": 0}}, "cluster.partitions"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vals, err := chartutil.ToRenderValues(ch, tt.values, chartutil.ReleaseOptions{Name: "jobfleet", Namespace: "jobfleet"}, chartutil.DefaultCapabilities)
			if err != nil {
				t.Fatal(err)
			}
			_, err = engine.Render(ch, vals)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// TestChartRulesAreTheRules checks that the chart's copy of the alert
// rules (charts cannot read files outside their directory) is the rules
// file.
func TestChartRulesAreTheRules(t *testing.T) {
	a, err := os.ReadFile(filepath.Join("prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("helm", "jobfleet", "files", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("helm/jobfleet/files/rules.yaml differs from prometheus/rules.yaml: cp prometheus/rules.yaml helm/jobfleet/files/rules.yaml")
	}
}

// TestChartExtraArgsChecked checks that the flags and settings a user
// adds through extraArgs and config go through the same checks (a
// misspelt one fails, and so does one the binary refuses).
func TestChartExtraArgsChecked(t *testing.T) {
	needBinary(t)
	for _, values := range []map[string]any{
		{"orchestrator": map[string]any{"extraArgs": []any{"--run-leas=1m"}}},
		{"orchestrator": map[string]any{"config": map[string]any{"run-leas": "1m"}}},
		{"orchestrator": map[string]any{"config": map[string]any{"history-max-runs": -1}}},
		{"worker": map[string]any{"config": map[string]any{"poll-wait": "1m"}}},
	} {
		objs, _ := renderChart(t, values)
		rec := &recorder{}
		checkFleet(rec, "chart", objs, chartSecrets(t))
		if !rec.failed {
			t.Errorf("a chart rendered with %v passes the checks", values)
		}
	}
}

// TestChartSettingsOverride: orchestrator.config and worker.config reach
// the binary over what the chart derives from its other values.
func TestChartSettingsOverride(t *testing.T) {
	needBinary(t)
	objs, _ := renderChart(t, map[string]any{
		"orchestrator": map[string]any{"config": map[string]any{"lease-ttl": "10s", "log-format": "console"}},
		"worker":       map[string]any{"config": map[string]any{"concurrency": 16, "discover": false}},
	})
	shape := checkFleet(t, "chart", objs, chartSecrets(t))
	for _, c := range []struct{ got, want string }{
		{shape.orchestratorFlags["lease-ttl"], "10s"}, {shape.orchestratorFlags["log-format"], "console"},
		{shape.workerFlags["concurrency"], "16"}, {shape.workerFlags["discover"], "false"},
	} {
		if c.got != c.want {
			t.Errorf("setting %q, want %q (orchestrator %v, worker %v)", c.got, c.want, shape.orchestratorFlags, shape.workerFlags)
		}
	}
}
