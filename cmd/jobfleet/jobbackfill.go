package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/store"
)

// backfillPoll is how often jobfleet job backfill --wait reads the
// backfill's progress.
const backfillPoll = time.Second

func newJobBackfillCmd(opts *clientOptions) *cobra.Command {
	var (
		from, to string
		max      int
		dryRun   bool
		wait     bool
		stop     bool
	)
	cmd := &cobra.Command{
		Use:   "backfill ID --from TIME [--to TIME]",
		Short: "Run a job for its scheduled times in a past range that have no run (dry run first)",
		Long: `Create a run for each scheduled time of the job in [--from, --to), at most
--max of them (1 to 1000), with the run IDs its fires would have had: a
time that has a run already (fired, triggered, or backfilled before) is
listed as existing and not run again, and a backfill racing a fire of
the same time runs it once. --to defaults to now and may not be later;
times are RFC 3339 (2026-06-01T00:00:00Z). --dry-run lists the times and
which exist, and writes nothing: run it first.

The job's partition's owner creates the runs, paced: --backfill-rate runs
a second on each orchestrator, and at most ten of the job's backfilled
runs waiting or running at once, so that a large range does not crowd
out the fleet's other runs. Under concurrency_policy forbid or replace,
one at a time, when no run of the job is active. A job has one backfill
at a time; a range with more than --max times says where the next request
starts (--from). --wait follows the backfill until it is done; --stop
stops the running one (the runs it created stay).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if stop {
				return opts.call(cmd, func(ctx context.Context, c *client.Client) error {
					b, err := c.StopBackfill(ctx, id)
					if err != nil {
						return err
					}
					return printBackfill(cmd.OutOrStdout(), opts, b)
				})
			}
			req, err := backfillRequest(from, to, max, dryRun, cmd.Flags().Changed("max"))
			if err != nil {
				return err
			}
			return opts.call(cmd, func(ctx context.Context, c *client.Client) error {
				b, err := c.Backfill(ctx, id, req)
				if err != nil {
					return err
				}
				for wait && b.Status == api.BackfillRunning {
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(backfillPoll):
					}
					if b, err = c.GetBackfill(ctx, id); err != nil {
						return err
					}
				}
				return printBackfill(cmd.OutOrStdout(), opts, b)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "first scheduled time of the range, RFC 3339 (required)")
	f.StringVar(&to, "to", "", "end of the range, excluded, RFC 3339 (default: now)")
	f.IntVar(&max, "max", api.MaxBackfill, "most times to backfill (1 to 1000)")
	f.BoolVar(&dryRun, "dry-run", false, "list the times and which have a run already; write nothing")
	f.BoolVar(&wait, "wait", false, "follow the backfill until every time has its run")
	f.BoolVar(&stop, "stop", false, "stop the job's running backfill instead (the runs it created stay)")
	return cmd
}

// backfillRequest reads the flags of jobfleet job backfill.
func backfillRequest(from, to string, max int, dryRun, maxSet bool) (api.BackfillRequest, error) {
	req := api.BackfillRequest{DryRun: dryRun}
	if from == "" {
		return req, fmt.Errorf("--from is required: the first scheduled time to backfill (RFC 3339)")
	}
	t, err := time.Parse(time.RFC3339Nano, from)
	if err != nil {
		return req, fmt.Errorf("--from: %q is not an RFC 3339 time like 2026-06-01T00:00:00Z", from)
	}
	req.From = t
	if to != "" {
		t, err := time.Parse(time.RFC3339Nano, to)
		if err != nil {
			return req, fmt.Errorf("--to: %q is not an RFC 3339 time like 2026-06-01T00:00:00Z", to)
		}
		req.To = &t
	}
	if maxSet {
		if max < 1 || max > api.MaxBackfill {
			return req, fmt.Errorf("--max must be 1 to %d, got %d", api.MaxBackfill, max)
		}
		req.Max = &max
	}
	return req, nil
}

// printBackfill writes backfill b: a summary, then each time with what
// the backfill does with it.
func printBackfill(w io.Writer, opts *clientOptions, b api.Backfill) error {
	if opts.structured() {
		return printDoc(w, opts.output, b)
	}
	fmt.Fprintf(w, "backfill of job %s, [%s, %s): %s\n", cell(b.JobID), timeText(b.From), timeText(b.To), b.Status)
	if b.Status == api.BackfillDryRun {
		fmt.Fprintf(w, "%d to create, %d existing (not run again)", len(b.Pending), len(b.Existing))
	} else {
		fmt.Fprintf(w, "%d created, %d pending, %d existing (not run again)", len(b.Created), len(b.Pending), len(b.Existing))
	}
	if len(b.Skipped) > 0 {
		fmt.Fprintf(w, ", %d or more after --max %d", len(b.Skipped), b.Max)
	}
	fmt.Fprintln(w)
	if b.NextFrom != nil {
		fmt.Fprintf(w, "more times in the range: go on with --from %s\n", b.NextFrom.UTC().Format(time.RFC3339Nano))
	}
	type row struct {
		at   time.Time
		what string
	}
	var rows []row
	pending := "pending"
	if b.Status == api.BackfillDryRun {
		pending = "to create"
	}
	for _, l := range []struct {
		times []time.Time
		what  string
	}{{b.Created, "created"}, {b.Pending, pending}, {b.Existing, "existing"}} {
		for _, t := range l.times {
			rows = append(rows, row{t, l.what})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	slices.SortFunc(rows, func(a, b row) int { return a.at.Compare(b.at) })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULED\tRUN ID\tBACKFILL")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", timeText(r.at), cell(store.RunID(b.JobID, r.at)), r.what)
	}
	return tw.Flush()
}
