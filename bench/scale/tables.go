package scale

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
)

// Figure is one quantity measured at every point, charted against N.
type Figure struct {
	// Name is the file name stem of its chart (scale_<Name>.png) and its
	// column in scale_figures.csv.
	Name string
	// Title says what it is, with its unit.
	Title string
	// Unit is the y axis label.
	Unit string
	// Get reads it from a point; 0 is "not measured".
	Get func(*Point) float64
}

func secs(d time.Duration) float64 { return d.Seconds() }
func ms(d time.Duration) float64   { return bench.Ms(d) }

// Figures are the quantities charted, in the order of the report.
var Figures = []Figure{
	{"create_rate", "jobs created per second", "jobs/s", func(p *Point) float64 { return p.Create.Rate }},
	{"taken_in", "seconds from the last create until every job was taken in", "s", func(p *Point) float64 { return secs(p.Create.TakenIn) }},
	{"job_bytes", "bytes per job in etcd (spec + state, keys + values)", "bytes", func(p *Point) float64 { return p.Size.JobBytes }},
	{"job_in_use_bytes", "etcd in-use growth per job created", "bytes", func(p *Point) float64 { return p.Size.JobInUseBytes }},
	{"run_bytes", "bytes per run in etcd (keys + values)", "bytes", func(p *Point) float64 { return p.Size.RunBytes }},
	{"run_in_use_bytes", "etcd in-use growth per run fired (herd)", "bytes", func(p *Point) float64 { return p.Size.RunInUseBytes }},
	{"rss", "largest member's resident memory with the jobs loaded", "MiB", func(p *Point) float64 { return p.RSS.Max / (1 << 20) }},
	{"heap_live", "largest member's Go heap live at its last collection with the jobs loaded", "MiB", func(p *Point) float64 { return p.HeapLive.Max / (1 << 20) }},
	{"rss_after_fires", "largest member's resident memory after the herd and spread", "MiB", func(p *Point) float64 { return p.RSSAfterFires.Max / (1 << 20) }},
	{"list_rate", "jobs listed per second (GET /v1/jobs, pages of 1000)", "jobs/s", func(p *Point) float64 { return p.List.Rate }},
	{"takeover_owned", "seconds from a SIGKILL until its partitions are owned and every survivor ready", "s", func(p *Point) float64 { return secs(p.Takeover.Owned) }},
	{"takeover_fires", "seconds from a SIGKILL until its partitions fire again", "s", func(p *Point) float64 { return secs(p.Takeover.FiresAgain) }},
	{"rejoin", "seconds from restarting the killed member until the fleet is settled", "s", func(p *Point) float64 { return secs(p.Takeover.Rejoin) }},
	{"restart_max", "slowest member of a rolling restart, SIGTERM until settled", "s", func(p *Point) float64 { return secs(p.Restart.Max) }},
	{"herd_durable", "seconds from the herd's second until its last run is durable", "s", func(p *Point) float64 { return secs(p.Herd.Durable) }},
	{"herd_counted", "seconds from the herd's second until a count of the runs in etcd shows them all", "s", func(p *Point) float64 { return secs(p.Herd.Counted) }},
	{"herd_rate", "herd: runs durable per second", "runs/s", func(p *Point) float64 { return p.Herd.Rate }},
	{"herd_lag_p99", "herd: p99 lag to fired_at", "ms", func(p *Point) float64 { return ms(p.Herd.LagFired.P99) }},
	{"herd_visible_p99", "herd: p99 lag to visibility", "ms", func(p *Point) float64 { return ms(p.Herd.LagVisible.P99) }},
	{"spread_lag_p99", "spread: p99 lag to fired_at", "ms", func(p *Point) float64 { return ms(p.SpreadLoad.LagFired.P99) }},
	{"spread_visible_p99", "spread: p99 lag to visibility", "ms", func(p *Point) float64 { return ms(p.SpreadLoad.LagVisible.P99) }},
}

func mib(x float64) float64 { return x / (1 << 20) }

