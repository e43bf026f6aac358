package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

func newRunRetryCmd(opts *clientOptions) *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "retry RUN_ID --from STEP",
		Short: "Start a dead or cancelled run of steps again from a step",
		Long: `Start a run of a job made of steps, that ended dead or cancelled, again
from one of its steps: that step and every step that needs it, directly or
not, run again; the other steps keep how they ended and their results,
which the steps that run again receive. It is the same run, in a new round
(its "round" goes up by one and "rounds" records how the previous one
ended). A run that has not ended, that succeeded, that is not made of
steps, or that has no such step is refused with the reason (exit status
1). The credential rules are those of run cancel.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var (
				r       api.Run
				applied bool
			)
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				r, applied, err = c.RetryRun(ctx, args[0], from)
				return err
			}); err != nil {
				return err
			}
			if !applied {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "retry of run %s from step %s requested; its partition's owner applies it (jobfleet run get shows it)\n", cell(args[0]), cell(from))
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, r)
			}
			return printRunDetail(cmd.OutOrStdout(), r, opts.output == "wide", time.Now())
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the step to start the run again from (required)")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}
