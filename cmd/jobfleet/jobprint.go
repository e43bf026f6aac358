package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
)

// printJobResult reports a stored job: the job document with -o json, a
// line saying what happened otherwise.
func printJobResult(cmd *cobra.Command, opts *clientOptions, verb string, j api.Job) error {
	if opts.structured() {
		return printDoc(cmd.OutOrStdout(), opts.output, j)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s job %q (partition %d, revision %d)\n", verb, j.ID, j.Partition, j.Revision)
	return err
}

func printJobDetail(w io.Writer, j api.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, cell(v)) }
	row("ID", j.ID)
	row("SCHEDULE", scheduleText(j))
	if j.HasSteps() {
		row("EXECUTOR", fmt.Sprintf("%d steps, each with its own", len(j.Steps)))
	} else {
		row("EXECUTOR", executorText(j.Executor, 0))
	}
	if len(j.Payload) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, j.Payload) != nil {
			b.Reset()
			b.Write(j.Payload)
		}
		row("PAYLOAD", clip(b.String(), 200))
	}
	row("PLACEMENT", placementText(j))
	if sh := shardsText(j); sh != "" {
		row("SHARDS", clip(sh, 200))
	}
	row("RETRY", fmt.Sprintf("max_attempts %d, backoff %v to %v", j.Retry.MaxAttempts, j.Retry.InitialBackoff, j.Retry.MaxBackoff))
	row("TIMEOUT", j.Timeout.String())
	row("CONCURRENCY", string(j.ConcurrencyPolicy))
	row("MISFIRE", string(j.MisfirePolicy))
	for _, c := range controlsText(j) {
		row(c[0], c[1])
	}
	row("PAUSED", fmt.Sprint(j.Paused))
	if j.Status != "" {
		row("STATUS", string(j.Status))
	}
	if why := j.State.PausedReason(j.Revision); why != "" {
		row("PAUSED BECAUSE", why)
	}
	row("PARTITION", fmt.Sprint(j.Partition))
	row("CREATED", j.CreatedAt.Format(time.RFC3339))
	row("UPDATED", j.UpdatedAt.Format(time.RFC3339))
	row("REVISION", fmt.Sprint(j.Revision))
	return tw.Flush()
}

// controlsText lists the schedule controls j sets, as rows (name, value).
func controlsText(j api.Job) [][2]string {
	var rows [][2]string
	if j.Jitter > 0 {
		rows = append(rows, [2]string{"JITTER", j.Jitter.String()})
	}
	if j.NotBefore != nil {
		rows = append(rows, [2]string{"NOT BEFORE", j.NotBefore.Format(time.RFC3339Nano)})
	}
	if j.NotAfter != nil {
		rows = append(rows, [2]string{"NOT AFTER", j.NotAfter.Format(time.RFC3339Nano)})
	}
	if j.MaxFires > 0 {
		done := int64(0)
		if j.State != nil {
			done = j.State.ScheduledRuns
		}
		rows = append(rows, [2]string{"MAX FIRES", fmt.Sprintf("%d (%d fired)", j.MaxFires, done)})
	}
	if len(j.Exclude) > 0 {
		rows = append(rows, [2]string{"EXCLUDE", strings.Join(j.Exclude, ", ")})
	}
	if j.PauseAfterFailures > 0 {
		failures := 0
		if j.State != nil {
			failures = j.State.Failures
		}
		rows = append(rows, [2]string{"PAUSE AFTER", fmt.Sprintf("%d runs in a row dead (%d so far)", j.PauseAfterFailures, failures)})
	}
	if j.ExpectSuccessWithin > 0 {
		v := j.ExpectSuccessWithin.String()
		if j.State != nil && j.State.Overdue != nil {
			v += " (OVERDUE since " + j.State.Overdue.Since.Format(time.RFC3339) + ")"
		}
		rows = append(rows, [2]string{"EXPECT SUCCESS", v})
	}
	if j.DeleteAfter != "" {
		rows = append(rows, [2]string{"DELETE AFTER", string(j.DeleteAfter)})
	}
	return rows
}

