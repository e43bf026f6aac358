package deploy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"log/slog"
)

// healthyFleet is 30 minutes of a healthy two-member fleet, one sample a
// minute, in promqltest's load syntax (a+bxN: N+1 samples from a, adding
// b each minute). The lag histogram's buckets are the binary's (powers of
// two from 1 ms).
const healthyFleet = `
  jobfleet_partitions_targeted{namespace="jobfleet",instance="a"} 512+0x30
  jobfleet_partitions_targeted{namespace="jobfleet",instance="b"} 512+0x30
  jobfleet_partitions_owned{namespace="jobfleet",instance="a"} 512+0x30
  jobfleet_partitions_owned{namespace="jobfleet",instance="b"} 512+0x30
  jobfleet_lease_keepalive_failures_total{namespace="jobfleet",instance="a"} 0+0x30
  jobfleet_lease_sessions_ended_total{namespace="jobfleet",instance="a",reason="closed"} 0+1x30
  jobfleet_lease_keepalive_seconds_bucket{namespace="jobfleet",instance="a",le="0.016"} 0+48x30
  jobfleet_lease_keepalive_seconds_bucket{namespace="jobfleet",instance="a",le="1.024"} 0+48x30
  jobfleet_lease_keepalive_seconds_bucket{namespace="jobfleet",instance="a",le="2.048"} 0+48x30
  jobfleet_lease_keepalive_seconds_bucket{namespace="jobfleet",instance="a",le="+Inf"} 0+48x30
  jobfleet_fencing_failures_total{namespace="jobfleet",instance="a"} 0+0x30
  jobfleet_schedule_lag_seconds_bucket{namespace="jobfleet",instance="a",le="0.064"} 0+600x30
  jobfleet_schedule_lag_seconds_bucket{namespace="jobfleet",instance="a",le="0.128"} 0+600x30
  jobfleet_schedule_lag_seconds_bucket{namespace="jobfleet",instance="a",le="0.256"} 0+600x30
  jobfleet_schedule_lag_seconds_bucket{namespace="jobfleet",instance="a",le="+Inf"} 0+600x30
  jobfleet_runs_finished_total{namespace="jobfleet",instance="a",status="succeeded"} 0+60x30
  jobfleet_runs_finished_total{namespace="jobfleet",instance="a",status="dead"} 0+0x30
  jobfleet_runs_waiting{namespace="jobfleet",instance="a"} 3+0x30
  jobfleet_runs_unservable{namespace="jobfleet",instance="a",executor="shell"} 0+0x30
  jobfleet_notifications_total{namespace="jobfleet",instance="a",result="delivered"} 0+5x30
  jobfleet_attempts_started_total{namespace="jobfleet",instance="a"} 0+60x30
  jobfleet_etcd_db_size_bytes{namespace="jobfleet",instance="a"} 1e9+0x30
  jobfleet_etcd_quota_bytes{namespace="jobfleet",instance="a"} 8e9+0x30
  jobfleet_storage_high_water{namespace="jobfleet",instance="a"} 0+0x30
  jobfleet_etcd_nospace_alarm{namespace="jobfleet",instance="a"} 0+0x30
  jobfleet_etcd_compactions_total{namespace="jobfleet",instance="a",result="ok"} 0+1x30
  jobfleet_etcd_endpoint_up{namespace="jobfleet",instance="a",endpoint="https://etcd-0:2379"} 1+0x30
  jobfleet_etcd_endpoint_up{namespace="jobfleet",instance="b",endpoint="https://etcd-0:2379"} 1+0x30
  jobfleet_jobs_overdue{namespace="jobfleet",instance="a"} 0+0x30
  jobfleet_jobs_overdue{namespace="jobfleet",instance="b"} 0+0x30
  jobfleet_misfires_total{namespace="jobfleet",instance="a",fate="fired"} 4+0x30
`

// alertExprs returns the expression of every alert of the rules file.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(filepath.Join("prometheus", "rules.yaml"), false, model.LegacyValidation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	out := map[string]string{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = r.Expr
			}
		}
	}
	return out
}

