package soak

import (
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/bench/report"
)

// marks are the moments the summary table shows (those within the run),
// besides its end.
var marks = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour}

// at returns the first sample at or after d.
func (r *Result) at(d time.Duration) (Sample, bool) {
	for _, s := range r.Samples {
		if s.Elapsed >= d {
			return s, true
		}
	}
	return Sample{}, false
}

// Tables returns the run's tables: etcd at a few moments, the sizing
// figures, and every sample (CSV only).
func (r *Result) Tables() []*report.Table {
	cfg := r.Config
	sum := &report.Table{
		Name: "soak_summary",
		Title: fmt.Sprintf("Soak: %d fires/s requested (%.0f/s achieved) for %v, %d members, P=%d, compaction every %v, quota %s",
			cfg.FiresPerSecond, r.FiresPerSecond, cfg.Duration, cfg.Members, cfg.Partitions, cfg.CompactionInterval, mib(r.Quota)),
		Columns: []string{"at", "db size MiB", "in use MiB", "revision", "compacted", "revisions kept", "runs kept", "fires", "dropped", "above high water"},
	}
	add := func(label string, s Sample) {
		high := ""
		if s.HighWater {
			high = "yes"
		}
		sum.Add(label, float64(s.DBSize)/(1<<20), float64(s.DBInUse)/(1<<20), s.Revision, s.Compacted, s.Revision-s.Compacted, s.Runs, s.Fires, s.Dropped, high)
	}
	var lastShown time.Duration = -1
	for _, m := range marks {
		if m > cfg.Duration {
			break
		}
		if s, ok := r.at(m); ok {
			add(m.String(), s)
			lastShown = s.Elapsed
		}
	}
	if n := len(r.Samples); n > 0 && r.Samples[n-1].Elapsed != lastShown {
		add("end ("+r.Samples[n-1].Elapsed.Round(time.Second).String()+")", r.Samples[n-1])
	}
	sum.Notes = []string{
		"db size: etcd's database file (what its quota counts); in use: without free pages (what a defragmentation would shrink it to)",
		"compacted: the fleet's last compaction (0: none yet); revisions kept = revision − compacted",
		"fires: scheduled times fired, or recorded as skipped (run_once records times missed by more than the misfire grace so), since the jobs were created; dropped: missed times past the misfire cap, not recorded",
		fmt.Sprintf("meanwhile %d member sessions were lost (a lease not renewed within its renew deadline: etcd answered late; the member's partitions stop firing until owned again) and %d scheduler writes failed",
			r.Events.SessionsLost, r.Events.WriteFailures),
	}

	z := r.Sizing
	sizing := &report.Table{
		Name:    "soak_sizing",
		Title:   "What the fleet's documents cost in etcd",
		Columns: []string{"quantity", "bytes", "measured as"},
	}
	sizing.Add("per job (spec + scheduling state)", z.JobBytes, "keys + values under jobs/ and state/, per job")
	sizing.Add("per job, in etcd", z.JobInUseBytes, "etcd in-use growth per job created (the creating revisions included)")
	sizing.Add("per kept run (finished)", z.RunBytes, "keys + values of up to 2000 run documents, mean")
	sizing.Add("per member", z.MemberBytes, "keys + values of the member key and its share of owner keys")
	if z.Measured {
		sizing.Add("per revision, until compacted", z.RevisionBytes, "etcd in-use growth per revision before the first compaction")
		sizing.Add("per fire, until compacted", z.FireBytes, fmt.Sprintf("etcd in-use growth per fire before the first compaction (%.2f revisions per fire)", z.RevisionsPerFire))
	} else {
		sizing.Notes = append(sizing.Notes, "per revision and per fire: not measured (fewer than two samples before the first compaction)")
	}

	d := r.Defrag
	sizing.Add("defragmentation at the end", float64(d.Before-d.After), fmt.Sprintf("database %s → %s in %v (the fleet stopped)", mib(d.Before), mib(d.After), d.Took.Round(time.Millisecond)))

	all := &report.Table{
		Name:     "soak_samples",
		Columns:  []string{"elapsed s", "db size bytes", "in use bytes", "revision", "compacted revision", "runs kept", "fires", "dropped", "high water"},
		FileOnly: true,
	}
	for _, s := range r.Samples {
		high := 0
		if s.HighWater {
			high = 1
		}
		all.Add(fmt.Sprintf("%.1f", s.Elapsed.Seconds()), s.DBSize, s.DBInUse, s.Revision, s.Compacted, s.Runs, s.Fires, s.Dropped, high)
	}
	return []*report.Table{sum, sizing, all}
}

// Charts draws the database size and in-use size over time, and the
// revisions etcd keeps with the runs the fleet keeps.
func (r *Result) Charts(dir string) ([]string, error) {
	size := report.Chart{
		Title:  fmt.Sprintf("etcd database, %d fires/s, compaction every %v", r.Config.FiresPerSecond, r.Config.CompactionInterval),
		XLabel: "minutes", YLabel: "MiB",
	}
	kept := report.Chart{
		Title:  "What etcd keeps",
		XLabel: "minutes", YLabel: "thousands",
	}
	db := report.Series{Name: "database file"}
	inUse := report.Series{Name: "in use"}
	revs := report.Series{Name: "revisions kept (revision − compacted)"}
	runs := report.Series{Name: "run documents kept"}
	for _, s := range r.Samples {
		x := s.Elapsed.Minutes()
		db.X, db.Y = append(db.X, x), append(db.Y, float64(s.DBSize)/(1<<20))
		inUse.X, inUse.Y = append(inUse.X, x), append(inUse.Y, float64(s.DBInUse)/(1<<20))
		revs.X, revs.Y = append(revs.X, x), append(revs.Y, float64(s.Revision-s.Compacted)/1000)
		runs.X, runs.Y = append(runs.X, x), append(runs.Y, float64(s.Runs)/1000)
	}
	size.Series = []report.Series{db, inUse}
	kept.Series = []report.Series{revs, runs}
	var files []string
	for _, c := range []struct {
		ch   report.Chart
		name string
	}{{size, "soak_size.png"}, {kept, "soak_kept.png"}} {
		p, err := c.ch.WritePNG(dir, c.name)
		if err != nil {
			return files, err
		}
		files = append(files, p)
	}
	return files, nil
}
