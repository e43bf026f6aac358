package main

import (
	"cmp"
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

// runLsMaxRead is the most failing runs run ls reads before it sorts
// them, and runLsMaxPages the most requests it makes (a filtered page may
// be short: the server reads at most store.DefaultFailingScan entries per
// page): beyond either, it says the list is incomplete.
const (
	runLsMaxRead  = 10000
	runLsMaxPages = 20
)

func newRunLsCmd(opts *clientOptions) *cobra.Command {
	var (
		status string
		since  time.Duration
		prefix string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the runs failing across the fleet (failed or dead in the last 24 hours), newest first",
		Long: `List the runs that are failing across the fleet: failed (an attempt failed
and a retry is due) or dead (the last allowed attempt failed or was lost,
or the run was replaced), within the last 24 hours at most, and within the
credential's job-ID prefix. Each row shows the job, the run ID (for
jobfleet run get), the status, the number of attempts, when the run got
its status and the start of the last attempt's error, cut in the middle
(-o wide prints it as stored: its first 200 bytes).

Rows are newest first. The command reads up to 10000 failing runs in at
most 20 requests (the API lists them by partition and job, not by time)
and shows the newest --limit of them; it says so when it leaves some out. -o json or -o yaml
print the entries read, as the API returns them, in its order.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > runLsMaxRead {
				return fmt.Errorf("--limit must be 1 to %d, got %d", runLsMaxRead, limit)
			}
			if since <= 0 || since > api.FailingWindow {
				return fmt.Errorf("--since must be more than 0 and at most %s, got %s", api.FailingWindow, since)
			}
			statuses, err := parseFailingStatuses(status)
			if err != nil {
				return err
			}
			var (
				list      = api.FailingRunList{Runs: []api.FailingRun{}}
				truncated bool
			)
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) error {
				o := client.FailingOptions{ListOptions: client.ListOptions{Limit: 1000, Prefix: prefix}, Statuses: statuses, Since: since}
				for pages := 1; ; pages++ {
					page, err := c.ListFailingRuns(ctx, o)
					if err != nil {
						return err
					}
					list.Runs = append(list.Runs, page.Runs...)
					if page.NextCursor == "" {
						return nil
					}
					if len(list.Runs) >= runLsMaxRead || pages >= runLsMaxPages {
						truncated = true
						return nil
					}
					o.Cursor = page.NextCursor
				}
			}); err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, list)
			}
			runs := list.Runs
			slices.SortStableFunc(runs, func(a, b api.FailingRun) int {
				return cmp.Or(b.At.Compare(a.At), cmp.Compare(a.RunID, b.RunID))
			})
			shown := runs[:min(limit, len(runs))]
			if err := printFailingRuns(cmd.OutOrStdout(), shown, opts.output == "wide"); err != nil {
				return err
			}
			switch {
			case truncated:
				fmt.Fprintf(cmd.ErrOrStderr(), "not every failing run was read: these are the newest of the %d read; narrow with --prefix, --status or --since\n", len(runs))
			case len(shown) < len(runs):
				fmt.Fprintf(cmd.ErrOrStderr(), "showing the newest %d of %d failing runs; raise --limit or narrow with --prefix, --status or --since\n", len(shown), len(runs))
			case len(runs) == 0 && prefix != "":
				fmt.Fprintf(cmd.ErrOrStderr(), "no failing runs of jobs under %q in the last %s (a credential scoped to a prefix sees only its own jobs' runs)\n", prefix, shortDuration(since))
			case len(runs) == 0:
				fmt.Fprintf(cmd.ErrOrStderr(), "no failing runs in the last %s\n", shortDuration(since))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&status, "status", "dead,failed", "the statuses to list: dead, failed, or both comma-separated")
	cmd.Flags().DurationVar(&since, "since", api.FailingWindow, "list runs that got their status within this duration, at most 24h")
	cmd.Flags().StringVar(&prefix, "prefix", "", "list only runs of jobs whose ID starts with this prefix")
	cmd.Flags().IntVar(&limit, "limit", 50, fmt.Sprintf("show at most this many runs, the newest, 1 to %d", runLsMaxRead))
	return cmd
}

// shortDuration writes d without zero trailing units: "24h", "1h30m",
// "90s", "1.5s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// parseFailingStatuses parses --status: dead, failed, or both
// comma-separated.
func parseFailingStatuses(s string) ([]api.RunStatus, error) {
	var out []api.RunStatus
	for part := range strings.SplitSeq(s, ",") {
		st := api.RunStatus(strings.TrimSpace(part))
		if !st.Failing() {
			return nil, fmt.Errorf("--status: %q is not %q or %q (a comma-separated list of them)", string(st), api.RunDead, api.RunFailed)
		}
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out, nil
}

// printFailingRuns writes failing runs as a table: job, run ID, status,
// attempts, when the run got its status, and the error, escaped and cut
// in the middle (whole if wide).
func printFailingRuns(w io.Writer, runs []api.FailingRun, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tRUN\tSTATUS\tATTEMPT\tAT\tERROR")
	for _, r := range runs {
		msg := r.Error
		if !wide {
			msg = clipMiddle(msg, 80)
		}
		status := string(r.Status)
		if r.Items > 0 {
			status += fmt.Sprintf(" (%d/%d items)", r.Succeeded, r.Items)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", cell(r.JobID), cell(r.RunID), cell(status), r.Attempt, r.At.UTC().Format(time.RFC3339), cell(msg))
	}
	return tw.Flush()
}
