package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

func newJobCmd() *cobra.Command {
	var opts clientOptions
	cmd := &cobra.Command{Use: "job", Short: "Create, inspect and operate jobs over the HTTP API"}
	requireSubcommand(cmd)
	opts.register(cmd)
	cmd.AddCommand(
		newJobCreateCmd(&opts),
		newJobApplyCmd(&opts),
		newJobGetCmd(&opts),
		newJobListCmd(&opts),
		newJobRemoveCmd(&opts),
		newJobPauseCmd(&opts, "pause", true),
		newJobPauseCmd(&opts, "resume", false),
		newJobTriggerCmd(&opts),
		newJobBackfillCmd(&opts),
		newJobRunsCmd(&opts),
		newJobNextCmd(&opts),
		newJobDescribeCmd(&opts),
		newJobEditCmd(&opts),
		newJobPreviewCmd(&opts),
		newImportCrontabCmd(&opts),
	)
	return cmd
}

func newJobCreateCmd(opts *clientOptions) *cobra.Command {
	var (
		file  string
		flags jobFlags
	)
	cmd := &cobra.Command{
		Use:   "create (-f FILE | --id ID --http-url URL | --id ID --shell CMD | ...)",
		Short: "Create a job from a job document (-f FILE, - for standard input) or from flags; fails if the ID exists",
		Example: `  jobfleet job create -f nightly-report.json
  jobfleet job create --id ping --schedule '*/5 * * * *' --http-url http://127.0.0.1:9000/hook --payload '{"x":1}'
  jobfleet job create --id backup --schedule '0 2 * * *' --timezone Europe/Berlin --shell '/srv/backup.sh --full'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var doc []byte
			var err error
			if file != "" {
				if given := changed(cmd, jobFlagNames); len(given) > 0 {
					return fmt.Errorf("-f takes the whole job from the file; do not combine it with %s", strings.Join(given, ", "))
				}
				doc, err = readDocument(cmd, file)
			} else {
				doc, err = flags.document(cmd)
			}
			if err != nil {
				return err
			}
			j, err := fetch(cmd, opts, func(ctx context.Context, c *client.Client) (api.Job, error) { return c.CreateJobJSON(ctx, doc) })
			if err != nil {
				return err
			}
			return printJobResult(cmd, opts, "created", j)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "job document (JSON); - reads standard input")
	flags.register(cmd)
	return cmd
}

func newJobGetCmd(opts *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use: "get ID", Short: "Show one job", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := fetch(cmd, opts, func(ctx context.Context, c *client.Client) (api.Job, error) { return c.GetJob(ctx, args[0]) })
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, j)
			}
			return printJobDetail(cmd.OutOrStdout(), j)
		},
	}
}

func newJobListCmd(opts *clientOptions) *cobra.Command {
	var (
		limit, chunk   int
		cursor, prefix string
		paused         bool
	)
	cmd := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List jobs, sorted by ID (all of them unless --limit)", Args: cobra.NoArgs,
		Long: `List jobs sorted by ID. Without --limit every job is fetched (in pages of
--chunk-size) and the whole list is sorted. With --limit N the API's first N
jobs after --cursor are shown, sorted by ID; the API pages in its own order
(by partition, then ID), so such a page is not the first N IDs. --paused
lists only paused jobs, --paused=false only the others (filtered by the
server).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit must not be negative, got %d", limit)
			}
			if chunk < 1 || chunk > 1000 {
				return fmt.Errorf("--chunk-size must be 1 to 1000, got %d", chunk)
			}
			all := api.JobList{Jobs: []api.Job{}, NextCursor: cursor}
			var only *bool
			if cmd.Flags().Changed("paused") {
				only = &paused
			}
			err := opts.call(cmd, func(ctx context.Context, c *client.Client) error {
				for {
					n := chunk
					if limit > 0 {
						n = min(n, limit-len(all.Jobs))
					}
					page, err := c.ListJobs(ctx, client.ListOptions{Limit: n, Cursor: all.NextCursor, Prefix: prefix, Paused: only, State: true})
					if err != nil {
						return err
					}
					all.Jobs = append(all.Jobs, page.Jobs...)
					all.NextCursor = page.NextCursor
					if page.NextCursor == "" || (limit > 0 && len(all.Jobs) >= limit) {
						return nil
					}
				}
			})
			if err != nil {
				return err
			}
			// The API pages in key order (partition, then ID), which keeps
			// cursors stable; people look jobs up by ID.
			slices.SortFunc(all.Jobs, func(a, b api.Job) int { return strings.Compare(a.ID, b.ID) })
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, all)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSCHEDULE\tEXECUTOR\tSTATUS\tPARTITION")
			for _, j := range all.Jobs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", cell(j.ID), cell(scheduleText(j)), cell(executorText(j.Executor, 60)), statusText(j), j.Partition)
			}
			if all.NextCursor != "" {
				fmt.Fprintf(tw, "(more: --cursor %q)\n", all.NextCursor)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many jobs (0: all)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "start after this cursor (from a previous --limit listing)")
	cmd.Flags().IntVar(&chunk, "chunk-size", 500, "jobs fetched per request, 1 to 1000")
	cmd.Flags().StringVar(&prefix, "prefix", "", "list only jobs whose ID starts with this")
	cmd.Flags().BoolVar(&paused, "paused", false, "list only paused jobs (--paused=false: only jobs not paused)")
	return cmd
}

// newJobPauseCmd returns the pause command (pause true) or resume.
func newJobPauseCmd(opts *clientOptions, name string, pause bool) *cobra.Command {
	short := "Pause a job: it does not fire until resumed (it can still be triggered)"
	if !pause {
		short = "Resume a paused job; times scheduled while it was paused are not made up"
	}
	return &cobra.Command{
		Use: name + " ID", Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var j api.Job
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				if pause {
					j, err = c.PauseJob(ctx, args[0])
				} else {
					j, err = c.ResumeJob(ctx, args[0])
				}
				return err
			}); err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, j)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%sd job %q\n", name, j.ID)
			return err
		},
	}
}

func newJobRunsCmd(opts *clientOptions) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use: "runs ID", Short: "List a job's runs, newest first", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > 1000 {
				return fmt.Errorf("--limit must be 1 to 1000, got %d", limit)
			}
			var rl api.RunList
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				rl.Runs, err = c.ListRuns(ctx, args[0], limit)
				return err
			}); err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, rl)
			}
			return printRuns(cmd.OutOrStdout(), rl.Runs, opts.output == "wide", time.Now())
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "show at most this many runs, 1 to 1000")
	return cmd
}
