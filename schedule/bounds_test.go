package schedule

import (
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestWithin(t *testing.T) {
	hourly := mustParse(t, "@hourly", "")
	every := mustParse(t, "@every 30m", "")
	from, to := utc("2026-05-01T10:00:00Z"), utc("2026-05-01T12:00:00Z")
	tests := []struct {
		name  string
		s     Schedule
		after time.Time
		want  time.Time
	}{
		{name: "before the window: its first instant", s: hourly.Within(from, to), after: utc("2026-05-01T07:10:00Z"), want: from},
		{name: "the lower bound is an instant", s: hourly.Within(from, to), after: from.Add(-time.Nanosecond), want: from},
		{name: "inside", s: hourly.Within(from, to), after: from, want: utc("2026-05-01T11:00:00Z")},
		{name: "the upper bound is an instant", s: hourly.Within(from, to), after: utc("2026-05-01T11:30:00Z"), want: to},
		{name: "past the window: none", s: hourly.Within(from, to), after: to, want: time.Time{}},
		{name: "only a lower bound", s: hourly.Within(from, time.Time{}), after: to, want: utc("2026-05-01T13:00:00Z")},
		{name: "only an upper bound", s: every.Within(time.Time{}, to), after: utc("2026-05-01T11:59:00Z"), want: to},
		{name: "a bound between instants", s: every.Within(utc("2026-05-01T10:10:00Z"), utc("2026-05-01T10:50:00Z")), after: from, want: utc("2026-05-01T10:30:00Z")},
		{name: "a one-off outside its window", s: Once(from).Within(to, time.Time{}), after: from.Add(-time.Hour), want: time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Next(tt.after); !got.Equal(tt.want) {
				t.Errorf("Next(%v): got %v, want %v", tt.after, got, tt.want)
			}
		})
	}
}

func TestDueWithin(t *testing.T) {
	from, to := utc("2026-05-01T10:00:00Z"), utc("2026-05-01T12:00:00Z")
	s := mustParse(t, "@hourly", "").Within(from, to)
	tests := []struct {
		name      string
		last, now time.Time
		p         Policy
		want      Decision
	}{
		{name: "no time before the window is due", last: utc("2026-05-01T07:00:00Z"), now: utc("2026-05-01T09:59:59Z"),
			want: Decision{Last: utc("2026-05-01T07:00:00Z"), Next: from}},
		{name: "missed times inside the window only", last: utc("2026-05-01T07:00:00Z"), now: utc("2026-05-01T11:30:00Z"), p: Policy{Misfire: RunAll},
			want: Decision{Fires: []time.Time{from, utc("2026-05-01T11:00:00Z")}, Last: utc("2026-05-01T11:00:00Z"), Next: to, Missed: 2}},
		{name: "the last time fires; then none", last: utc("2026-05-01T11:00:00Z"), now: to.Add(time.Second),
			want: Decision{Fires: []time.Time{to}, Last: to}},
		{name: "after the window nothing is due, ever", last: to, now: utc("2026-05-09T00:00:00Z"),
			want: Decision{Last: to}},
		{name: "missed past the window's end", last: utc("2026-05-01T07:00:00Z"), now: utc("2026-05-02T00:00:00Z"), p: Policy{Misfire: Skip},
			want: Decision{Last: to, Missed: 3, Skipped: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Due(s, tt.last, tt.now, tt.p)
			if err != nil {
				t.Fatalf("Due: %v", err)
			}
			checkDecision(t, got, tt.want)
		})
	}
}

