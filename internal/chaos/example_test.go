package chaos_test

import (
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/internal/chaos"
)

// Check works on what a run recorded; here, a job created at 10:00:00 and
// paused at 10:00:02.5 whose fires, due at 10:00:01 and 10:00:02, never
// happened, while no fault was injected. (10:00:02 is within a second of
// the pause: the owner may have seen the pause first, so only 10:00:01 had
// to fire.)
func ExampleCheck() {
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	job := api.Job{ID: "report", Schedule: "@every 1s", CreatedAt: created, UpdatedAt: created}
	paused := job
	paused.Paused, paused.UpdatedAt = true, created.Add(2500*time.Millisecond)
	in := chaos.Input{
		Partitions: 1,
		Grace:      5 * time.Second,
		End:        created.Add(5 * time.Second),
		History: chaos.History{
			Specs: map[string][]chaos.SpecVersion{"report": {{Rev: 2, Job: job}, {Rev: 3, Job: paused}}},
			Runs:  map[string]*chaos.RunHistory{},
		},
		Listed: map[string]api.Job{"report": paused},
	}
	res := chaos.Check(in)
	fmt.Println("ok:", res.OK())
	for _, v := range res.Violations {
		fmt.Println(v.Check+":", v.Detail)
	}
	// Output:
	// ok: false
	// missed: job "report" (partition 0, misfire "run_once"): scheduled time 10:00:01.000 never fired
}
