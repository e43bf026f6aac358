package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

func newRunLogsCmd(opts *clientOptions) *cobra.Command {
	var (
		follow        bool
		item, attempt int
	)
	cmd := &cobra.Command{
		Use:   "logs RUN_ID",
		Short: "Print a run's output, live while its attempt runs; -f follows it until the attempt ends",
		Long: `Print the output of a run's latest attempt (or --attempt N's; --item N for
an item of a sharded or broadcast run). While the attempt runs, its worker
pushes its output to the member owning the run's partition, which keeps its
last bytes (--live-output-bytes, 64 KiB by default) in memory; once that is
no longer held, the output the run keeps is printed. -f follows the output
as it comes until the attempt ends, then exits (status 0 whatever the
attempt's outcome: jobfleet run get tells it); a run whose first attempt
has not started yet (just triggered, waiting for a worker) is waited for,
with a line on standard error saying so. Bytes dropped before what is
printed (a long output, a follower too slow) are marked in the text.
Control characters other than newlines and tabs are escaped. Viewers may
read the output of the runs of jobs within their prefix.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := client.OutputOptions{Attempt: attempt}
			if item >= 0 {
				o.Item = &item
			}
			w := cmd.OutOrStdout()
			return opts.call(cmd, func(ctx context.Context, c *client.Client) error {
				if !follow {
					out, err := c.RunOutput(ctx, args[0], o)
					if err != nil {
						return err
					}
					return printOutput(w, out.Skipped, out.Output)
				}
				if attempt == 0 {
					if err := awaitFirstAttempt(ctx, c, args[0], item, cmd.ErrOrStderr()); err != nil {
						return err
					}
				}
				_, err := c.FollowOutput(ctx, args[0], o, func(ev api.OutputEvent) error {
					return printOutput(w, ev.Skipped, ev.Data)
				})
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the output until the attempt ends")
	cmd.Flags().IntVar(&item, "item", -1, "the item of a sharded or broadcast run whose attempt to show")
	cmd.Flags().IntVar(&attempt, "attempt", 0, "the attempt to show (0: the latest)")
	return cmd
}

// awaitFirstAttempt returns once run id's chain (its item's, item ≥ 0)
// has an attempt or the run is final, polling every half second and
// saying once on errw that it waits; a run of steps or items followed
// without --item is not waited for (its chains start one by one). A run
// not found is looked for again for up to runAppearWait (a trigger's run
// is stored a moment after the trigger is accepted). It returns the
// client's error, or ctx's.
func awaitFirstAttempt(ctx context.Context, c *client.Client, id string, item int, errw io.Writer) error {
	said := false
	appearBy := time.Now().Add(runAppearWait)
	for {
		r, err := c.GetRun(ctx, id)
		stored := err == nil
		if errors.Is(err, client.ErrNotFound) && time.Now().Before(appearBy) {
			r.Status = "not stored yet"
		} else if err != nil {
			return err
		}
		started := len(r.Attempts) > 0 || (item < 0 && (len(r.Items) > 0 || len(r.Steps) > 0))
		if item >= 0 {
			// An item the stored run does not have is not waited for:
			// the follow names the error.
			started = stored && (item >= len(r.Items) || len(r.Items[item].Attempts) > 0)
		}
		if started || r.Status.Final() {
			return nil
		}
		if !said {
			fmt.Fprintf(errw, "waiting for the first attempt of %s to start (the run is %s)\n", text(id), r.Status)
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// runAppearWait is how long run logs -f looks for a run not found.
const runAppearWait = 10 * time.Second

// printOutput writes output, escaped for the terminal, after a mark of
// the skipped bytes before it if any.
func printOutput(w io.Writer, skipped int64, output string) error {
	if skipped > 0 {
		if _, err := fmt.Fprintf(w, "[… %d bytes not held …]\n", skipped); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, text(output))
	return err
}
