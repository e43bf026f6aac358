package chaos

import (
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
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
