package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

func newLimitCmd() *cobra.Command {
	return newClientGroupCmd("limit", "Manage limit keys: fleet-wide bounds on running attempts and starts that jobs share (\"limits\": [KEY])",
		newLimitSetCmd, newLimitGetCmd, newLimitListCmd, newLimitRemoveCmd)
}

func newLimitSetCmd(opts *clientOptions) *cobra.Command {
	var (
		file       string
		maxRunning int
		rateCount  int
		ratePer    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "set KEY (-f FILE | --max-running N | --rate COUNT --per DURATION)",
		Short: "Create or replace a limit key from a document (-f FILE, - for standard input) or from flags",
		Example: `  jobfleet limit set billing-db --max-running 5
  jobfleet limit set partner-api --rate 100 --per 1m
  jobfleet limit set billing-db -f billing-db.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := resourceDocument(cmd, file, []string{"max-running", "rate", "per"}, func(given []string) error {
				return fmt.Errorf("-f takes the whole limit from the file; do not combine it with %v", given)
			}, func() ([]byte, error) {
				l := api.Limit{Key: args[0]}
				if cmd.Flags().Changed("max-running") {
					l.MaxRunning = &maxRunning
				}
				switch r, p := cmd.Flags().Changed("rate"), cmd.Flags().Changed("per"); {
				case r && p:
					l.Rate = &api.LimitRate{Count: rateCount, Per: api.Duration(ratePer)}
				case r || p:
					return nil, fmt.Errorf("--rate and --per go together: --rate COUNT --per DURATION")
				}
				if l.MaxRunning == nil && l.Rate == nil {
					return nil, fmt.Errorf("give --max-running, --rate with --per, or -f FILE")
				}
				return json.Marshal(l)
			})
			if err != nil {
				return err
			}
			stored, verb, err := putResource(cmd, opts, func(ctx context.Context, c *client.Client) (api.Limit, bool, error) {
				return c.PutLimitJSON(ctx, args[0], doc)
			})
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, stored)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s limit %q (max running %s, rate %s)\n", verb, stored.Key, maxRunningText(stored), rateText(stored))
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "limit document (JSON); - reads standard input")
	cmd.Flags().IntVar(&maxRunning, "max-running", 0, "most attempts naming the key that run at once, fleet-wide (0 starts none)")
	cmd.Flags().IntVar(&rateCount, "rate", 0, "most attempts naming the key that start per --per window")
	cmd.Flags().DurationVar(&ratePer, "per", 0, "the window of --rate, 1s to 24h")
	return cmd
}

func maxRunningText(l api.Limit) string {
	if l.MaxRunning == nil {
		return "-"
	}
	return strconv.Itoa(*l.MaxRunning)
}

func rateText(l api.Limit) string {
	if l.Rate == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%s", l.Rate.Count, l.Rate.Per)
}

func newLimitGetCmd(opts *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use: "get KEY", Short: "Show a limit key, with its running and waiting attempts as the answering member sees them", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := fetch(cmd, opts, func(ctx context.Context, c *client.Client) (api.Limit, error) { return c.GetLimit(ctx, args[0]) })
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "KEY\t%s\n", cell(l.Key))
			fmt.Fprintf(tw, "MAX RUNNING\t%s\n", maxRunningText(l))
			fmt.Fprintf(tw, "RATE\t%s\n", rateText(l))
			if st := l.Status; st != nil {
				fmt.Fprintf(tw, "RUNNING\t%d\n", st.Running)
				fmt.Fprintf(tw, "WAITING\t%d (on this member's partitions)\n", st.Waiting)
				if l.Rate != nil {
					fmt.Fprintf(tw, "STARTED\t%d in the current window\n", st.Started)
				}
			}
			fmt.Fprintf(tw, "UPDATED\t%s\n", timeText(l.UpdatedAt))
			return tw.Flush()
		},
	}
}

func newLimitListCmd(opts *clientOptions) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List limit keys, by key", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			all, err := allLimits(cmd, opts, prefix)
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, api.LimitList{Limits: all})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tMAX RUNNING\tRATE\tRUNNING")
			for _, l := range all {
				running := "-"
				if l.Status != nil {
					running = strconv.Itoa(l.Status.Running)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(l.Key), maxRunningText(l), rateText(l), running)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "list only limit keys that start with this")
	return cmd
}

func newLimitRemoveCmd(opts *clientOptions) *cobra.Command {
	return newRemoveCmd(opts, "rm KEY", "Delete a limit key; runs waiting for it start, attempts holding it keep running", "limit",
		func(ctx context.Context, c *client.Client, key string) error { return c.DeleteLimit(ctx, key) })
}

// allLimits reads every page of the limit keys within prefix (and the
// credential's), in key order.
func allLimits(cmd *cobra.Command, opts *clientOptions, prefix string) ([]api.Limit, error) {
	return listResources(cmd, opts, prefix, func(ctx context.Context, c *client.Client, o client.ListOptions) ([]api.Limit, string, error) {
		page, err := c.ListLimits(ctx, o)
		return page.Limits, page.NextCursor, err
	})
}
