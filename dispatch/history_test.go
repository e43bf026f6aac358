package dispatch

import (
	"fmt"
	"slices"
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
		{"budget takes the job storing the most first, its oldest first", map[string]retention{"a": loose, "b": loose}, 20 * time.Second, 500,
			[]string{"a@0:budget", "a@1:budget", "a@2:budget"}},
		{"budget never takes the active run", map[string]retention{"a": loose, "b": loose}, 20 * time.Second, 50,
			[]string{"a@0:budget", "a@1:budget", "a@2:budget", "b@10:budget", "a@3:budget", "b@11:budget", "b@12:budget"}},
		{"budget never takes the floor", map[string]retention{"a": {maxRuns: 100, floor: 2}, "b": {maxRuns: 100, floor: 1}}, 20 * time.Second, 50,
			[]string{"a@0:budget", "a@1:budget", "b@10:budget", "b@11:budget"}},
		{"count first, then budget", map[string]retention{"a": loose, "b": {maxRuns: 1}}, 20 * time.Second, 500,
			[]string{"b@10:max_runs", "b@11:max_runs", "a@0:budget"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := build(func(id string) retention { return tt.rule[id] })
			plan := h.planTrim(h0.Add(tt.now), tt.budget, 100, nil, nil)
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
	adding := build(func(string) retention { return loose }).planTrim(h0.Add(20*time.Second), 1<<20, 100, map[string]int{"b": 98}, nil)
	if len(adding) != 1 || adding[0].job != "b" || adding[0].reason != trimMaxRuns {
		t.Fatalf("plan with 98 runs of b being added = %+v, want b's oldest for max_runs", adding)
	}
	if got := build(func(string) retention { return loose }).planTrim(h0.Add(20*time.Second), 800, 100, nil, map[string]int64{"b": 100}); len(got) != 1 || got[0].reason != trimBudget {
		t.Fatalf("plan with 100 bytes being added over a budget of 800 = %+v, want one run for the budget", got)
	}
	// Bytes being added count as their job's: b, adding 300, stores the
	// most.
	if got := build(func(string) retention { return loose }).planTrim(h0.Add(20*time.Second), 1000, 100, nil, map[string]int64{"b": 300}); len(got) != 1 || got[0].job != "b" {
		t.Fatalf("plan with 300 bytes of b being added over a budget of 1000 = %+v, want b's oldest", got)
	}
	// limit bounds a plan.
	if got := build(func(string) retention { return retention{maxRuns: 1} }).planTrim(h0, 0, 2, nil, nil); len(got) != 2 {
		t.Fatalf("plan with limit 2 has %d runs", len(got))
	}
}

// TestPlanTrimIsolatesJobs: a job with large runs is trimmed by the
// budget before a neighbour with small ones is touched, and only down to
// its floor; when the floors alone exceed the budget, the neighbour keeps
// its floor and its newest dead run however old.
func TestPlanTrimIsolatesJobs(t *testing.T) {
	h := newHistory(func(string) retention { return retention{maxRuns: 100, floor: 3} })
	for i := range 10 {
		h.created("big", h0.Add(time.Duration(i)*time.Second), 10_000, true)
	}
	for i := range 50 {
		at := h0.Add(time.Duration(100+i) * time.Second)
		h.created("small", at, 100, true)
		if i == 10 {
			h.markDead("small", at)
		}
	}
	kept := func(plan []trim, job string, from, to int) []int {
		gone := map[int]bool{}
		for _, tr := range plan {
			if tr.reason != trimBudget {
				t.Fatalf("trim %+v, want only the budget's", tr)
			}
			if tr.job == job {
				gone[int(tr.at.Sub(h0).Seconds())] = true
			}
		}
		var out []int
		for s := from; s < to; s++ {
			if !gone[s] {
				out = append(out, s)
			}
		}
		return out
	}
	plan := h.planTrim(h0.Add(time.Hour), 60_000, 100, nil, nil)
	if got := kept(plan, "big", 0, 10); fmt.Sprint(got) != "[5 6 7 8 9]" {
		t.Errorf("over a budget of 60000 big keeps %v, want its newest five [5 6 7 8 9]", got)
	}
	if got := kept(plan, "small", 100, 150); len(got) != 50 {
		t.Errorf("over a budget of 60000 small keeps %d of its 50 runs, want all", len(got))
	}
	plan = h.planTrim(h0.Add(time.Hour), 20_000, 100, nil, nil)
	if got := kept(plan, "big", 0, 10); fmt.Sprint(got) != "[7 8 9]" {
		t.Errorf("over a budget of 20000 big keeps %v, want its floor [7 8 9]", got)
	}
	if got := kept(plan, "small", 100, 150); fmt.Sprint(got) != "[110 147 148 149]" {
		t.Errorf("over a budget of 20000 small keeps %v, want its floor and its dead run [110 147 148 149]", got)
	}
}

// TestHistoryTrimBounds applies random sequences of created, finished
// (some dead) and trimmed runs to a history and checks that its
// accounting matches the runs it holds, and that applying planTrim never
// deletes an active run or, for the budget, a run of a job's floor (its
// newest floor final runs and its newest dead run); leaves every job
// within its count and age, and the partition within its budget unless
// only active runs and floors are left; trims each job's runs oldest
// first; and takes a job's runs for the budget only while it stores the
// most beyond its floor: after a plan, no job with runs the budget could
// still take stores more beyond its floor than a job the budget trimmed
// did before its last trim.
func TestHistoryTrimBounds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		rules := map[string]retention{}
		h := newHistory(func(id string) retention { return rules[id] })
		jobs := []string{"a", "b", "c"}
		type key struct {
			job string
			at  time.Time
		}
		type run struct {
			size int
			dead bool
		}
		active := map[key]int{} // size
		final := map[key]run{}
		for _, j := range jobs {
			r := retention{maxRuns: rapid.IntRange(1, 30).Draw(rt, "max_runs"), maxAge: time.Duration(rapid.IntRange(0, 60).Draw(rt, "max_age_s")) * time.Second}
			r.floor = rapid.IntRange(0, r.maxRuns).Draw(rt, "floor")
			rules[j] = r
		}
		budget := int64(rapid.IntRange(0, 3000).Draw(rt, "budget"))
		// floorOf returns job j's floor: its newest floor final runs and
		// its newest dead run.
		floorOf := func(j string) map[key]bool {
			var ks []key
			for k := range final {
				if k.job == j {
					ks = append(ks, k)
				}
			}
			slices.SortFunc(ks, func(a, b key) int { return b.at.Compare(a.at) }) // newest first
			fl := map[key]bool{}
			for i, k := range ks {
				if i < rules[j].floor {
					fl[k] = true
				}
			}
			for _, k := range ks {
				if final[k].dead {
					fl[k] = true
					break
				}
			}
			return fl
		}
		// above returns the bytes job j stores beyond its floor fl.
		above := func(j string, fl map[key]bool) int64 {
			var n int64
			for k, s := range active {
				if k.job == j {
					n += int64(s)
				}
			}
			for k, r := range final {
				if k.job == j && !fl[k] {
					n += int64(r.size)
				}
			}
			return n
		}
		now := h0
		for range rapid.IntRange(1, 120).Draw(rt, "steps") {
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
					final[k] = run{size: size}
				} else {
					active[k] = size
				}
			case 2: // an active run is rewritten, maybe final, maybe dead
				for k, old := range active {
					size := rapid.IntRange(50, 300).Draw(rt, "new_size")
					fin := rapid.Bool().Draw(rt, "finishes")
					h.rewritten(k.job, k.at, old, size, fin)
					if fin {
						delete(active, k)
						dead := rapid.Bool().Draw(rt, "dies")
						if dead {
							h.markDead(k.job, k.at)
						}
						final[k] = run{size: size, dead: dead}
					} else {
						active[k] = size
					}
					break
				}
			case 3: // trim
				floors := map[string]map[key]bool{}
				for _, j := range jobs {
					floors[j] = floorOf(j)
				}
				plan := h.planTrim(now, budget, 1000, nil, nil)
				lastBudget := map[string]time.Time{} // per job: its newest run the budget trimmed
				lastSize := map[string]int64{}
				for _, tr := range plan {
					k := key{tr.job, tr.at}
					if _, ok := active[k]; ok {
						rt.Fatalf("planned to trim active run %v", k)
					}
					r, ok := final[k]
					if !ok {
						rt.Fatalf("planned to trim unknown run %v", k)
					}
					if tr.reason == trimBudget {
						if floors[k.job][k] {
							rt.Fatalf("the budget trimmed %v of its job's floor", k)
						}
						lastBudget[k.job], lastSize[k.job] = tr.at, int64(r.size)
					}
					h.removed(tr.job, tr.at)
					delete(final, k)
				}
				var bytes int64
				for _, s := range active {
					bytes += int64(s)
				}
				takeable := map[string]bool{} // jobs with final runs the budget could still take
				for k, r := range final {
					bytes += int64(r.size)
					if !floors[k.job][k] {
						takeable[k.job] = true
					}
				}
				if bytes > budget && len(takeable) > 0 {
					rt.Fatalf("%d bytes left over a budget of %d with runs beyond the floors of %v", bytes, budget, takeable)
				}
				for k := range final {
					if last, ok := lastBudget[k.job]; ok && k.at.Before(last) && !floors[k.job][k] {
						rt.Fatalf("budget trimmed %s's run at %v but kept an older one %v", k.job, last, k)
					}
					r := rules[k.job]
					if r.maxAge > 0 && now.Sub(k.at) > r.maxAge {
						rt.Fatalf("run %v kept past its max age %v", k, r.maxAge)
					}
				}
				for j := range lastBudget {
					for k := range takeable {
						if got, limit := above(k, floors[k]), above(j, floors[j])+lastSize[j]; got > limit {
							rt.Fatalf("the budget trimmed %s (storing %d beyond its floor before its last trim) but left %s storing %d beyond its floor",
								j, limit, k, got)
						}
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
			for _, r := range final {
				runs++
				bytes += int64(r.size)
			}
			if h.runs != runs || h.bytes != bytes {
				rt.Fatalf("history counts %d runs, %d bytes; holds %d, %d", h.runs, h.bytes, runs, bytes)
			}
		}
	})
}

func TestRunIsDead(t *testing.T) {
	for _, tt := range []struct {
		doc  string
		want bool
	}{
		{`{"run_id":"a@t","job_id":"a","partition":0,"scheduled_at":"t","fired_at":"t","status":"dead","attempts":[]}`, true},
		{`{"run_id":"a@t","status":"succeeded","attempts":[{"output":"\"status\":\"dead\""}]}`, false},
		{`{"attempts":[{"status":"dead"}],"status":"failed"}`, false},
		{`not json`, false},
	} {
		if got := runIsDead([]byte(tt.doc)); got != tt.want {
			t.Errorf("runIsDead(%s) = %v, want %v", tt.doc, got, tt.want)
		}
	}
}