// Tables returns the run's tables: creation, sizes and memory; failover;
// fires; the growth exponent of every figure; and every figure per point
// (CSV only).
func (r *Result) Tables() []*report.Table {
	cfg := r.Config
	store := "fsync on"
	if !cfg.Fsync {
		store = "fsync OFF (not honest about the store)"
	}
	head := fmt.Sprintf("one embedded etcd (%s), jobfleet orchestrator processes on loopback, P=%s", store, partitions(r))
	load := &report.Table{
		Name:    "scale_load",
		Title:   "Creating, storing, holding and listing N jobs — " + head,
		Columns: []string{"jobs", "members", "create jobs/s", "method", "taken in s", "bytes/job", "in-use bytes/job", "bytes/run", "in-use bytes/run", "RSS MiB min", "RSS MiB max", "heap live MiB max", "RSS MiB after fires", "list jobs/s"},
		Notes: []string{
			"create: one-off jobs due in a year; batch = POST /v1/jobs:batch, single = one POST /v1/jobs per job; taken in: from the last create until every job has a scheduling state",
			"bytes: keys + values (means of 2000 documents); in-use: growth of etcd's in-use size per document, with the revisions that wrote it (before compaction)",
			"RSS: the members' resident memory (/proc) with the jobs loaded, and the largest after the herd and spread fired 2N runs (kept, pending: no worker runs them)",
			"heap live: the largest member's Go heap live at its last garbage collection with the jobs loaded (heap goal / (1 + GOGC/100), from /metrics): RSS without the room GOGC leaves for garbage",
		},
	}
	fail := &report.Table{
		Name:    "scale_failover",
		Title:   "A member SIGKILLed, and a rolling restart of every member",
		Columns: []string{"jobs", "members", "victim partitions", "owned+ready s", "firing again s", "rejoin s", "restart slowest s", "restart total s", "misfires", "probe fires", "expected", "probe lag max ms"},
		Notes: []string{
			fmt.Sprintf("owned+ready: every partition owned by a survivor and every survivor ready; firing again: every @every 1s probe of the victim's partitions fired a time after the kill (%d probes in all)", cfg.Probes),
			"restart: each member SIGTERMed, started again and the fleet settled before the next; misfires: probe times skipped or dropped meanwhile (want 0)",
		},
	}
	fire := &report.Table{
		Name:    "scale_fires",
		Title:   "N jobs due in the same second (herd) and spread over a period",
		Columns: []string{"jobs", "members", "herd durable s", "herd counted s", "herd runs/s", "herd p50 ms", "herd p99 ms", "herd visible p50 ms", "herd visible p99 ms", "spread jobs", "spread period s", "spread p50 ms", "spread p99 ms", "spread visible p99 ms", "late"},
		Notes: []string{
			"durable: from the (last) due second until the bench's watch saw the last run; counted: until a count of the runs in etcd (every 250 ms, or four times as long as a count takes) first showed them all (durability without the watch's delivery, to that precision); p50/p99: lag of fired_at (the owner's clock) or of the bench seeing the run (an etcd watch) after scheduled_at",
			"late: the jobs' new run_at were still being written when the first was due (figures pessimistic)",
			"spread jobs: the jobs spread over the period (all N, or the first --spread-jobs of them, the others staying resident)",
		},
	}
	jit := &report.Table{
		Name:    "scale_jitter",
		Title:   "N hourly jobs with a jitter (jitter phase) against the same N due in one second (herd)",
		Columns: []string{"jobs", "members", "jitter s", "runs", "peak fires/s", "mean fires/s over the jitter", "herd peak fires/s", "fired − scheduled p50 s", "p99 s", "max s", "late"},
		Notes: []string{
			"peak fires/s: the most runs whose fired_at falls in one second of the wall clock; the herd's is the same for N one-off jobs due in one second, what the N hourly jobs would do without a jitter",
			"fired − scheduled: each run's fired_at after its scheduled time (the hour's second): its jitter offset plus the owner's lag",
		},
	}
	all := &report.Table{Name: "scale_figures", Columns: []string{"jobs", "members"}, FileOnly: true}
	for _, f := range Figures {
		all.Columns = append(all.Columns, f.Name)
	}
	for _, p := range r.Points {
		load.Add(p.Jobs, p.Members, p.Create.Rate, p.Create.Method, secs(p.Create.TakenIn), p.Size.JobBytes, p.Size.JobInUseBytes,
			p.Size.RunBytes, p.Size.RunInUseBytes, mib(p.RSS.Min), mib(p.RSS.Max), mib(p.HeapLive.Max), mib(p.RSSAfterFires.Max), p.List.Rate)
		t, s := p.Takeover, p.Restart
		fail.Add(p.Jobs, p.Members, t.Partitions, secs(t.Owned), secs(t.FiresAgain), secs(t.Rejoin), secs(s.Max), secs(s.Total), s.Misfires, s.Fires, s.Expected, ms(s.LagMax))
		h, sp := p.Herd, p.SpreadLoad
		late := ""
		if h.Late || sp.Late {
			late = "yes"
		}
		fire.Add(p.Jobs, p.Members, secs(h.Durable), secs(h.Counted), h.Rate, ms(h.LagFired.P50), ms(h.LagFired.P99), ms(h.LagVisible.P50), ms(h.LagVisible.P99),
			sp.Jobs, secs(sp.Period), ms(sp.LagFired.P50), ms(sp.LagFired.P99), ms(sp.LagVisible.P99), late)
		if jw := p.Jittered; jw.Runs > 0 {
			jl := ""
			if jw.Late {
				jl = "yes"
			}
			jit.Add(p.Jobs, p.Members, secs(jw.Period), jw.Runs, jw.PeakPerSecond, float64(jw.Runs)/jw.Period.Seconds(), h.PeakPerSecond,
				secs(jw.LagFired.P50), secs(jw.LagFired.P99), secs(jw.LagFired.Max), jl)
		}
		row := []any{p.Jobs, p.Members}
		for _, f := range Figures {
			row = append(row, f.Get(p))
		}
		all.Add(row...)
	}
	for _, p := range r.Points {
		for _, e := range p.Errors {
			load.Notes = append(load.Notes, fmt.Sprintf("FAILED at %d jobs on %d members: %s", p.Jobs, p.Members, e))
		}
	}
	return append([]*report.Table{load, fail, fire, jit, r.growth()}, append(r.ModelTables(), all)...)
}

