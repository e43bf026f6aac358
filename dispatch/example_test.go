package dispatch_test

import (
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/schedule"
)

// PlanFires decides what a job fires at an instant: here a job every 10s,
// evaluated 25s after its creation for the first time (an owner took its
// partition late), under the default misfire policy run_once.
func ExamplePlanFires() {
	created := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	j := api.Job{ID: "report", Schedule: "@every 10s", CreatedAt: created,
		Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9000/hook"}}
	j.Normalize()
	sched, _ := j.ParseSchedule()
	plan, _ := dispatch.PlanFires(&j, sched, api.JobState{}, nil, created.Add(25*time.Second), schedule.Policy{Grace: time.Second}, nil, "orchestrator-1", 42)
	for _, r := range plan.Runs {
		fmt.Println(r.ID, r.Status)
	}
	fmt.Println("skipped:", plan.State.Skipped, "next:", plan.State.Next.Format(time.TimeOnly))
	// Output:
	// report@2026-06-01T00:00:20.000Z pending
	// skipped: 1 next: 00:00:30
}

func ExampleBackoff() {
	p := api.RetryPolicy{InitialBackoff: api.Duration(time.Second), MaxBackoff: api.Duration(time.Minute)}
	for n := 1; n <= 8; n++ {
		// rnd 0 gives the lower bound: half of the exponential step.
		fmt.Print(dispatch.Backoff(p, n, 0), " ")
	}
	fmt.Println()
	// Output: 500ms 1s 2s 4s 8s 16s 30s 30s
}

// PlanTrigger decides what a manual trigger does: here for a job with
// concurrency_policy "forbid" while an earlier run is still active, and
// once it has finished.
func ExamplePlanTrigger() {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	j := api.Job{ID: "deploy", ConcurrencyPolicy: api.ConcurrencyForbid, CreatedAt: now.Add(-time.Hour),
		Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9000/hook"}}
	j.Normalize()
	busy := dispatch.PlanTrigger(&j, api.JobState{}, []string{"deploy@2026-06-01T11:59:00.000Z"}, now, now, "orchestrator-1", 42)
	idle := dispatch.PlanTrigger(&j, api.JobState{}, nil, now, now, "orchestrator-1", 42)
	fmt.Println(busy.Runs[0].Status, "-", busy.Runs[0].Reason)
	fmt.Println(idle.Runs[0].ID, idle.Runs[0].Status)
	// Output:
	// skipped - triggered manually; concurrency_policy forbid: an earlier run is still active
	// deploy@2026-06-01T12:00:00.000Z pending
}
