package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// OK reports whether the checker found nothing wrong.
func (r *Report) OK() bool { return r.Result.OK() }

// WriteTable writes the report as readable tables: the faults injected
// per kind with their failover times and the checker's figures for the
// scheduled times attributed to them, the global checks, and the
// violations.
func (r *Report) WriteTable(out io.Writer) {
	fmt.Fprintf(out, "chaos run: seed %d, %v of faults, etcd %d member(s), %d orchestrators, %d workers, %d partitions, lease TTL %v, run lease %v, misfire grace %v\n",
		r.Seed, r.Config.Duration, r.Config.EtcdMembers, r.Config.Orchestrators, r.Config.Workers, r.Config.Partitions,
		r.Config.LeaseTTL, r.Config.RunLease, r.Config.Grace)
	fmt.Fprintf(out, "run took %v; files in %s\n\n", r.Ended.Sub(r.Started).Round(time.Second), r.Dir)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault kind\tinjected\tfailover p50\tfailover max\tbound\tover bound\texpected\tfired\texecuted\tmissed (allowed)\tmissed\tdup fires\tdup execs\tstale accepted\tunexpected\tearly\tmax lag\tmax early\t")
	row := func(s KindStats) {
		fo50, fomax := "-", "-"
		if s.Failovers > 0 {
			fo50, fomax = dur(s.FailoverP50), dur(s.FailoverMax)
		}
		bound, over := "-", "-"
		if s.Bound > 0 {
			bound, over = dur(s.Bound), fmt.Sprint(s.OverBound)
		}
		inj := fmt.Sprint(s.Injected)
		if s.Kind == Steady {
			inj = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", s.Kind, inj, fo50, fomax, bound, over,
			s.FiresExpected, s.FiresRecorded, s.FiresExecuted, s.MissedAllowed, s.Missed, s.DuplicateFires,
			s.DuplicateExecutions, s.StaleReportsAccepted, s.UnexpectedFires, s.FiredEarly, dur(s.MaxLag), dur(s.MaxEarly))
	}
	for _, s := range r.Kinds {
		row(s)
	}
	row(r.Total)
	tw.Flush()

	g := r.Global
	fmt.Fprintf(out, "\njobs accepted %d (deleted %d, updates %d), executions %d, runs retried %d, runs executed successfully more than once %d (%d of them while the first worker lived on), owner key events %d (re-fences after a write of unknown outcome %d)\n",
		g.Jobs, g.JobsDeleted, g.JobUpdates, g.Executions, g.RunsRetried, g.RunsRepeated, g.RunsRepeatedWorkerAlive, g.OwnerEvents, g.Refences)
	it := g.Items
	fmt.Fprintf(out, "runs of items %d (broadcast %d) with %d items: retried %d, executed successfully more than once %d; broadcast items dead with their worker %d, workers a broadcast fire missed %d (a violation outside faults)\n",
		it.Runs, it.BroadcastRuns, it.Items, it.ItemsRetried, it.ItemsRepeated, it.BroadcastWorkerLost, it.BroadcastWorkersMissed)
	af := g.After
	fmt.Fprintf(out, "upstream runs that had to fire a job after them %d, downstream runs fired %d\n", af.UpstreamRuns, af.Fired)
	st := g.Steps
	fmt.Fprintf(out, "runs of steps %d with %d steps: step executions in their last round %d\n", st.Runs, st.Steps, st.Executions)
	type check struct {
		name string
		n    int
	}
	var limitRows []check
	if l := g.Limits; l != nil {
		var most []string
		for _, k := range slices.Sorted(maps.Keys(l.MaxOverlap)) {
			most = append(most, fmt.Sprintf("%s %d", k, l.MaxOverlap[k]))
		}
		fmt.Fprintf(out, "limit keys %d: executions of their jobs %d, most at once per key: %s; starts of rate keys %d (over the count while a member's clock was off, not guaranteed: %d)\n",
			l.Keys, l.Executions, strings.Join(most, ", "), l.RateStarts, l.RateExceededSkewed)
		limitRows = []check{
			{"attempts holding a key over its max_running at once", l.OverRunning},
			{"starts of a rate key over its count in a window", l.RateExceeded},
			{"slots still held at the end", l.SlotsLeaked},
		}
	}
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, c := range append([]check{
		{"accepted jobs missing at the end", g.AcceptedJobsMissing},
		{"accepted writes lost (update or delete)", g.AcceptedWritesLost},
		{"owner keys overwritten (two owners)", g.OwnerOverlaps},
		{"fires not by the partition's owner", g.UnfencedFires},
		{"runs executed that the store never fired", g.UnknownRunsExecuted},
		{"attempts executed that the store never recorded", g.UnrecordedAttempts},
		{"cut-off workers' reports accepted after reassignment", g.CutOffReportsAccepted},
		{fmt.Sprintf("attempts on a worker its job's selector or its credential does not allow (of %d)", g.AttemptsPlaced), g.AttemptsMisplaced},
		{"runs fired but never executed", g.RunsLost},
		{"runs not final at the end", g.RunsUnfinished},
		{"corrupt run documents", g.CorruptRuns},
		{"faults not recovered from", g.FaultsNotRecovered},
		{"items that succeeded twice or were undone", it.ItemsSucceededTwice},
		{"items lost (not ended, or dead with attempts left)", it.ItemsLost},
		{"runs whose status is not their items'", it.ItemStatusMismatch},
		{"broadcast items on another worker than theirs", it.BroadcastMisplaced},
		{"upstream runs that fired no run of a job after them", af.Missed},
		{"upstream runs that fired a job after them twice", af.Duplicated},
		{"runs naming a cause that did not end so", af.Unexpected},
		{"steps started before the steps they need ended as their when requires", st.StepsStartedEarly},
		{"steps lost (not ended, not as their items, or the run not as its steps)", st.StepsLost},
	}, limitRows...) {
		mark := "ok"
		if c.n != 0 {
			mark = "FAIL"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\n", c.name, c.n, mark)
	}
	tw.Flush()
	if n := r.Noisy; n != nil {
		fmt.Fprintf(out, "\nnoisy tenant (%s, for %v): operator rewriting a %d-byte job, pausing and resuming it: %v; worker registering %d bytes: %v; refused for lack of space: %d\n",
			noisyPrefix, n.End.Sub(n.Start).Round(time.Second), n.JobBytes, n.Operator, n.RegistrationBytes, n.Worker, n.NoSpace)
	}

	if len(r.Violations) == 0 {
		fmt.Fprintln(out, "\nchecker: PASS (every must-be-zero count is zero)")
		return
	}
	fmt.Fprintf(out, "\nchecker: FAIL, %d violations", len(r.Violations)+r.Truncated)
	if r.Truncated > 0 {
		fmt.Fprintf(out, " (%d not listed)", r.Truncated)
	}
	fmt.Fprintln(out, ":")
	for _, v := range r.Violations {
		kind := ""
		if v.Kind != "" {
			kind = " [" + string(v.Kind) + "]"
		}
		fmt.Fprintf(out, "  %s%s: %s\n", v.Check, kind, v.Detail)
	}
}

// WriteFaults writes one line per injected fault.
func (r *Report) WriteFaults(out io.Writer) {
	for _, f := range r.Faults {
		fo := "not recovered"
		if !f.Recovered.IsZero() {
			fo = "failover " + dur(f.Failover)
		}
		line := fmt.Sprintf("%s %-18s %-36s %s", f.Start.UTC().Format("15:04:05.000"), f.Kind, f.Target, fo)
		if f.Detail != "" {
			line += "; " + f.Detail
		}
		if f.Err != "" {
			line += "; error: " + f.Err
		}
		fmt.Fprintln(out, strings.TrimSpace(line))
	}
}

func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}