// firing evaluates expr at minute 30 of series and returns how many
// elements it yields.
func firing(t *testing.T, series, expr string) int {
	t.Helper()
	st := promqltest.LoadedStorage(t, "load 1m\n"+strings.TrimLeft(series, "\n"))
	engine := promqltest.NewTestEngine(t, false, 5*time.Minute, 1_000_000)
	q, err := engine.NewInstantQuery(context.Background(), st, nil, expr, time.Unix(0, 0).Add(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", expr, res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return len(v)
}

// TestRulesFire evaluates every alert on a healthy fleet (none may fire)
// and on the fault it is for (it must fire).
func TestRulesFire(t *testing.T) {
	exprs := alertExprs(t)
	faults := map[string]struct{ old, new string }{
		"JobfleetPartitionsWithoutOwner": {`owned{namespace="jobfleet",instance="b"} 512+0x30`, `owned{namespace="jobfleet",instance="b"} 500+0x30`},
		"JobfleetPartitionsNotReleased":  {`owned{namespace="jobfleet",instance="b"} 512+0x30`, `owned{namespace="jobfleet",instance="b"} 520+0x30`},
		"JobfleetLeaseKeepaliveFailing":  {`keepalive_failures_total{namespace="jobfleet",instance="a"} 0+0x30`, `keepalive_failures_total{namespace="jobfleet",instance="a"} 0+2x30`},
		"JobfleetLeaseKeepaliveSlow": {
			`le="0.016"} 0+48x30
  jobfleet_lease_keepalive_seconds_bucket{namespace="jobfleet",instance="a",le="1.024"} 0+48x30`,
			`le="0.016"} 0+1x30
  jobfleet_lease_keepalive_seconds_bucket{namespace="jobfleet",instance="a",le="1.024"} 0+2x30`},
		"JobfleetMemberFencedItself": {`reason="closed"} 0+1x30`, `reason="renew_deadline"} 0+1x30`},
		"JobfleetFencingFailures":    {`fencing_failures_total{namespace="jobfleet",instance="a"} 0+0x30`, `fencing_failures_total{namespace="jobfleet",instance="a"} 0+1x30`},
		"JobfleetScheduleLagHigh": {
			`le="0.064"} 0+600x30
  jobfleet_schedule_lag_seconds_bucket{namespace="jobfleet",instance="a",le="0.128"} 0+600x30`,
			`le="0.064"} 0+10x30
  jobfleet_schedule_lag_seconds_bucket{namespace="jobfleet",instance="a",le="0.128"} 0+20x30`},
		"JobfleetDeadRuns":              {`status="dead"} 0+0x30`, `status="dead"} 0+1x30`},
		"JobfleetRunsNotTaken":          {`attempts_started_total{namespace="jobfleet",instance="a"} 0+60x30`, `attempts_started_total{namespace="jobfleet",instance="a"} 0+0x30`},
		"JobfleetEtcdNearQuota":         {`db_size_bytes{namespace="jobfleet",instance="a"} 1e9+0x30`, `db_size_bytes{namespace="jobfleet",instance="a"} 6e9+0x30`},
		"JobfleetStorageHighWater":      {`high_water{namespace="jobfleet",instance="a"} 0+0x30`, `high_water{namespace="jobfleet",instance="a"} 1+0x30`},
		"JobfleetEtcdNoSpace":           {`nospace_alarm{namespace="jobfleet",instance="a"} 0+0x30`, `nospace_alarm{namespace="jobfleet",instance="a"} 1+0x30`},
		"JobfleetEtcdEndpointDown":      {`instance="b",endpoint="https://etcd-0:2379"} 1+0x30`, `instance="b",endpoint="https://etcd-0:2379"} 1+0x20 0+0x10`},
		"JobfleetEtcdCompactionFailing": {`result="ok"} 0+1x30`, `result="failed"} 0+1x30`},
		"JobfleetRunsUnservable":        {`executor="shell"} 0+0x30`, `executor="shell"} 2+0x30`},
		"JobfleetNotificationsGivenUp":  {`result="delivered"} 0+5x30`, `result="given_up"} 0+1x30`},
		"JobfleetJobsOverdue":           {`overdue{namespace="jobfleet",instance="b"} 0+0x30`, `overdue{namespace="jobfleet",instance="b"} 0+0x20 1+0x10`},
		"JobfleetMisfires":              {`fate="fired"} 4+0x30`, `fate="fired"} 4+0x20 9+0x10`},
	}
	for _, name := range sortedKeys(exprs) {
		t.Run(name, func(t *testing.T) {
			expr := exprs[name]
			if n := firing(t, healthyFleet, expr); n != 0 {
				t.Errorf("fires %d times on a healthy fleet", n)
			}
			f, ok := faults[name]
			if !ok {
				t.Fatalf("no fault scenario for %s", name)
			}
			broken := strings.Replace(healthyFleet, f.old, f.new, 1)
			if broken == healthyFleet {
				t.Fatalf("scenario: %q not in the healthy fleet", f.old)
			}
			if n := firing(t, broken, expr); n == 0 {
				t.Errorf("does not fire on its fault")
			}
		})
	}
}
