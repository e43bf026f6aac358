package chaos

import (
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

func TestCheckLimits(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	two := 2
	spec := LimitSpec{
		Limits: map[string]api.Limit{
			"db":  {Key: "db", MaxRunning: &two},
			"api": {Key: "api", Rate: &api.LimitRate{Count: 2, Per: api.Duration(time.Second)}},
		},
		JobLimits: map[string][]string{"a": {"db"}, "b": {"db"}, "c": {"db", "api"}, "r": {"api"}},
	}
	exec := func(job string, from, to float64) Execution {
		return Execution{Job: job, Run: job + "@x", Attempt: 1, Start: at(from), End: at(to), Status: 200}
	}
	for _, tc := range []struct {
		name               string
		execs              []Execution
		starts             map[string][]time.Time
		held               map[string]int
		skewed             []Window
		over, rate, leaked int
		skewedRate         int
		overlap            int
	}{
		{name: "within the limits", overlap: 2,
			execs:  []Execution{exec("a", 0, 2), exec("b", 1, 3), exec("c", 2, 4), exec("free", 0, 5), exec("free", 0, 5)},
			starts: map[string][]time.Time{"r": {at(0), at(0.5)}, "c": {at(1.5), at(2)}}},
		{name: "an end and a start at one instant", overlap: 2,
			execs: []Execution{exec("a", 0, 1), exec("b", 0, 1), exec("c", 1, 2)}},
		{name: "three at once", overlap: 3, over: 1,
			execs: []Execution{exec("a", 0, 2), exec("b", 1, 3), exec("c", 1.5, 1.8)}},
		{name: "a still open execution counts from its start", overlap: 3, over: 1,
			execs: []Execution{exec("a", 0, 5), exec("b", 1, 5), {Job: "c", Start: at(2)}}},
		{name: "three starts within a second", overlap: 0, rate: 1,
			starts: map[string][]time.Time{"r": {at(0), at(0.5)}, "c": {at(0.9)}}},
		{name: "three starts within a second while a clock was off", overlap: 0, skewedRate: 1,
			starts: map[string][]time.Time{"r": {at(10), at(10.5)}, "c": {at(10.9)}},
			skewed: []Window{{Start: at(5), End: at(7), Skew: -2 * time.Second}}},
		{name: "three starts within a second long after a clock offset", overlap: 0, rate: 1,
			starts: map[string][]time.Time{"r": {at(20), at(20.5)}, "c": {at(20.9)}},
			skewed: []Window{{Start: at(5), End: at(7), Skew: -2 * time.Second}}},
		{name: "a slot left held", overlap: 0, leaked: 1, held: map[string]int{"db": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			starts := map[string][]LimitStart{}
			for job, tt := range tc.starts {
				for i, at := range tt {
					starts[job] = append(starts[job], LimitStart{Run: job + "@x", Item: noItem, Attempt: i + 1, At: at})
				}
			}
			held := map[string][]api.LimitHolder{}
			for k, n := range tc.held {
				for i := range n {
					held[k] = append(held[k], api.LimitHolder{RunID: "a@x", JobID: "a", Item: noItem, Attempt: i + 1, Worker: "w1.1"})
				}
			}
			got := CheckLimits(spec, tc.execs, starts, held, tc.skewed)
			if got.OverRunning != tc.over || got.RateExceeded != tc.rate || got.SlotsLeaked != tc.leaked || got.MaxOverlap["db"] != tc.overlap || got.RateExceededSkewed != tc.skewedRate {
				t.Fatalf("got %+v, want over_running %d, rate_exceeded %d (skewed %d), slots_leaked %d, db overlap %d", got, tc.over, tc.rate, tc.skewedRate, tc.leaked, tc.overlap)
			}
			if n := got.OverRunning + got.RateExceeded + got.SlotsLeaked; len(got.Found) != n {
				t.Fatalf("found %d cases (%+v), want one per must-be-zero count (%d)", len(got.Found), got.Found, n)
			}
		})
	}
}

// TestCheckLimitKeys: the checker feeds CheckLimits from its input (the
// workload's limits, the recorder's executions, the runs' attempts, the
// slots held at the end) and lists what it finds as violations.
func TestCheckLimitKeys(t *testing.T) {
	one := 1
	limited := func() *builder {
		b := newBuilder()
		for _, id := range []string{"a", "b"} {
			b.job(id, "@every 1s", 0, false)
			b.fireEverySecond(id, 0, 20)
			b.job(id, "@every 1s", 20.5, true)
		}
		b.in.Limits = &LimitSpec{
			Limits: map[string]api.Limit{
				"db":  {Key: "db", MaxRunning: &one},
				"api": {Key: "api", Rate: &api.LimitRate{Count: 2, Per: api.Duration(time.Second)}},
			},
			JobLimits: map[string][]string{"a": {"db", "api"}, "b": {"db"}},
		}
		for i, e := range b.in.Executions {
			if e.Job == "b" {
				e.Start = e.Start.Add(300 * time.Millisecond) // b's at .31, a's at .01
			}
			e.End = e.Start.Add(100 * time.Millisecond)
			b.in.Executions[i] = e
		}
		return b
	}
	t.Run("within the limits", func(t *testing.T) {
		r := limited().check(25)
		if !r.OK() {
			dump(t, r)
			t.Fatalf("violations: %s", violations(r))
		}
		if l := r.Global.Limits; l == nil || l.Executions != 40 || l.MaxOverlap["db"] != 1 || l.RateStarts != 20 {
			t.Fatalf("figures %+v, want 40 executions, at most 1 of db at once, 20 starts of api", l)
		}
	})
	t.Run("two running at once", func(t *testing.T) {
		b := limited()
		for i, e := range b.in.Executions {
			if e.Job == "b" && e.Start.Equal(at(5.31)) {
				b.in.Executions[i].End = at(6.05) // overlaps a's at 6.01
			}
		}
		if got := violations(b.check(25)); got != "limit_over_running×1" {
			t.Fatalf("violations %q, want limit_over_running×1", got)
		}
	})
	t.Run("three starts within the rate window", func(t *testing.T) {
		b := limited()
		b.in.Limits.Limits["api"] = api.Limit{Key: "api", Rate: &api.LimitRate{Count: 1, Per: api.Duration(1500 * time.Millisecond)}}
		r := b.check(25)
		if got := violations(r); got != "limit_rate_exceeded×19" {
			t.Fatalf("violations %q, want limit_rate_exceeded×19", got)
		}
		b.clock("m1", 3*time.Second, 0, 10, nil)
		r = b.check(25)
		if got := violations(r); got != "limit_rate_exceeded×3" || r.Global.Limits.RateExceededSkewed != 16 {
			t.Fatalf("with a clock offset until 10s: violations %q, %d counted apart; want limit_rate_exceeded×3 (windows from after 10s + 3s + 1.5s + 2s), 16 apart", got, r.Global.Limits.RateExceededSkewed)
		}
	})
	t.Run("a slot held at the end", func(t *testing.T) {
		b := limited()
		b.in.LimitsHeld = map[string][]api.LimitHolder{"db": {{RunID: store.RunID("a", at(20)), JobID: "a", Item: noItem, Attempt: 1, Worker: "w1.0", Since: at(20)}}}
		if got := violations(b.check(25)); got != "limit_slots_leaked×1" {
			t.Fatalf("violations %q, want limit_slots_leaked×1", got)
		}
	})
}