func partitions(r *Result) string {
	if len(r.Points) > 0 {
		return strconv.Itoa(r.Points[0].Partitions)
	}
	return "default"
}

// Slope is the growth exponent of a figure between two job counts: y ∝
// N^Slope (1 linear, 0 flat).
type Slope struct {
	Figure  string  `json:"figure"`
	Members int     `json:"members"`
	FromN   int     `json:"from_jobs"`
	ToN     int     `json:"to_jobs"`
	Ratio   float64 `json:"ratio"`
	Slope   float64 `json:"slope"`
}

// Slopes returns every figure's growth exponent from the smallest to the
// largest N measured with the same member count.
func (r *Result) Slopes() []Slope {
	var out []Slope
	for _, m := range r.Config.Members {
		var pts []*Point
		for _, p := range r.Points {
			if p.Members == m {
				pts = append(pts, p)
			}
		}
		slices.SortFunc(pts, func(a, b *Point) int { return a.Jobs - b.Jobs })
		if len(pts) < 2 || pts[0].Jobs == pts[len(pts)-1].Jobs {
			continue
		}
		a, b := pts[0], pts[len(pts)-1]
		for _, f := range Figures {
			ya, yb := f.Get(a), f.Get(b)
			if ya <= 0 || yb <= 0 {
				continue
			}
			out = append(out, Slope{Figure: f.Name, Members: m, FromN: a.Jobs, ToN: b.Jobs, Ratio: yb / ya,
				Slope: math.Log(yb/ya) / math.Log(float64(b.Jobs)/float64(a.Jobs))})
		}
	}
	return out
}

func (r *Result) growth() *report.Table {
	t := &report.Table{
		Name:    "scale_growth",
		Title:   "How each figure grows with N: ratio between the smallest and largest N, and the exponent (y ∝ N^slope: 1 linear, 0 flat)",
		Columns: []string{"figure", "members", "from N", "to N", "ratio", "slope"},
	}
	for _, s := range r.Slopes() {
		t.Add(s.Figure, s.Members, s.FromN, s.ToN, s.Ratio, s.Slope)
	}
	return t
}

// distinctJobs counts the distinct N of the series.
func distinctJobs(series []report.Series) int {
	seen := map[float64]bool{}
	for _, s := range series {
		for _, x := range s.X {
			seen[x] = true
		}
	}
	return len(seen)
}

// Charts draws every measured figure against N on log-log axes, one line
// per member count and a line of slope 1 (linear growth) through the
// first point. A figure measured at fewer than two job counts has no
// chart.
func (r *Result) Charts(dir string) ([]string, error) {
	var files []string
	for _, f := range Figures {
		c := report.Chart{Title: f.Title, XLabel: "resident jobs N", YLabel: f.Unit, LogX: true, LogY: true}
		var ref *Point
		for _, m := range r.Config.Members {
			s := report.Series{Name: fmt.Sprintf("%d members", m)}
			pts := slices.Clone(r.Points)
			slices.SortFunc(pts, func(a, b *Point) int { return a.Jobs - b.Jobs })
			for _, p := range pts {
				if p.Members != m || f.Get(p) <= 0 {
					continue
				}
				if ref == nil {
					ref = p
				}
				s.X, s.Y = append(s.X, float64(p.Jobs)), append(s.Y, f.Get(p))
			}
			if len(s.X) > 0 {
				c.Series = append(c.Series, s)
			}
		}
		if ref == nil || distinctJobs(c.Series) < 2 {
			continue // not measured, or no curve: a single N
		}
		lin := report.Series{Name: "slope 1 (linear)"}
		maxN := ref.Jobs
		for _, p := range r.Points {
			maxN = max(maxN, p.Jobs)
		}
		for _, n := range []int{ref.Jobs, maxN} {
			lin.X, lin.Y = append(lin.X, float64(n)), append(lin.Y, f.Get(ref)*float64(n)/float64(ref.Jobs))
		}
		c.Series = append(c.Series, lin)
		p, err := c.WritePNG(dir, "scale_"+f.Name+".png")
		if err != nil {
			return files, err
		}
		files = append(files, p)
	}
	return files, nil
}
