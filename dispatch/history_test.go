package dispatch

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var h0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

func TestPlanTrim(t *testing.T) {
	// Job a: 4 final runs at 0..3s, an active one at 4s. Job b: 3 final
	// runs at 10..12s. 100 bytes each.
	build := func(rule func(string) retention) *history {
		h := newHistory(rule)
		for i := range 4 {
			h.created("a", h0.Add(time.Duration(i)*time.Second), 100, true)
		}
		h.created("a", h0.Add(4*time.Second), 100, false)
		for i := range 3 {
			h.created("b", h0.Add(time.Duration(10+i)*time.Second), 100, true)
		}
		return h
	}
	loose := retention{maxRuns: 100}
	tests := []struct {
		name   string
		rule   map[string]retention
		now    time.Duration
		budget int64
		want   []string // job@second:reason
	}{
		{"nothing to do", map[string]retention{"a": loose, "b": loose}, 20 * time.Second, 1 << 20, nil},
		{"max runs counts the active run and spares it", map[string]retention{"a": {maxRuns: 2}, "b": loose}, 20 * time.Second, 1 << 20,
			[]string{"a@0:max_runs", "a@1:max_runs", "a@2:max_runs"}},
		{"max runs below the active runs trims every final run", map[string]retention{"a": {maxRuns: 1}, "b": loose}, 20 * time.Second, 1 << 20,
			[]string{"a@0:max_runs", "a@1:max_runs", "a@2:max_runs", "a@3:max_runs"}},
		{"max age", map[string]retention{"a": {maxRuns: 100, maxAge: 18 * time.Second}, "b": {maxRuns: 100, maxAge: 9 * time.Second}}, 20 * time.Second, 1 << 20,
			[]string{"a@0:max_age", "a@1:max_age", "b@10:max_age"}},
		{"budget takes the oldest across jobs", map[string]retention{"a": loose, "b": loose}, 20 * time.Second, 500,
			[]string{"a@0:budget", "a@1:budget", "a@2:budget"}},
		{"budget never takes the active run", map[string]retention{"a": loose, "b": loose}, 20 * time.Second, 50,
			[]string{"a@0:budget", "a@1:budget", "a@2:budget", "a@3:budget", "b@10:budget", "b@11:budget", "b@12:budget"}},
		{"count first, then budget", map[string]retention{"a": loose, "b": {maxRuns: 1}}, 20 * time.Second, 500,
			[]string{"b@10:max_runs", "b@11:max_runs", "a@0:budget"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := build(func(id string) retention { return tt.rule[id] })
			plan := h.planTrim(h0.Add(tt.now), tt.budget, 100, nil, 0)
			var got []string
			for _, tr := range plan {
				got = append(got, fmt.Sprintf("%s@%d:%s", tr.job, int(tr.at.Sub(h0).Seconds()), tr.reason))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("plan = %v, want %v", got, tt.want)
			}
		})
	}
	// Runs a write is about to create count toward max_runs and the budget.
	adding := build(func(string) retention { return loose }).planTrim(h0.Add(20*time.Second), 1<<20, 100, map[string]int{"b": 98}, 0)
	if len(adding) != 1 || adding[0].job != "b" || adding[0].reason != trimMaxRuns {
		t.Fatalf("plan with 98 runs of b being added = %+v, want b's oldest for max_runs", adding)
	}
	if got := build(func(string) retention { return loose }).planTrim(h0.Add(20*time.Second), 800, 100, nil, 100); len(got) != 1 || got[0].reason != trimBudget {
		t.Fatalf("plan with 100 bytes being added over a budget of 800 = %+v, want one run for the budget", got)
	}
	// limit bounds a plan.
	if got := build(func(string) retention { return retention{maxRuns: 1} }).planTrim(h0, 0, 2, nil, 0); len(got) != 2 {
		t.Fatalf("plan with limit 2 has %d runs", len(got))
	}
}

