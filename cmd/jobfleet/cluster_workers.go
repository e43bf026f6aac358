package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// newClusterWorkersCmd is `jobfleet cluster workers`.
func newClusterWorkersCmd(opts *clientOptions) *cobra.Command {
	var selector string
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the live workers: executor types they serve, labels, concurrency, attempts held (a sample), credential, when each registration was created and last written, and the orchestrator it was written by",
		Example: `  jobfleet cluster workers
  jobfleet cluster workers --selector 'pool=gpu,region in (eu-west,eu-central)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := fetch(cmd, opts, func(ctx context.Context, c *client.Client) (api.WorkerList, error) {
				return c.WorkersMatching(ctx, selector)
			})
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, l)
			}
			now := time.Now()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tEXECUTORS\tLABELS\tACTIVE\tCREDENTIAL\tREGISTERED\tUPDATED\tORCHESTRATOR")
			for _, w := range l.Workers {
				ex := make([]string, len(w.Executors))
				for i, e := range w.Executors {
					ex[i] = cell(e)
				}
				cred := cell(w.Credential)
				if w.Prefix != "" {
					cred += " (" + cell(w.Prefix) + "*)"
				}
				labels := cell(placement.FormatLabels(w.Labels))
				if labels == "" {
					labels = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s ago\t%s\n", cell(w.ID), strings.Join(ex, ","), labels, w.Active, w.Concurrency, cred,
					w.RegisteredAt.Format(time.RFC3339), now.Sub(w.LastContact).Round(time.Second), cell(w.Orchestrator))
			}
			fmt.Fprintf(tw, "%d workers\n", len(l.Workers))
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&selector, "selector", "", `list only the workers whose labels this label selector matches (as a job's placement.selector: "pool=gpu,!spot")`)
	return cmd
}