// statusText is a job's status as listings show it: its status if read
// with its state, else paused or active.
func statusText(j api.Job) string {
	switch {
	case j.Status != "":
		return string(j.Status)
	case j.Paused:
		return string(api.JobPaused)
	}
	return string(api.JobActive)
}

// placementText describes which workers may run a job and where its
// retries go.
func placementText(j api.Job) string {
	s := "any worker"
	if sel := j.Selector(); sel != "" {
		s = "workers matching " + sel
	}
	if j.Broadcasts() {
		s = "broadcast to every live worker"
		if sel := j.Selector(); sel != "" {
			s += " matching " + sel
		}
		return s + "; each item retried on its worker"
	}
	if j.RetriesElsewhere() {
		return s + "; retries elsewhere"
	}
	return s + "; retries on any worker"
}

// scheduleText describes when a job runs.
func scheduleText(j api.Job) string {
	switch {
	case j.Schedule != "" && j.Timezone != "" && j.Timezone != api.DefaultTimezone && !strings.HasPrefix(j.Schedule, "@every"):
		return j.Schedule + " (" + j.Timezone + ")"
	case j.Schedule != "":
		return j.Schedule
	case j.RunAt != nil:
		return "once at " + j.RunAt.Format(time.RFC3339)
	default:
		return "once, when created"
	}
}

// executorText describes an executor in at most max characters (0: no
// limit).
func executorText(e api.Executor, max int) string {
	var s string
	switch e.Type {
	case api.ExecutorHTTP:
		s = "http " + e.Method + " " + e.URL
	case api.ExecutorShell:
		s = "shell " + strings.Join(e.Command, " ")
	default:
		s = "handler " + e.Type
	}
	if max > 0 {
		s = clip(s, max)
	}
	return s
}

// clip shortens s to at most n runes, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// printRuns writes runs as a table: per run its status, scheduled time,
// attempts, the last attempt's worker, how long it took, its reason and
// the last attempt's error. Texts from workers are escaped; long ones are
// cut in the middle, keeping the end, where Go errors put their cause.
// wide adds the fire time and owner, and prints texts whole.
func printRuns(w io.Writer, runs []api.Run, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "RUN ID\tSTATUS\tSCHEDULED\tFIRED\tOWNER\tEPOCH\tITEMS\tATTEMPTS\tWORKER\tDURATION\tREASON\tLAST ERROR")
	} else {
		fmt.Fprintln(tw, "RUN ID\tSTATUS\tSCHEDULED\tITEMS\tATTEMPTS\tWORKER\tDURATION\tREASON\tLAST ERROR")
	}
	for _, r := range runs {
		lastWorker, lastErr, reason := runWorkers(r), "", r.Reason
		if n := len(r.Attempts); n > 0 {
			lastErr = r.Attempts[n-1].Error
		}
		items := "-"
		if len(r.Items) > 0 {
			c := r.Count()
			items = fmt.Sprintf("%d/%d", c.Succeeded, len(r.Items))
			lastErr = lastItemError(r)
		}
		if !wide {
			// A waiting run has a reason and no error yet: its reason,
			// which names what is missing, gets the error's room too.
			room := 48
			if lastErr == "" {
				room += 80
			}
			reason, lastErr = clipMiddle(reason, room), clipMiddle(lastErr, 80)
		}
		dur := runDuration(r, now)
		if dur == "" {
			dur = "-"
		}
		if wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", cell(r.ID), cell(string(r.Status)),
				r.ScheduledAt.Format(time.RFC3339), r.FiredAt.Format(time.RFC3339), cell(r.Owner), r.Epoch, items, r.AttemptCount(), cell(lastWorker), dur, cell(reason), cell(lastErr))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", cell(r.ID), cell(string(r.Status)),
			r.ScheduledAt.Format(time.RFC3339), items, r.AttemptCount(), cell(lastWorker), dur, cell(reason), cell(lastErr))
	}
	return tw.Flush()
}

// clipMiddle shortens s to at most n runes on one line by cutting out its
// middle: the start says what failed, the end (where Go errors put the
// cause, "...: connection refused") why.
func clipMiddle(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	head := n / 3
	tail := n - head - 1
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// plural returns "1 job", "2 jobs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
