package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

func newClusterCmd() *cobra.Command {
	var opts clientOptions
	cmd := &cobra.Command{Use: "cluster", Short: "Inspect and operate the fleet over the HTTP API"}
	requireSubcommand(cmd)
	opts.register(cmd)

	cmd.AddCommand(&cobra.Command{
		Use: "members", Short: "List the live members", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := fetch(cmd, &opts, func(ctx context.Context, c *client.Client) (api.View, error) { return c.Members(ctx) })
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, v)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tADDR\tLEASE\tSTARTED")
			for _, m := range v.Members {
				fmt.Fprintf(tw, "%s\t%s\t%x\t%s\n", cell(m.ID), cell(m.Addr), m.LeaseID, m.StartedAt.Format(time.RFC3339))
			}
			fmt.Fprintf(tw, "(revision %d)\n", v.Revision)
			return tw.Flush()
		},
	})
	var allPartitions bool
	partitionsCmd := &cobra.Command{
		Use: "partitions", Short: "Show a per-member summary of partition ownership; with --all, each partition's owner, epoch and ring target", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := fetch(cmd, &opts, func(ctx context.Context, c *client.Client) (api.PartitionTable, error) { return c.Partitions(ctx) })
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, t)
			}
			owned := map[string]int{}
			targeted := map[string]int{}
			unowned, misplaced := 0, 0
			for _, a := range t.Rows {
				owned[a.Owner]++
				targeted[a.Target]++
				if a.Owner == "" {
					unowned++
				} else if a.Owner != a.Target {
					misplaced++
				}
			}
			ids := map[string]bool{}
			for id := range owned {
				ids[id] = true
			}
			for id := range targeted {
				ids[id] = true
			}
			sorted := make([]string, 0, len(ids))
			for id := range ids {
				if id != "" {
					sorted = append(sorted, id)
				}
			}
			sort.Strings(sorted)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			if allPartitions {
				fmt.Fprintln(tw, "PARTITION\tOWNER\tEPOCH\tTARGET")
				for _, a := range t.Rows {
					owner := cell(a.Owner)
					if a.Owner == "" {
						owner = "-"
					}
					fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", a.Partition, owner, a.Epoch, cell(a.Target))
				}
				fmt.Fprintln(tw)
			}
			fmt.Fprintln(tw, "MEMBER\tOWNED\tTARGET")
			for _, id := range sorted {
				fmt.Fprintf(tw, "%s\t%d\t%d\n", cell(id), owned[id], targeted[id])
			}
			fmt.Fprintf(tw, "%d partitions, %d without owner, %d not yet on their target (revision %d)\n", t.Partitions, unowned, misplaced, t.Revision)
			return tw.Flush()
		},
	}
	cmd.AddCommand(newClusterWorkersCmd(&opts), newClusterLimitsCmd(&opts))
	partitionsCmd.Flags().BoolVarP(&allPartitions, "all", "a", false, "also list every partition: its owner (- for none), the owner's epoch and the member the ring targets")
	cmd.AddCommand(partitionsCmd)
	cmd.AddCommand(&cobra.Command{
		Use: "where JOB_ID", Short: "Show where a job ID lands: its hash, partition, ring target, owner, epoch and why (the job need not exist)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := fetch(cmd, &opts, func(ctx context.Context, c *client.Client) (api.Placement, error) { return c.Placement(ctx, args[0]) })
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, p)
			}
			return printPlacement(cmd.OutOrStdout(), p)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "storage", Short: "Show etcd's database size, quota, high-water mark, revisions, the fleet's last compaction, key counts and alarms", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := fetch(cmd, &opts, func(ctx context.Context, c *client.Client) (api.StorageReport, error) { return c.Storage(ctx) })
			if err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, r)
			}
			return printStorage(cmd.OutOrStdout(), r)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "drain --server URL", Short: "Ask the member at --server (which must be given) to hand its partitions over and leave", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Draining stops a member: it must be named, never taken from
			// the default.
			if !cmd.Flags().Changed("server") {
				return errors.New("drain stops the member it is sent to: name it with --server URL (or JOBFLEET_SERVER)")
			}
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) error { return c.Drain(ctx) }); err != nil {
				return err
			}
			base, _ := opts.baseURL() // call checked it
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, map[string]string{"status": "draining", "server": base})
			}
			fmt.Fprintln(cmd.OutOrStdout(), "draining", base)
			return nil
		},
	})
	return cmd
}