func TestOffset(t *testing.T) {
	hourly := mustParse(t, "@hourly", "")
	everyMinute := mustParse(t, "@every 1m", "")
	at := utc("2026-05-01T10:00:00Z")
	tests := []struct {
		name string
		s    Schedule
		max  time.Duration // want the offset in [0, max)
	}{
		{name: "within the jitter", s: hourly.WithJitter(5*time.Minute, "a"), max: 5 * time.Minute},
		{name: "capped by the next instant", s: everyMinute.WithJitter(time.Hour, "a"), max: time.Minute},
		{name: "a one-off: the jitter alone", s: Once(at).WithJitter(10*time.Second, "a"), max: 10 * time.Second},
		{name: "a jitter below a millisecond: none", s: hourly.WithJitter(time.Microsecond, "a"), max: time.Nanosecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 1000 {
				ti := at.Add(time.Duration(i) * time.Hour)
				if tt.s.kind == kindOnce {
					ti = at
				}
				off := tt.s.Offset(ti)
				if off < 0 || off >= tt.max {
					t.Fatalf("Offset(%v): got %v, want in [0, %v)", ti, off, tt.max)
				}
				if off%time.Millisecond != 0 {
					t.Fatalf("Offset(%v): got %v, want whole milliseconds", ti, off)
				}
				if got := tt.s.FireTime(ti); !got.Equal(ti.Add(off)) {
					t.Fatalf("FireTime(%v): got %v, want %v", ti, got, ti.Add(off))
				}
			}
		})
	}
	t.Run("none without jitter", func(t *testing.T) {
		if off := hourly.Offset(at); off != 0 {
			t.Errorf("Offset: got %v, want 0", off)
		}
		if off := hourly.WithJitter(time.Minute, "a").WithJitter(0, "a").Offset(at); off != 0 {
			t.Errorf("Offset after WithJitter(0): got %v, want 0", off)
		}
	})
	t.Run("a function of key and instant", func(t *testing.T) {
		a, b := hourly.WithJitter(time.Hour, "job-a"), hourly.WithJitter(time.Hour, "job-b")
		same, differ := 0, 0
		for i := range 200 {
			ti := at.Add(time.Duration(i) * time.Hour)
			if a.Offset(ti) != hourly.WithJitter(time.Hour, "job-a").Offset(ti) {
				t.Fatalf("Offset(%v) of job-a: two schedules of the same key disagree", ti)
			}
			if a.Offset(ti) == b.Offset(ti) {
				same++
			}
			if a.Offset(ti) != a.Offset(ti.Add(time.Hour)) {
				differ++
			}
		}
		if same > 2 || differ < 190 {
			t.Errorf("offsets of two keys equal at %d of 200 instants, of one key equal to the next instant's at %d: want them drawn afresh", same, 200-differ)
		}
	})
	t.Run("the window does not change offsets", func(t *testing.T) {
		j := hourly.WithJitter(30*time.Minute, "k")
		w := j.Within(at.Add(-time.Hour), at)
		if j.Offset(at) != w.Offset(at) {
			t.Errorf("Offset at the window's last instant: got %v, want %v as without the window", w.Offset(at), j.Offset(at))
		}
	})
}

// TestJitterProperties drives Due as a partition's owner does, waking at
// each decision's next fire time (or at random times), with handoffs that
// start over from the recorded Last, and checks that jitter never fires a
// time the schedule does not have (a run ID no fire could have given),
// never fires a time before its fire time or outside [t, t+jitter), and
// fires every time of the window exactly once when the owner is never
// late.
func TestJitterProperties(t *testing.T) {
	specs := []string{"* * * * *", "*/7 * * * *", "@hourly", "30 2 * * *", "*/15 * * * * *", "@every 90s", "@every 1s"}
	zones := []string{"UTC", "America/New_York", "Test/Shift"}
	base := utc("2030-01-01T00:00:00Z")
	rapid.Check(t, func(rt *rapid.T) {
		plain := mustParse(rt, rapid.SampledFrom(specs).Draw(rt, "spec"), rapid.SampledFrom(zones).Draw(rt, "zone"))
		jitter := time.Duration(rapid.Int64Range(1, 3*3600*1e9).Draw(rt, "jitter"))
		key := rapid.StringN(1, 16, -1).Draw(rt, "key")
		s := plain.WithJitter(jitter, key)
		start := base.Add(time.Duration(rapid.Int64Range(0, 365*24*3600*1e9).Draw(rt, "start")))
		var from, to time.Time
		if rapid.Bool().Draw(rt, "windowed") {
			from = start.Add(time.Duration(rapid.Int64Range(-3600*1e9, 6*3600*1e9).Draw(rt, "not_before")))
			to = from.Add(time.Duration(rapid.Int64Range(0, 6*3600*1e9).Draw(rt, "window")))
			s = s.Within(from, to)
		}
		grace := time.Duration(rapid.Int64Range(1e9, 60e9).Draw(rt, "grace"))
		p := Policy{Misfire: RunAll, Grace: grace, MaxFires: 1000}
		punctual := rapid.Bool().Draw(rt, "punctual")

		last, now := start, start
		fired := map[int64]bool{}
		for step := range 60 {
			if punctual {
				d, _ := Due(s, last, now, p)
				if d.Next.IsZero() {
					break
				}
				now = s.FireTime(d.Next)
			} else {
				now = now.Add(time.Duration(rapid.Int64Range(0, 2*3600*1e9).Draw(rt, fmt.Sprint("wait", step))))
			}
			if rapid.IntRange(0, 9).Draw(rt, fmt.Sprint("handoff", step)) == 0 {
				s = plain.WithJitter(jitter, key).Within(from, to) // a new owner builds the schedule afresh
			}
			d, err := Due(s, last, now, p)
			if err != nil {
				rt.Fatalf("Due: %v", err)
			}
			for _, f := range d.Fires {
				if got := plain.Next(f.Add(-time.Nanosecond)); !got.Equal(f) {
					rt.Fatalf("fired %v, which is not a time of %v (its time there is %v): a run ID no fire could have given", f, plain, got)
				}
				if (!from.IsZero() && f.Before(from)) || (!to.IsZero() && f.After(to)) {
					rt.Fatalf("fired %v outside the window [%v, %v]", f, from, to)
				}
				ft := s.FireTime(f)
				if ft.Before(f) || !ft.Before(f.Add(jitter)) {
					rt.Fatalf("fire time %v of %v: want in [t, t+%v)", ft, f, jitter)
				}
				if ft.After(now) {
					rt.Fatalf("fired %v at %v, before its fire time %v", f, now, ft)
				}
				if fired[f.UnixNano()] {
					rt.Fatalf("fired %v twice", f)
				}
				fired[f.UnixNano()] = true
				if punctual && d.Missed > 0 {
					rt.Fatalf("a punctual owner missed %d times at %v", d.Missed, now)
				}
			}
			last = d.Last
		}
		if !punctual {
			return
		}
		for ti := s.Next(start); !ti.IsZero() && !ti.After(last); ti = s.Next(ti) {
			if !fired[ti.UnixNano()] {
				rt.Fatalf("time %v was never fired by a punctual owner", ti)
			}
		}
	})
}

