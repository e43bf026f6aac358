package dispatch_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/store"
)

// TestBackfillAndJitterGiveOnlyTheFiresRunIDs: for a random job (a
// schedule, a zone, a jitter or none), the runs a backfill of [from, to)
// creates (the times the API records, schedule.Schedule.Between, made into
// runs by dispatch.NewRun as the owner makes them) are exactly the runs
// its owners' fires give the same times: the same run IDs, the same
// scheduled times, none a fire could not have given, none missing.
// The fires are planned as a partition's owners plan them (PlanFires at
// random instants, the state handed over through its stored form, every
// missed time fired: run_all), so a jitter's delay and handoffs are in
// the comparison.
func TestBackfillAndJitterGiveOnlyTheFiresRunIDs(t *testing.T) {
	specs := []string{"*/7 * * * *", "30 2 * * *", "0 9-17 * * mon-fri", "@hourly", "@every 90s", "15 */3 * * *"}
	zones := []string{"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata"}
	rapid.Check(t, func(rt *rapid.T) {
		spec := rapid.SampledFrom(specs).Draw(rt, "spec")
		zone := rapid.SampledFrom(zones).Draw(rt, "zone")
		var jitter time.Duration
		if rapid.Bool().Draw(rt, "jittered") {
			jitter = time.Duration(rapid.Int64Range(1, int64(3*time.Hour)).Draw(rt, "jitter")).Truncate(time.Millisecond) + time.Millisecond
		}
		// from: a whole second in the year around a change of daylight
		// saving time in most of the zones.
		from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, 60*24*3600).Draw(rt, "from")) * time.Second)
		to := from.Add(time.Duration(rapid.Int64Range(1, 2*24*3600).Draw(rt, "span")) * time.Second)
		id := fmt.Sprintf("team/job-%d", rapid.IntRange(0, 1000).Draw(rt, "id"))
		j, s := planJob(t, api.Job{ID: id, Schedule: spec, Timezone: zone, Jitter: api.Duration(jitter), MisfirePolicy: api.MisfireRunAll,
			CreatedAt: from.Add(-time.Millisecond)})
		j.UpdatedAt = j.CreatedAt

		// The backfill's runs.
		times, more := s.Between(from, to, 100_000)
		if !more.IsZero() {
			rt.Fatalf("more than 100 000 times in %v", to.Sub(from))
		}
		backfilled := map[string]time.Time{}
		for _, at := range times {
			r := dispatch.NewRun(&j, at, to, "m", 1)
			if r.ID != store.RunID(id, at) || !r.ScheduledAt.Equal(at) {
				rt.Fatalf("backfill of %v: run %s scheduled %v", at, r.ID, r.ScheduledAt)
			}
			backfilled[r.ID] = r.ScheduledAt
		}

		// The fires' runs, by owners handing the job over.
		fired := map[string]time.Time{}
		var st api.JobState
		now := from
		for step := 0; !now.After(to.Add(jitter + time.Second)); step++ {
			now = now.Add(time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(rt, fmt.Sprint("gap", step))))
			plan := planAll(rt, j, st, nil, now, nil, 1<<20)
			if plan.Decision.Dropped > 0 {
				rt.Fatalf("a decision dropped %d times: the comparison needs every time fired", plan.Decision.Dropped)
			}
			for _, r := range plan.Runs {
				if _, twice := fired[r.ID]; twice {
					rt.Fatalf("run %s fired twice", r.ID)
				}
				if r.ScheduledAt.Before(to) {
					fired[r.ID] = r.ScheduledAt
				}
			}
			b, _ := json.Marshal(plan.State) // a handoff: the next owner reads the state
			st = api.JobState{}
			if err := json.Unmarshal(b, &st); err != nil {
				rt.Fatal(err)
			}
		}
		if !maps.EqualFunc(backfilled, fired, time.Time.Equal) {
			b, f := slices.Sorted(maps.Keys(backfilled)), slices.Sorted(maps.Keys(fired))
			rt.Fatalf("backfill of [%v, %v) gives %d runs %v\nthe fires give %d %v", from, to, len(b), b, len(f), f)
		}
	})
}