// TestHistoryTrimBounds applies random sequences of created, finished and
// trimmed runs to a history and checks that its accounting matches the
// runs it holds, and that applying planTrim never deletes an active run
// and leaves every job within its count and age, and the partition within
// its budget unless only active runs are left, the budget having taken
// the oldest final runs first.
func TestHistoryTrimBounds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		rules := map[string]retention{}
		h := newHistory(func(id string) retention { return rules[id] })
		jobs := []string{"a", "b", "c"}
		type key struct {
			job string
			at  time.Time
		}
		active := map[key]int{} // size
		final := map[key]int{}
		for _, j := range jobs {
			rules[j] = retention{maxRuns: rapid.IntRange(1, 10).Draw(rt, "max_runs"), maxAge: time.Duration(rapid.IntRange(0, 60).Draw(rt, "max_age_s")) * time.Second}
		}
		budget := int64(rapid.IntRange(0, 3000).Draw(rt, "budget"))
		now := h0
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 2000).Draw(rt, "gap_ms")) * time.Millisecond)
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0, 1: // a new run
				k := key{rapid.SampledFrom(jobs).Draw(rt, "job"), now}
				if _, ok := active[k]; ok {
					continue
				}
				if _, ok := final[k]; ok {
					continue
				}
				size := rapid.IntRange(50, 300).Draw(rt, "size")
				isFinal := rapid.Bool().Draw(rt, "final")
				h.created(k.job, k.at, size, isFinal)
				if isFinal {
					final[k] = size
				} else {
					active[k] = size
				}
			case 2: // an active run is rewritten, maybe final
				for k, old := range active {
					size := rapid.IntRange(50, 300).Draw(rt, "new_size")
					fin := rapid.Bool().Draw(rt, "finishes")
					h.rewritten(k.job, k.at, old, size, fin)
					if fin {
						delete(active, k)
						final[k] = size
					} else {
						active[k] = size
					}
					break
				}
			case 3: // trim
				plan := h.planTrim(now, budget, 1000, nil, 0)
				var lastBudget time.Time
				for _, tr := range plan {
					k := key{tr.job, tr.at}
					if _, ok := active[k]; ok {
						rt.Fatalf("planned to trim active run %v", k)
					}
					if _, ok := final[k]; !ok {
						rt.Fatalf("planned to trim unknown run %v", k)
					}
					if tr.reason == trimBudget {
						lastBudget = tr.at
					}
					h.removed(tr.job, tr.at)
					delete(final, k)
				}
				var bytes int64
				for _, s := range active {
					bytes += int64(s)
				}
				for _, s := range final {
					bytes += int64(s)
				}
				if bytes > budget && len(final) > 0 {
					rt.Fatalf("%d bytes left over a budget of %d with %d final runs", bytes, budget, len(final))
				}
				for k := range final {
					if !lastBudget.IsZero() && k.at.Before(lastBudget) {
						rt.Fatalf("budget trimmed a run at %v but kept an older one %v", lastBudget, k)
					}
					r := rules[k.job]
					if r.maxAge > 0 && now.Sub(k.at) > r.maxAge {
						rt.Fatalf("run %v kept past its max age %v", k, r.maxAge)
					}
				}
				for _, j := range jobs {
					runs, finals := 0, 0
					for k := range active {
						if k.job == j {
							runs++
						}
					}
					for k := range final {
						if k.job == j {
							runs++
							finals++
						}
					}
					if runs > rules[j].maxRuns && finals > 0 {
						rt.Fatalf("job %s keeps %d runs (%d final), max %d", j, runs, finals, rules[j].maxRuns)
					}
				}
			}
			// The accounting matches what it holds.
			var runs int
			var bytes int64
			for _, s := range active {
				runs++
				bytes += int64(s)
			}
			for _, s := range final {
				runs++
				bytes += int64(s)
			}
			if h.runs != runs || h.bytes != bytes {
				rt.Fatalf("history counts %d runs, %d bytes; holds %d, %d", h.runs, h.bytes, runs, bytes)
			}
		}
	})
}
