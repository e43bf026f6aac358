package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/bench/steps"
)

func init() { benchCommands = append(benchCommands, newBenchStepsCmd) }

func newBenchStepsCmd() *cobra.Command {
	cfg := steps.DefaultConfig()
	var dir string
	var bf benchFlags
	cmd := &cobra.Command{
		Use:   "steps",
		Short: "The wait between one step's end and the next step's start, on one worker and across two, and after a fan-in",
		Long: `Starts an embedded etcd, one "jobfleet orchestrator" process and two
"jobfleet worker" processes of this binary (labelled pool=a and pool=b) on
loopback, and an endpoint in this process that answers each step after
--step-time. Then runs, one after the other, --runs jobs whose run is a
chain of --chain steps (each needing the one before) with every step on
the same worker, as many with the steps on the two workers in turn, and
--fan-in jobs of --upstream steps and one step needing them all; then
triggers --upstream runs of a job at once, each handing over to a job that
runs "after" it (--hand-overs=false: not). Reports
the gaps from one step's end to the next step's start (p50, p99, max), as
the endpoint sees them, and in a fan-in from the last upstream step's end
to the joining step's start, and for hand-overs from each upstream run's
end to the start of the downstream run it caused. Tables go to stdout, progress to stderr, CSV
and JSON to --out. See docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Progress = bf.progress()
			cfg.Fsync = !bf.noFsync
			bin, d, cleanup, err := childSetup("steps", dir)
			if err != nil {
				return err
			}
			defer cleanup()
			cfg.Binary, cfg.Dir = bin, d
			start := time.Now()
			res, err := steps.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return writeBenchResult(cmd.OutOrStdout(), bf.out+"/steps", "steps", res, res.Tables(), res.Charts, time.Since(start))
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&cfg.Chain, "chain", cfg.Chain, "steps of each chain (2 to 256)")
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "chains run in each placement")
	fs.IntVar(&cfg.FanIn, "fan-in", cfg.FanIn, "runs of the fan-in job (0: none)")
	fs.IntVar(&cfg.Upstream, "upstream", cfg.Upstream, "steps the fan-in's joining step needs, and upstream runs handed over (1 to 255)")
	fs.BoolVar(&cfg.HandOvers, "hand-overs", cfg.HandOvers, "also measure the hand-overs of --upstream runs triggered at once to a job with after")
	fs.DurationVar(&cfg.StepTime, "step-time", cfg.StepTime, "how long the endpoint takes to answer a step")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "slots of each worker (--concurrency)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "P")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on each run")
	fs.StringVar(&dir, "dir", "", "directory for logs (default: a temporary one, removed at the end)")
	bf.add(fs, "CSV and JSON files", "run etcd without fsync")
	return cmd
}
