package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/client"
)

func newRunCmd() *cobra.Command {
	var opts clientOptions
	cmd := &cobra.Command{Use: "run", Short: "Inspect, follow and cancel runs over the HTTP API"}
	requireSubcommand(cmd)
	opts.register(cmd)
	cmd.AddCommand(newRunGetCmd(&opts), newRunLsCmd(&opts), newRunLogsCmd(&opts), newRunCancelCmd(&opts), newRunRetryCmd(&opts))
	return cmd
}

func newRunGetCmd(opts *clientOptions) *cobra.Command {
	item := -1
	cmd := &cobra.Command{
		Use:   "get RUN_ID",
		Short: "Show one run with its attempts (or items): worker, start, end, duration, whole error and output",
		Long: `Show one run: its status and reason, when it was scheduled and fired, by
which owner, and every attempt with its worker, start, end, duration, and
its whole error and output (escaped, so that they cannot drive the
terminal). A sharded or broadcast run shows its items instead, one line
each with its status, worker, attempts, duration and last error;
--item N shows item N's attempts in full. -o json or -o yaml print the
run document. Run IDs are listed by jobfleet job runs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := fetch(cmd, opts, func(ctx context.Context, c *client.Client) (api.Run, error) { return c.GetRun(ctx, args[0]) })
			if err != nil {
				return err
			}
			if item >= 0 {
				if item >= len(r.Items) {
					return fmt.Errorf("--item %d: run %s has %d items", item, r.ID, len(r.Items))
				}
				if opts.structured() {
					return printDoc(cmd.OutOrStdout(), opts.output, r.Items[item])
				}
				return printItemDetail(cmd.OutOrStdout(), r, item, time.Now())
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, r)
			}
			return printRunDetail(cmd.OutOrStdout(), r, opts.output == "wide", time.Now())
		},
	}
	cmd.Flags().IntVar(&item, "item", -1, "show this item of a sharded or broadcast run with its attempts in full")
	return cmd
}

// printItemDetail writes item i of run r: the run's ID and status, the
// item's, then its attempts in full.
func printItemDetail(w io.Writer, r api.Run, i int, now time.Time) error {
	it := r.Items[i]
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("RUN", cell(r.ID)+" ("+cell(string(r.Status))+")")
	row("ITEM", fmt.Sprintf("%d of %d", it.Index, len(r.Items)))
	row("STATUS", cell(string(it.Status)))
	if it.Reason != "" {
		row("REASON", cell(it.Reason))
	}
	if it.Worker != "" {
		row("PINNED TO", cell(it.Worker))
	}
	row("ATTEMPTS", fmt.Sprint(len(it.Attempts)))
	if err := tw.Flush(); err != nil {
		return err
	}
	return printAttempts(w, it.Attempts, now)
}

// printRunDetail writes run r for people: a block of fields, then each
// attempt with its error and output in full, or the table of its items
// (their errors clipped unless wide).
func printRunDetail(w io.Writer, r api.Run, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("RUN", cell(r.ID))
	row("JOB", cell(r.JobID))
	row("STATUS", cell(string(r.Status)))
	if r.Reason != "" {
		row("REASON", cell(r.Reason))
	}
	if c := r.CausedBy; c != nil {
		row("CAUSED BY", fmt.Sprintf("run %s of %s, ended %s", cell(c.Run), cell(c.Job), c.Status))
	}
	row("SCHEDULED", timeText(r.ScheduledAt))
	row("FIRED", fmt.Sprintf("%s (%s after its time)", timeText(r.FiredAt), r.FiredAt.Sub(r.ScheduledAt).Round(time.Millisecond)))
	if d := runDuration(r, now); d != "" {
		row("DURATION", d)
	}
	row("OWNER", fmt.Sprintf("%s (epoch %d, partition %d)", cell(r.Owner), r.Epoch, r.Partition))
	if r.TraceID != "" {
		row("TRACE", cell(r.TraceID))
	}
	if len(r.Items) > 0 {
		row("ITEMS", itemsPolicy(r)+": "+itemsSummary(r))
	}
	row("ATTEMPTS", fmt.Sprint(r.AttemptCount()))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Steps) > 0 {
		fmt.Fprintln(w)
		if err := printSteps(w, r, wide, now); err != nil {
			return err
		}
	}
	if len(r.Items) > 0 {
		fmt.Fprintln(w)
		if err := printItems(w, r, wide, now); err != nil {
			return err
		}
	} else if err := printAttempts(w, r.Attempts, now); err != nil {
		return err
	}
	if len(r.Notifications) > 0 {
		fmt.Fprintln(w, "\nnotifications")
		return printDeliveries(&indent{w: w}, r.Notifications, false)
	}
	return nil
}

// printDeliveries writes notification delivery records as a table,
// with their runs unless of one run.
func printDeliveries(w io.Writer, ds []api.NotificationDelivery, withRun bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "EVENT	ATTEMPT	URL	RESULT	TRIES	AT	LAST ERROR"
	if withRun {
		head = "RUN	" + head
	}
	fmt.Fprintln(tw, head)
	for _, d := range ds {
		line := fmt.Sprintf("%s	%d	%s	%s	%d	%s	%s", cell(string(d.Event)), d.Attempt, cell(d.URL), cell(d.Result), d.Tries, timeText(d.At), cell(d.LastError))
		if withRun {
			run := d.RunID
			if run == "" {
				run = "-"
			}
			line = cell(run) + "	" + line
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// printAttempts writes each attempt with its times and its error and
// output in full.
func printAttempts(w io.Writer, attempts []api.Attempt, now time.Time) error {
	for _, a := range attempts {
		fmt.Fprintf(w, "\nattempt %d on worker %s\n", a.Attempt, cell(a.Worker))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  started\t%s\n", timeText(a.StartedAt))
		if a.FinishedAt.IsZero() {
			fmt.Fprintf(tw, "  finished\t(running for %s)\n", now.Sub(a.StartedAt).Round(time.Millisecond))
		} else {
			fmt.Fprintf(tw, "  finished\t%s (took %s)\n", timeText(a.FinishedAt), a.FinishedAt.Sub(a.StartedAt).Round(time.Millisecond))
		}
		if a.DroppedBytes > 0 {
			fmt.Fprintf(tw, "  dropped\t%d bytes of output and error (over the run's budget)\n", a.DroppedBytes)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, part := range []struct{ name, text string }{{"error", a.Error}, {"output", a.Output}} {
			if part.text == "" {
				continue
			}
			fmt.Fprintf(w, "  %s:\n", part.name)
			for _, line := range strings.Split(strings.TrimRight(text(part.text), "\n"), "\n") {
				fmt.Fprintf(w, "    %s\n", line)
			}
		}
	}
	return nil
}

// timeText writes t in UTC with milliseconds, "-" for the zero time.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// runDuration is how long run r took: from its first attempt's start to
// its last one's end (to now while one runs), "" before any attempt.
func runDuration(r api.Run, now time.Time) string {
	if len(r.Items) > 0 {
		return itemsDuration(r, now)
	}
	if len(r.Attempts) == 0 {
		return ""
	}
	start, last := r.Attempts[0].StartedAt, r.Attempts[len(r.Attempts)-1]
	if last.FinishedAt.IsZero() {
		return now.Sub(start).Round(time.Millisecond).String() + " so far"
	}
	return last.FinishedAt.Sub(start).Round(time.Millisecond).String()
}
