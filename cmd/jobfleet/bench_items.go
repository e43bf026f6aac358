package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/bench/items"
)

func init() { benchCommands = append(benchCommands, newBenchItemsCmd) }

func newBenchItemsCmd() *cobra.Command {
	cfg := items.DefaultConfig()
	var dir string
	var bf benchFlags
	cmd := &cobra.Command{
		Use:   "items",
		Short: "A sharded run of many items over worker processes, against the ideal, and with a worker killed halfway",
		Long: `Starts an embedded etcd, one "jobfleet orchestrator" process and --workers
"jobfleet worker" processes of this binary on loopback, and an endpoint in
this process that answers each item after --item-time. Then creates a job
of --items shards twice and times its run until final: with every worker,
and with one worker killed (SIGKILL) once half the items succeeded. Each
is compared with the ideal, items × item time / slots (after the kill,
the rest at the remaining slots). With --pools N, measures the grant rate
instead: the workers are labelled pool=p0 … p<N-1>, and N sharded jobs of
--items items in all run at once, each placed on its pool, then the same
unplaced, and the items per second are compared. Tables go to stdout, progress to
stderr, CSV and JSON to --out. See docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Progress = bf.progress()
			cfg.Fsync = !bf.noFsync
			bin, d, cleanup, err := childSetup("items", dir)
			if err != nil {
				return err
			}
			defer cleanup()
			cfg.Binary, cfg.Dir = bin, d
			start := time.Now()
			res, err := items.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return writeBenchResult(cmd.OutOrStdout(), bf.out+"/items", "items", res, res.Tables(), res.Charts, time.Since(start))
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&cfg.Items, "items", cfg.Items, "items of the run (2 to 10000)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "worker processes (one is killed in the second run)")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "slots of each worker (--concurrency)")
	fs.DurationVar(&cfg.ItemTime, "item-time", cfg.ItemTime, "how long the endpoint takes to answer an item")
	fs.DurationVar(&cfg.WorkerTTL, "worker-ttl", 0, "the orchestrator's --worker-ttl (0: its default)")
	fs.IntVar(&cfg.Pools, "pools", cfg.Pools, "measure the grant rate instead: label the workers with this many pools (pool=p0, p1, …) and run as many sharded jobs, once each placed on its pool and once not placed (0: the sharded run and the kill)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "P")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on each run")
	fs.StringVar(&dir, "dir", "", "directory for logs (default: a temporary one, removed at the end)")
	bf.add(fs, "CSV and JSON files", "run etcd without fsync")
	return cmd
}
