package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

func newRunCancelCmd(opts *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN_ID",
		Short: "Cancel a pending or running run: it ends cancelled and is never retried",
		Long: `Cancel a run that is pending, failed awaiting its retry, or running. The
run's partition's owner records it cancelled (never retried) and, if an
attempt is running, its worker is told to stop at its next heartbeat (a
third of the run lease); a worker that does not report within a run lease
is treated as lost and its late report refused. Any member takes the
request. It prints the cancelled run once the owner has applied it, or
says the request is recorded if the owner has not within a few seconds
(a partition changing owner: its next owner applies it). A run that is
final already is refused, naming its status (exit status 1). Operators
may cancel the runs of jobs within their prefix.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var (
				r       api.Run
				applied bool
			)
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				r, applied, err = c.CancelRun(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			if !applied {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "cancel of run %s requested; its partition's owner applies it (jobfleet run get shows it)\n", cell(args[0]))
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, r)
			}
			return printRunDetail(cmd.OutOrStdout(), r, opts.output == "wide", time.Now())
		},
	}
}
