package api

import (
	"testing"
	"time"
)

func TestValidatePriority(t *testing.T) {
	p := func(n int) *int { return &n }
	for _, tt := range []struct {
		name      string
		job, step *int
		wantField string // "" means valid
		withSteps bool
	}{
		{name: "default"},
		{name: "lowest", job: p(0)},
		{name: "highest", job: p(9)},
		{name: "below", job: p(-1), wantField: "priority"},
		{name: "above", job: p(10), wantField: "priority"},
		{name: "step", step: p(9), withSteps: true},
		{name: "step above", step: p(10), withSteps: true, wantField: "steps[0].priority"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := validJob()
			j.Priority = tt.job
			if tt.withSteps {
				j.Steps = []Step{{ID: "a", Executor: j.Executor, Priority: tt.step}}
				j.Executor = Executor{}
			}
			checkFieldError(t, j.Validate(Limits{}), tt.wantField, "want 0 to 9")
		})
	}
}

func TestStepInheritsThePriority(t *testing.T) {
	nine, two := 9, 2
	j := Job{Priority: &nine, Steps: []Step{{ID: "a"}, {ID: "b", Priority: &two}}}
	if got := PriorityOf(j.StepJob(&j.Steps[0]).Priority); got != 9 {
		t.Fatalf("step without a priority: %d, want the job's 9", got)
	}
	if got := PriorityOf(j.StepJob(&j.Steps[1]).Priority); got != 2 {
		t.Fatalf("step with priority 2: %d", got)
	}
	if got := PriorityOf(nil); got != DefaultPriority {
		t.Fatalf("no priority: %d, want %d", got, DefaultPriority)
	}
}

func TestEffectivePriority(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	aging := 10 * time.Second
	for _, tt := range []struct {
		p      int
		waited time.Duration
		aging  time.Duration
		want   int
	}{
		{p: 5, want: 5, aging: aging},
		{p: 5, waited: 9999 * time.Millisecond, aging: aging, want: 5},
		{p: 5, waited: 10 * time.Second, aging: aging, want: 6},
		{p: 0, waited: 100 * time.Second, aging: aging, want: 10},
		{p: 0, waited: time.Hour, aging: -1, want: 0},
		{p: 3, waited: -time.Second, aging: aging, want: 3},
		{p: 0, waited: 1 << 62, aging: 1, want: 1<<31 - 1},
	} {
		if got := EffectivePriority(tt.p, t0, t0.Add(tt.waited), tt.aging); got != tt.want {
			t.Errorf("EffectivePriority(%d, waited %v, aging %v) = %d, want %d", tt.p, tt.waited, tt.aging, got, tt.want)
		}
	}
	// Ten agings more of waiting beat any difference of priority.
	old := EffectivePriority(MinPriority, t0, t0.Add(25*aging+time.Second), aging)
	fresh := EffectivePriority(MaxPriority, t0.Add(10*aging+time.Second), t0.Add(25*aging+time.Second), aging)
	if old <= fresh {
		t.Fatalf("waited ten agings longer at priority 0: %d, fresh at 9: %d; want the older ahead", old, fresh)
	}
}
