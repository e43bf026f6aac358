package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

// described is job describe's -o json document.
type described struct {
	Job  api.Job       `json:"job"`
	Next api.NextFires `json:"next"`
	Runs []api.Run     `json:"runs"`
	// Dependents are the jobs that run after it.
	Dependents []api.Dependency `json:"dependents"`
	// Notifications are its latest notifications' deliveries.
	Notifications []api.NotificationDelivery `json:"notifications"`
}

func newJobDescribeCmd(opts *clientOptions) *cobra.Command {
	var fires, runs int
	cmd := &cobra.Command{
		Use:   "describe ID",
		Short: "Show what an operator reads first about a job: its definition, scheduling state, next fire times and last runs",
		Long: `Show one job on one screen: its definition, the scheduling state its
partition's owner records (last and next scheduled times, counts of fired,
skipped and dropped times, its misfires, its max_fires count, its runs in
a row that ended dead and why its owner paused it), its next fire times in
its zone and in UTC (jittered, with the scheduled times),
for a job made of steps its steps as a tree (each under the step it
needs; one that needs several is drawn once, saying "needs: a, b"),
its upstream jobs (after) and the jobs that run after it,
its latest notifications' deliveries (result, tries, last error),
and its last runs with their durations, reasons and errors (cut in the
middle; jobfleet run get RUN_ID shows one whole). -o json or -o yaml print
{"job", "next", "runs", "dependents", "notifications"}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fires < 1 || fires > 100 {
				return fmt.Errorf("--fires must be 1 to 100, got %d", fires)
			}
			if runs < 1 || runs > 1000 {
				return fmt.Errorf("--runs must be 1 to 1000, got %d", runs)
			}
			var d described
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				if d.Job, err = c.GetJob(ctx, args[0]); err != nil {
					return err
				}
				if d.Next, err = c.NextFires(ctx, args[0], fires); err != nil {
					return err
				}
				if d.Dependents, err = dependentsOf(ctx, c, args[0]); err != nil {
					return err
				}
				d.Notifications, err = c.Deliveries(ctx, args[0])
				if errors.Is(err, client.ErrNotFound) { // deleted meanwhile, or a member without the route
					d.Notifications, err = []api.NotificationDelivery{}, nil
				}
				if err != nil {
					return err
				}
				d.Runs, err = c.ListRuns(ctx, args[0], runs)
				if errors.Is(err, client.ErrNotFound) { // deleted meanwhile
					d.Runs, err = []api.Run{}, nil
				}
				return err
			}); err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, d)
			}
			return printDescribed(cmd.OutOrStdout(), d, opts.output == "wide", time.Now())
		},
	}
	cmd.Flags().IntVar(&fires, "fires", 5, "next fire times to show, 1 to 100")
	cmd.Flags().IntVar(&runs, "runs", 5, "last runs to show, 1 to 1000")
	return cmd
}

// printDescribed writes a described job in sections.
func printDescribed(w io.Writer, d described, wide bool, now time.Time) error {
	if err := printJobDetail(w, d.Job); err != nil {
		return err
	}
	printStepTree(w, d.Job)
	fmt.Fprintln(w, "\nSTATE")
	if st := d.Job.State; st == nil {
		fmt.Fprintln(w, "  not yet taken in by its partition's owner")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		// Before its first time the owner records the creation (or the
		// edit) as the time accounted up to: not a time it fired.
		last := timeText(st.Last)
		if st.Fired+st.Skipped+st.Dropped == 0 {
			last = "none yet (times after " + last + " are due)"
		}
		fmt.Fprintf(tw, "  last scheduled\t%s\n", last)
		fmt.Fprintf(tw, "  next scheduled\t%s\n", timeText(st.Next))
		fmt.Fprintf(tw, "  fired / skipped / dropped\t%d / %d / %d\n", st.Fired, st.Skipped, st.Dropped)
		// The job's share of jobfleet_misfires_total: the metric has no
		// job label (a million jobs would be a million series).
		fmt.Fprintf(tw, "  misfires\t%d (times not fired within the misfire grace; misfire_policy %s)\n", st.Missed, d.Job.MisfirePolicy)
		if d.Job.MaxFires > 0 {
			fmt.Fprintf(tw, "  scheduled runs\t%d of max_fires %d\n", st.ScheduledRuns, d.Job.MaxFires)
		}
		if d.Job.PauseAfterFailures > 0 {
			fmt.Fprintf(tw, "  dead in a row\t%d (pauses at %d)\n", st.Failures, d.Job.PauseAfterFailures)
		}
		if d.Job.ExpectSuccessWithin > 0 {
			last := "none since the bound was set"
			if !st.LastSucceededAt.IsZero() {
				last = timeText(st.LastSucceededAt)
			}
			fmt.Fprintf(tw, "  last success\t%s (expect_success_within %s)\n", last, d.Job.ExpectSuccessWithin)
		}
		if o := st.Overdue; o != nil {
			fmt.Fprintf(tw, "  OVERDUE\tsince %s (notified %s): no run succeeded within %s\n", timeText(o.Since), timeText(o.NotifiedAt), d.Job.ExpectSuccessWithin)
		}
		if why := st.PausedReason(d.Job.Revision); why != "" {
			fmt.Fprintf(tw, "  paused by its owner\t%s at %s; resume to clear\n", why, timeText(st.Pause.At))
		}
		fmt.Fprintf(tw, "  runs stored\t%d\n", st.Runs)
		if !st.FinishedAt.IsZero() {
			fmt.Fprintf(tw, "  completed\t%s\n", timeText(st.FinishedAt))
		}
		if st.SpecRevision != 0 && st.SpecRevision != d.Job.Revision {
			fmt.Fprintf(tw, "  note\tthe state is of revision %d; the owner has not taken in revision %d yet\n", st.SpecRevision, d.Job.Revision)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	printDependencies(w, d)
	fmt.Fprintln(w, "\nNEXT FIRES")
	if err := printNextFires(&indent{w: w}, d.Next, now); err != nil {
		return err
	}
	if len(d.Notifications) > 0 {
		fmt.Fprintln(w, "\nNOTIFICATIONS")
		if err := printDeliveries(&indent{w: w}, d.Notifications, true); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nLAST RUNS")
	if len(d.Runs) == 0 {
		fmt.Fprintln(w, "  none")
		return nil
	}
	return printRuns(&indent{w: w}, d.Runs, wide, now)
}

// indent writes every line written to it two spaces in.
type indent struct {
	w   io.Writer
	mid bool // within a line
}

func (i *indent) Write(p []byte) (int, error) {
	var out []byte
	for _, b := range p {
		if !i.mid {
			out = append(out, ' ', ' ')
		}
		out = append(out, b)
		i.mid = b != '\n'
	}
	if _, err := i.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
