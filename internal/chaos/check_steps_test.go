package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// stepRun returns a final run of steps a → b (b needs a, when), each of
// one item with one attempt, and the executions: a's from 0s to 1s, b's
// from bStart.
func stepRun(when api.StepWhen, aStatus, bStatus api.RunStatus, bStart time.Duration) (api.Run, map[[2]int][]Execution) {
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	one := func(i int) *int { return &i }
	r := api.Run{ID: "j@1", Status: api.RunSucceeded,
		Steps: []api.RunStep{{ID: "a", First: 0, Items: 1, Status: aStatus}, {ID: "b", Needs: []string{"a"}, When: when, First: 1, Items: 1, Status: bStatus}},
		Items: []api.Item{
			{Index: 0, Status: aStatus, Attempts: []api.Attempt{{Attempt: 1}}},
			{Index: 1, Status: bStatus, Attempts: []api.Attempt{{Attempt: 1}}},
		}}
	if aStatus == api.RunDead || bStatus == api.RunDead {
		r.Status = api.RunDead
	}
	aCode := 200
	if aStatus != api.RunSucceeded {
		aCode = 500
	}
	ex := map[[2]int][]Execution{
		{0, 1}: {{Item: one(0), Step: "a", Start: t0, End: t0.Add(time.Second), Status: aCode}},
		{1, 1}: {{Item: one(1), Step: "b", Start: t0.Add(bStart), End: t0.Add(bStart + time.Second), Status: 200}},
	}
	return r, ex
}

func TestCheckStepsCatches(t *testing.T) {
	tests := []struct {
		name      string
		run       func() (api.Run, map[[2]int][]Execution)
		wantEarly string
		wantLost  string
	}{
		{"in order", func() (api.Run, map[[2]int][]Execution) {
			return stepRun("", api.RunSucceeded, api.RunSucceeded, 2*time.Second)
		}, "", ""},
		{"started before its need succeeded", func() (api.Run, map[[2]int][]Execution) {
			return stepRun("", api.RunSucceeded, api.RunSucceeded, 500*time.Millisecond)
		}, "before item 0 of step a", ""},
		{"success step ran after a dead need", func() (api.Run, map[[2]int][]Execution) {
			return stepRun("", api.RunDead, api.RunSucceeded, 2*time.Second)
		}, "though step a it needs is dead", ""},
		{"failure step ran though all succeeded", func() (api.Run, map[[2]int][]Execution) {
			return stepRun(api.StepOnFailure, api.RunSucceeded, api.RunSucceeded, 2*time.Second)
		}, "every step it needs succeeded", ""},
		{"always step after a dead need", func() (api.Run, map[[2]int][]Execution) {
			return stepRun(api.StepAlways, api.RunDead, api.RunSucceeded, 2*time.Second)
		}, "", ""},
		{"step left pending in a final run", func() (api.Run, map[[2]int][]Execution) {
			r, ex := stepRun("", api.RunSucceeded, api.RunSucceeded, 2*time.Second)
			r.Steps[1].Status, r.Items[1].Status = api.RunPending, api.RunPending
			return r, ex
		}, "", "item 1 still pending"},
		{"step succeeded without its item", func() (api.Run, map[[2]int][]Execution) {
			r, ex := stepRun("", api.RunSucceeded, api.RunSucceeded, 2*time.Second)
			r.Items[1].Status = api.RunSkipped
			return r, ex
		}, "", "succeeded with 0 of 1"},
		{"run status against its steps", func() (api.Run, map[[2]int][]Execution) {
			r, ex := stepRun(api.StepAlways, api.RunDead, api.RunSucceeded, 2*time.Second)
			r.Status = api.RunSucceeded
			return r, ex
		}, "", "its steps make it dead"},
		{"cancelled run may leave steps", func() (api.Run, map[[2]int][]Execution) {
			r, ex := stepRun("", api.RunSucceeded, api.RunSucceeded, 2*time.Second)
			r.Status, r.Steps[1].Status, r.Items[1].Status = api.RunCancelled, api.RunPending, api.RunRunning
			return r, ex
		}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ex := tt.run()
			early, lost, n := checkSteps(r, func(i, a int) []Execution { return ex[[2]int{i, a}] }, false)
			check := func(what string, got []string, want string) {
				t.Helper()
				switch {
				case want == "" && len(got) > 0:
					t.Errorf("%s: %q, want none", what, got)
				case want != "" && (len(got) == 0 || !strings.Contains(strings.Join(got, "|"), want)):
					t.Errorf("%s: %q, want one containing %q", what, got, want)
				}
			}
			check("early", early, tt.wantEarly)
			check("lost", lost, tt.wantLost)
			if n != 2 {
				t.Errorf("checked %d executions, want 2", n)
			}
		})
	}
}