// TestJitterSpread measures how a fleet of 100 000 @hourly jobs with a
// 5m jitter spreads its fires over the window (offsets are a function of
// the job ID and the instant alone, so this is exactly what a fleet
// does): per 10-second bucket of the window the counts stay within 5 %
// of the mean (a uniform draw's standard deviation here is about 1.7 %),
// and no second holds more than twice its share, where without jitter
// every fire falls in second 0.
func TestJitterSpread(t *testing.T) {
	const (
		jobs   = 100_000
		jitter = 5 * time.Minute
		bucket = 10 * time.Second
	)
	hourly := mustParse(t, "@hourly", "")
	at := utc("2026-05-01T10:00:00Z")
	buckets := make([]int, jitter/bucket)
	seconds := make([]int, jitter/time.Second)
	for i := range jobs {
		off := hourly.WithJitter(jitter, fmt.Sprintf("team-%d/report-%d", i%97, i)).Offset(at)
		buckets[off/bucket]++
		seconds[off/time.Second]++
	}
	mean := float64(jobs) / float64(len(buckets))
	lo, hi := math.MaxInt, 0
	for _, n := range buckets {
		lo, hi = min(lo, n), max(hi, n)
	}
	peak := 0
	for _, n := range seconds {
		peak = max(peak, n)
	}
	t.Logf("%d @hourly jobs, jitter %v: per %v bucket min %d, max %d, mean %.0f; busiest second %d fires (mean %.0f; without jitter %d in one second)",
		jobs, jitter, bucket, lo, hi, mean, peak, float64(jobs)/float64(len(seconds)), jobs)
	if float64(lo) < 0.95*mean || float64(hi) > 1.05*mean {
		t.Errorf("buckets from %d to %d: want within 5%% of the mean %.0f", lo, hi, mean)
	}
	if share := float64(jobs) / float64(len(seconds)); float64(peak) > 2*share {
		t.Errorf("busiest second: got %d fires, want at most twice the mean %.0f", peak, share)
	}
}

func BenchmarkOffset(b *testing.B) {
	s := mustParse(b, "@hourly", "").WithJitter(5*time.Minute, "team/report")
	at := utc("2026-05-01T10:00:00Z")
	for i := 0; b.Loop(); i++ {
		s.Offset(at.Add(time.Duration(i) * time.Hour))
	}
}
