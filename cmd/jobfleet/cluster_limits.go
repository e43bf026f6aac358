package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
)

// newClusterLimitsCmd is `jobfleet cluster limits`.
func newClusterLimitsCmd(opts *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "limits",
		Short: "List the limit keys with their slots held fleet-wide (RUNNING), the runs waiting for them on the answering member's partitions (WAITING), MAX running and RATE",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, err := allLimits(cmd, opts, "")
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, api.LimitList{Limits: all})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tRUNNING\tWAITING\tMAX\tRATE\tSTARTED")
			for _, l := range all {
				st := api.LimitStatus{}
				if l.Status != nil {
					st = *l.Status
				}
				started := "-"
				if l.Rate != nil {
					started = fmt.Sprint(st.Started)
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", cell(l.Key), st.Running, st.Waiting, maxRunningText(l), rateText(l), started)
			}
			return tw.Flush()
		},
	}
}
