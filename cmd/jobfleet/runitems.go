package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// itemsSummary says how a run's items stand: "12/16 succeeded, 1
// running, 3 pending", "" for a run of one item.
func itemsSummary(r api.Run) string {
	if len(r.Items) == 0 {
		return ""
	}
	c := r.Count()
	parts := []string{fmt.Sprintf("%d/%d succeeded", c.Succeeded, len(r.Items))}
	for _, p := range []struct {
		n    int
		what string
	}{{c.Running, "running"}, {c.Failed, "failed (retry due)"}, {c.Pending, "pending"}, {c.Dead, "dead"}, {c.Skipped, "skipped"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return strings.Join(parts, ", ")
}

// itemsPolicy describes a run's item settings: "broadcast to 3 workers",
// "16 items, 14 required, at most 4 at once".
func itemsPolicy(r api.Run) string {
	var s string
	if r.Broadcast {
		s = fmt.Sprintf("broadcast to %d workers", len(r.Items))
	} else {
		s = fmt.Sprintf("%d items", len(r.Items))
	}
	if need := r.Required(); need < len(r.Items) {
		s += fmt.Sprintf(", %d required", need)
	}
	if r.MaxParallel > 0 {
		s += fmt.Sprintf(", at most %d at once", r.MaxParallel)
	}
	return s
}

// itemWorker is the worker an item ran on (its last attempt's), or is
// pinned to.
func itemWorker(it api.Item) string {
	if n := len(it.Attempts); n > 0 {
		return it.Attempts[n-1].Worker
	}
	return it.Worker
}

// chainSpan returns when attempts started and last ended (zero while one
// runs), and whether there is any.
func chainSpan(as []api.Attempt) (start, end time.Time, ok bool) {
	for _, a := range as {
		if start.IsZero() || a.StartedAt.Before(start) {
			start = a.StartedAt
		}
	}
	if len(as) == 0 {
		return start, end, false
	}
	if last := as[len(as)-1]; !last.FinishedAt.IsZero() {
		end = last.FinishedAt
	}
	return start, end, true
}

// itemsDuration is how long a run of items took: from its first item's
// first start to its last item's end (to now while an item runs), "" if
// no item started.
func itemsDuration(r api.Run, now time.Time) string {
	var start, end time.Time
	running, any := false, false
	for _, it := range r.Items {
		s, e, ok := chainSpan(it.Attempts)
		if !ok {
			continue
		}
		if !any || s.Before(start) {
			start = s
		}
		any = true
		if e.IsZero() {
			running = true
		} else if e.After(end) {
			end = e
		}
	}
	switch {
	case !any:
		return ""
	case running || !r.Status.Final():
		return now.Sub(start).Round(time.Millisecond).String() + " so far"
	}
	return end.Sub(start).Round(time.Millisecond).String()
}

// printItems writes a run's items as a table: index, status, worker,
// attempts, duration and the last error (or the item's reason), clipped
// unless wide.
func printItems(w io.Writer, r api.Run, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\tSTATUS\tWORKER\tATTEMPTS\tDURATION\tERROR")
	for _, it := range r.Items {
		msg := it.Reason
		if n := len(it.Attempts); n > 0 && it.Attempts[n-1].Error != "" {
			msg = it.Attempts[n-1].Error
		}
		if !wide {
			msg = clipMiddle(msg, 80)
		}
		dur := "-"
		if s, e, ok := chainSpan(it.Attempts); ok {
			if e.IsZero() {
				e = now
			}
			dur = e.Sub(s).Round(time.Millisecond).String()
		}
		worker := itemWorker(it)
		if worker == "" {
			worker = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", it.Index, cell(string(it.Status)), cell(worker), len(it.Attempts), dur, cell(msg))
	}
	return tw.Flush()
}

// runWorkers is the worker column of a run in a list: its last
// attempt's, or for a run of items the number of workers its items ran
// on.
func runWorkers(r api.Run) string {
	if len(r.Items) == 0 {
		if n := len(r.Attempts); n > 0 {
			return r.Attempts[n-1].Worker
		}
		return ""
	}
	var ws []string
	for _, it := range r.Items {
		for _, a := range it.Attempts {
			if !slices.Contains(ws, a.Worker) {
				ws = append(ws, a.Worker)
			}
		}
	}
	if len(ws) == 1 {
		return ws[0]
	}
	return fmt.Sprintf("%d workers", len(ws))
}

// lastItemError is the last error of a run of items: that of its
// highest-indexed dead item, else of any failed one.
func lastItemError(r api.Run) string {
	msg := ""
	for _, it := range r.Items {
		if n := len(it.Attempts); n > 0 && it.Attempts[n-1].Error != "" && (it.Status == api.RunDead || it.Status == api.RunFailed) {
			msg = it.Attempts[n-1].Error
		}
	}
	return msg
}

// shardsText describes a job's shards and placement for job describe: ""
// for a job of single runs.
func shardsText(j api.Job) string {
	if j.Broadcasts() {
		text := "broadcast: one item per live worker that runs " + j.Executor.Type
		if sel := j.Selector(); sel != "" {
			text += " with labels matching " + sel
		}
		return text + " at each fire"
	}
	s := j.Shards
	if s == nil {
		return ""
	}
	text := fmt.Sprintf("%d items", s.Items())
	if len(s.Params) > 0 {
		var ps []string
		for _, p := range s.Params[:min(len(s.Params), 5)] {
			ps = append(ps, string(p))
		}
		text += " (params " + strings.Join(ps, ", ")
		if len(s.Params) > 5 {
			text += fmt.Sprintf(", … %d more", len(s.Params)-5)
		}
		text += ")"
	}
	if s.MinSucceeded > 0 {
		text += fmt.Sprintf(", min_succeeded %d", s.MinSucceeded)
	}
	if s.MaxParallel > 0 {
		text += fmt.Sprintf(", max_parallel %d", s.MaxParallel)
	}
	return text
}