// printStorage writes the storage report as a two-column table, then one
// row per etcd endpoint.
func printStorage(w io.Writer, r api.StorageReport) error {
	size := func(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "DATABASE\t%s (in use %s)\n", size(r.DBSize), size(r.DBSizeInUse))
	fmt.Fprintf(tw, "QUOTA\t%s (%s)\n", size(r.Quota), map[string]string{
		api.QuotaFromFlag: "from --etcd-quota-bytes", api.QuotaFromEtcd: "as etcd reports it", api.QuotaFromDefault: "etcd's default",
	}[r.QuotaSource])
	state := "below: accepting new work"
	if r.AboveHighWater {
		state = "ABOVE: new jobs, larger replacements and triggers are refused (507)"
	}
	fmt.Fprintf(tw, "HIGH WATER\t%s (%g%% of the quota), %s\n", size(r.HighWaterBytes), r.HighWater*100, state)
	fmt.Fprintf(tw, "REVISION\t%d\n", r.Revision)
	switch {
	case r.Compaction != nil:
		fmt.Fprintf(tw, "COMPACTED\t%d (%d revisions kept), by %s at %s\n", r.CompactedRevision, r.Revision-r.CompactedRevision,
			r.Compaction.Member, r.Compaction.At.Format(time.RFC3339))
	case r.CompactionInterval == 0:
		fmt.Fprintf(tw, "COMPACTED\tunknown: compaction is left to etcd (a negative --compaction-interval)\n")
	default:
		fmt.Fprintf(tw, "COMPACTED\tnot yet (the fleet compacts every %v)\n", r.CompactionInterval)
	}
	if r.CompactionInterval > 0 {
		fmt.Fprintf(tw, "COMPACTION\tevery %v, keeping that much history\n", r.CompactionInterval)
	}
	fmt.Fprintf(tw, "KEYS\t%d jobs (with pending triggers), %d runs (%d active, %d failing), %d in all\n", r.Keys.Jobs, r.Keys.Runs, r.Keys.ActiveRuns, r.Keys.FailingRuns, r.Keys.Total)
	if h := r.History; h != nil {
		fmt.Fprintf(tw, "HISTORY\t%s in %d runs on %s's %d partitions (their budget share %s); the fleet's is the sum over the members\n",
			size(h.Bytes), h.Runs, h.Member, h.Partitions, size(h.BudgetBytes))
	}
	alarms := "none"
	if len(r.Alarms) > 0 {
		var as []string
		for _, a := range r.Alarms {
			as = append(as, a.Alarm+" on etcd member "+a.Member)
		}
		alarms = strings.Join(as, ", ")
	}
	fmt.Fprintf(tw, "ALARMS\t%s\n", alarms)
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "ENDPOINT\tDATABASE\tIN USE\tERROR")
	for _, e := range r.Endpoints {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Endpoint, size(e.DBSize), size(e.DBSizeInUse), e.Error)
	}
	return tw.Flush()
}

// printPlacement writes a placement as a two-column table.
func printPlacement(w io.Writer, p api.Placement) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return cell(s)
	}
	exists := "yes"
	if !p.Exists {
		exists = "no (no job with this ID is stored)"
	}
	since := "-"
	if p.OwnerSince != nil {
		since = p.OwnerSince.Format(time.RFC3339)
	}
	for _, row := range [][2]string{
		{"JOB", cell(p.Job)},
		{"EXISTS", exists},
		{"HASH", p.Hash},
		{"PARTITION", fmt.Sprintf("%d of %d", p.Partition, p.Partitions)},
		{"TARGET", dash(p.Target)},
		{"OWNER", dash(p.Owner)},
		{"EPOCH", fmt.Sprint(p.Epoch)},
		{"OWNER SINCE", since},
		{"REASON", cell(p.Reason)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}
