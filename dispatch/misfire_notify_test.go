package dispatch_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
)

// TestMissedTimesAreVisible: times a job's partition missed while it had
// no owner, past the misfire grace, are told to its "missed" subscribers
// (a misfire document with the counts of the decision) and, for those
// its misfire policy skipped, to its "skipped" subscribers; they are
// counted in its state (missed, skipped) and in jobfleet_misfires_total
// by fate. A time the fleet fires on time is none of these.
func TestMissedTimesAreVisible(t *testing.T) {
	h := newHarness(t)
	s := &recordingSender{}
	h.withSender(s)
	reg := prometheus.NewRegistry()
	metrics := dispatch.NewMetrics(reg) // one set for both owners
	withNotify := h.configure
	h.configure = func(c *dispatch.Config) {
		withNotify(c)
		c.Metrics = metrics
	}
	h.start("m1")
	j := h.create(api.Job{ID: "missed", Schedule: "@every 1m", // run_once: the latest missed time fires, the others are skipped
		Notify: []api.Notification{{On: []api.RunStatus{api.NotifyMissed, api.RunSkipped}, URL: "https://hooks.example/misfires"}}})
	h.parkedBoth()
	h.clock.Advance(time.Minute)
	h.waitRuns(j.ID, 1) // on time: no misfire
	h.parkedBoth()
	h.stop() // 5 times pass with no owner, well past the grace
	h.clock.Advance(5*time.Minute + 30*time.Second)
	h.start("m2")
	runs := h.waitRuns(j.ID, 2)
	if !runs[0].ScheduledAt.Equal(t0.Add(6 * time.Minute)) {
		t.Fatalf("after the outage: the latest run is for %v, want the latest missed time %v", runs[0].ScheduledAt, t0.Add(6*time.Minute))
	}
	tries := waitTries(t, s, 2)
	got := map[api.RunStatus]api.Misfire{}
	for _, o := range tries {
		var m api.Misfire
		if err := json.Unmarshal(o.Run, &m); err != nil {
			t.Fatalf("notification %s: %v: %s", o.Event, err, o.Run)
		}
		if _, twice := got[o.Event]; twice {
			t.Fatalf("two %q notifications: %+v", o.Event, tries)
		}
		got[o.Event] = m
	}
	for _, ev := range []api.RunStatus{api.NotifyMissed, api.RunSkipped} {
		m, ok := got[ev]
		if !ok || m.Event != ev || m.JobID != j.ID || m.Missed != 5 || m.Fired != 1 || m.Skipped != 4 || m.Dropped != 0 ||
			m.MisfirePolicy != api.MisfireRunOnce || !m.Through.Equal(t0.Add(6*time.Minute)) {
			t.Errorf("%s notification %+v (sent: %v): want 5 missed through %v, 1 fired, 4 skipped by run_once", ev, m, ok, t0.Add(6*time.Minute))
		}
	}
	st := h.job(j.ID).State
	if st == nil || st.Missed != 5 || st.Skipped != 4 {
		t.Fatalf("state %+v: want missed 5, skipped 4", st)
	}
	for fate, want := range map[string]float64{"fired": 1, "skipped": 4, "dropped": 0} {
		if got := metrictest.Value(t, reg, "jobfleet_misfires_total", "fate", fate); got != want {
			t.Errorf("jobfleet_misfires_total{fate=%q} = %v, want %v", fate, got, want)
		}
	}
}
