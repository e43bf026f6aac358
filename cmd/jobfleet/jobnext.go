package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

func newJobNextCmd(opts *clientOptions) *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:   "next ID",
		Short: "Show a job's next fire times, in its time zone and in UTC, as its partition's owner will fire them",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCount(count); err != nil {
				return err
			}
			nf, err := fetch(cmd, opts, func(ctx context.Context, c *client.Client) (api.NextFires, error) {
				return c.NextFires(ctx, args[0], count)
			})
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, nf)
			}
			return printNextFires(cmd.OutOrStdout(), nf, time.Now())
		},
	}
	cmd.Flags().IntVar(&count, "count", 10, "how many fire times, 1 to 100")
	return cmd
}

func newJobPreviewCmd(opts *clientOptions) *cobra.Command {
	var (
		req   api.PreviewRequest
		runAt string
		count int
	)
	cmd := &cobra.Command{
		Use:   "preview SCHEDULE | --run-at TIME",
		Short: "Show when a schedule would fire, before saving a job with it (the server computes it as it will fire it)",
		Example: `  jobfleet job preview '30 2 * * *' --timezone America/New_York --count 5
  jobfleet job preview '@every 90m'
  jobfleet job preview --run-at 2026-12-01T00:00:00Z`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				req.Schedule = args[0]
			}
			if runAt != "" {
				t, err := time.Parse(time.RFC3339Nano, runAt)
				if err != nil {
					return fmt.Errorf("--run-at %q: want an RFC 3339 time such as 2026-12-01T00:00:00Z", runAt)
				}
				req.RunAt = &t
			}
			if (req.Schedule == "") == (req.RunAt == nil) {
				return fmt.Errorf("give a SCHEDULE argument or --run-at, one of them")
			}
			if err := checkCount(count); err != nil {
				return err
			}
			req.Count = &count
			nf, err := fetch(cmd, opts, func(ctx context.Context, c *client.Client) (api.NextFires, error) { return c.PreviewSchedule(ctx, req) })
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, nf)
			}
			return printNextFires(cmd.OutOrStdout(), nf, time.Now())
		},
	}
	cmd.Flags().StringVar(&req.Timezone, "timezone", "", "IANA time zone of the schedule (default UTC)")
	cmd.Flags().IntVar(&count, "count", 10, "how many fire times, 1 to 100")
	cmd.Flags().StringVar(&runAt, "run-at", "", "a one-off time instead of a schedule (RFC 3339)")
	return cmd
}

// checkCount refuses a --count outside 1 to api.MaxNextFires. The API
// reads a count of 0 as "not given" and lists the default number, so
// --count 0 must be refused here rather than answered with ten times.
func checkCount(n int) error {
	if n < 1 || n > api.MaxNextFires {
		return fmt.Errorf("--count %d: want 1 to %d", n, api.MaxNextFires)
	}
	return nil
}

// printNextFires writes fire times as a table: the local time with its
// weekday and zone abbreviation, UTC, and how far from now.
func printNextFires(w io.Writer, nf api.NextFires, now time.Time) error {
	switch {
	case nf.JobID != "" && nf.Paused:
		fmt.Fprintf(w, "job %s is paused: it fires these times only if resumed before them\n", cell(fmt.Sprintf("%q", nf.JobID)))
	case nf.JobID != "" && len(nf.Fires) == 0:
		fmt.Fprintf(w, "job %s fires no more\n", cell(fmt.Sprintf("%q", nf.JobID)))
		return nil
	case len(nf.Fires) == 0:
		fmt.Fprintln(w, "no fire times")
		return nil
	}
	loc, err := time.LoadLocation(nf.Timezone)
	if err != nil {
		loc = nil // the server knows zones this machine does not: show its offsets only
	}
	jittered := slices.ContainsFunc(nf.Fires, func(f api.Fire) bool { return f.ScheduledAt != "" })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if jittered {
		// The jitter delays fires past their scheduled times; the run
		// keeps the scheduled time.
		fmt.Fprintf(tw, "LOCAL (%s)\tUTC\tIN\tSCHEDULED (UTC)\n", cell(nf.Timezone))
	} else {
		fmt.Fprintf(tw, "LOCAL (%s)\tUTC\tIN\n", cell(nf.Timezone))
	}
	for _, f := range nf.Fires {
		sched := ""
		if jittered {
			sched = "\t" + cell(f.ScheduledAt)
			if f.ScheduledAt == "" {
				sched = "\t" + cell(f.UTC)
			}
		}
		t, err := time.Parse(time.RFC3339Nano, f.Local)
		if err != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", cell(f.Local), cell(f.UTC), sched)
			continue
		}
		local := t.Format("Mon 2006-01-02 15:04:05 -07:00")
		if loc != nil {
			local = t.In(loc).Format("Mon 2006-01-02 15:04:05 MST")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\n", local, cell(f.UTC), untilText(t.Sub(now)), sched)
	}
	return tw.Flush()
}

// untilText says how far ahead d is, to the second within the hour
// (fires a few seconds apart must not read the same): "in 1m23s",
// "in 3h20m", "2d4h ago".
func untilText(d time.Duration) string {
	ago := d < 0
	if ago {
		d = -d
	}
	var s string
	switch {
	case d < time.Hour:
		s = d.Truncate(time.Second).String()
		if strings.HasSuffix(s, "m0s") {
			s = s[:len(s)-2] // "5m0s" -> "5m"
		}
	case d < 24*time.Hour:
		s = d.Truncate(time.Minute).String()
		s = s[:len(s)-2] // "3h20m0s" -> "3h20m"
	default:
		days := d / (24 * time.Hour)
		s = fmt.Sprintf("%dd%dh", days, (d-days*24*time.Hour)/time.Hour)
	}
	if ago {
		return s + " ago"
	}
	return "in " + s
}
