package dispatch_test

import (
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// TestEditBeforeAnyOwnerPlannedFiresNoPast: a job changed before any
// owner planned it (created while its partition had no owner, or created
// paused, so that no state was ever written) is planned from the change,
// not from its creation: the owner cannot tell a change of its timing
// from another edit, so it counts every write as one, as for a state of
// before the timing fingerprint. No time of the job from before its last
// write fires, under any misfire policy; a one-off whose run_at is still
// ahead fires at it.
func TestEditBeforeAnyOwnerPlannedFiresNoPast(t *testing.T) {
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	tests := []struct {
		name     string
		job      api.Job // created at t0, as it is after the change
		editedAt time.Duration
		now      time.Duration
		want     string
		wantNext time.Duration // 0: none
	}{
		{name: "schedule changed (run_all)", job: api.Job{Schedule: "*/10 * * * *", MisfirePolicy: api.MisfireRunAll},
			editedAt: 35 * time.Minute, now: 35*time.Minute + time.Second, want: "", wantNext: 40 * time.Minute},
		{name: "schedule changed (run_once), planned late", job: api.Job{Schedule: "*/10 * * * *"},
			editedAt: 35 * time.Minute, now: 45*time.Minute + time.Second, want: "00:40:00", wantNext: 50 * time.Minute},
		{name: "schedule changed (run_all), planned late", job: api.Job{Schedule: "*/10 * * * *", MisfirePolicy: api.MisfireRunAll},
			editedAt: 35 * time.Minute, now: 55*time.Minute + time.Second, want: "00:40:00 00:50:00", wantNext: time.Hour},
		{name: "created paused, resumed by a PUT (run_all)", job: api.Job{Schedule: "*/10 * * * *", MisfirePolicy: api.MisfireRunAll},
			editedAt: 35 * time.Minute, now: 35*time.Minute + time.Second, want: "", wantNext: 40 * time.Minute},
		{name: "run_at moved into the past", job: api.Job{RunAt: at(30 * time.Minute)},
			editedAt: 35 * time.Minute, now: 35*time.Minute + time.Second, want: ""},
		{name: "run_at still ahead", job: api.Job{RunAt: at(2 * time.Hour)},
			editedAt: 35 * time.Minute, now: 2 * time.Hour, want: "02:00:00"},
		{name: "never edited: the misfires since creation are the policy's", job: api.Job{Schedule: "*/10 * * * *", MisfirePolicy: api.MisfireRunAll},
			now: 35*time.Minute + time.Second, want: "00:10:00 00:20:00 00:30:00", wantNext: 40 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.job.ID = "unplanned"
			j, _ := planJob(t, tt.job)
			j.UpdatedAt, j.Revision = t0, 10
			if tt.editedAt != 0 { // the job as it is since: its old definition is nowhere
				j.UpdatedAt, j.Revision = t0.Add(tt.editedAt), 11
			}
			plan := planAll(t, j, api.JobState{}, nil, t0.Add(tt.now), nil, 100)
			if got := runTimes(plan, api.RunPending); got != tt.want {
				t.Errorf("fired %q, want %q", got, tt.want)
			}
			for _, r := range plan.Runs {
				if tt.editedAt != 0 && !r.ScheduledAt.After(t0.Add(tt.editedAt)) {
					t.Errorf("run %s is for a time before the change at %v", r.ID, t0.Add(tt.editedAt))
				}
			}
			var wantNext time.Time
			if tt.wantNext != 0 {
				wantNext = t0.Add(tt.wantNext)
			}
			if !plan.State.Next.Equal(wantNext) {
				t.Errorf("next: got %v, want %v", plan.State.Next, wantNext)
			}
		})
	}
}
