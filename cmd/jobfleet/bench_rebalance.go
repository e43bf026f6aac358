package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/rebalance"
)

func init() { benchCommands = append(benchCommands, newBenchRebalanceCmd) }

func newBenchRebalanceCmd() *cobra.Command {
	rc := rebalance.DefaultRingConfig()
	gc := rebalance.DefaultGapConfig()
	var noGaps bool
	var bf benchFlags
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Ring movement and balance for several settings, and measured ownership gaps on join, leave and crash",
		Long: `Computes, without any I/O, for n = 1..--max-members and P partitions,
the partitions moved on each join and leave against the ideal P/(n+1) and
the largest member's load against the average, for replication factors
20/50/100 and load bounds 1.1/1.25/1.5 (the shipped setting is marked).
Then, unless --no-gaps, runs real orchestrators on an embedded etcd and
measures how long partitions go without an owner on graceful joins,
graceful leaves and crashes. Tables go to stdout, progress to stderr, CSV,
JSON and PNG charts to --out. See docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			progress := bf.progress()
			gc.Partitions = rc.Partitions
			gc.Progress = progress
			start := time.Now()
			rings, err := rebalance.AnalyzeRings(rc, progress)
			if err != nil {
				return err
			}
			res := &rebalance.Result{Rings: rings}
			if !noGaps {
				etcd, err := bench.StartEtcd(!bf.noFsync)
				if err != nil {
					return err
				}
				defer etcd.Close()
				if res.Gaps, err = rebalance.Gaps(cmd.Context(), etcd.Endpoints(), etcd.ClientAddr(), gc); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			dir := bf.out + "/rebalance"
			return writeBenchResult(w, dir, "rebalance", res, res.Tables(), res.Charts, time.Since(start))
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&rc.Partitions, "partitions", rc.Partitions, "P")
	fs.IntVar(&rc.MaxMembers, "max-members", rc.MaxMembers, "largest member count analysed")
	fs.IntVar(&rc.LeaveSamples, "leave-samples", rc.LeaveSamples, "random leavers averaged at each member count")
	fs.IntVar(&gc.Members, "members", gc.Members, "fleet size before a member joins (measured gaps)")
	fs.IntVar(&gc.JoinLeaveReps, "join-leave-reps", gc.JoinLeaveReps, "graceful join + leave repetitions")
	fs.IntVar(&gc.CrashReps, "crash-reps", gc.CrashReps, "crash repetitions (each waits for a lease to expire)")
	fs.DurationVar(&gc.LeaseTTL, "lease-ttl", gc.LeaseTTL, "lease TTL of the measured fleet (the orchestrator's default is 5s)")
	fs.BoolVar(&noGaps, "no-gaps", false, "skip the measured part (pure ring analysis only)")
	bf.add(fs, "CSV, JSON and PNG files", "run etcd without fsync")
	return cmd
}
