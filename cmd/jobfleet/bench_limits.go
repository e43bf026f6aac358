package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/bench/limits"
)

func init() { benchCommands = append(benchCommands, newBenchLimitsCmd) }

func newBenchLimitsCmd() *cobra.Command {
	cfg := limits.DefaultConfig()
	var dir, fleetBinary string
	var bf benchFlags
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Attempts granted under shared limit keys against the ideal, their slots' use and wait, and the bound kept",
		Long: `Starts an embedded etcd, --members "jobfleet orchestrator" processes and
--workers "jobfleet worker" processes of --concurrency slots of this binary
on loopback, and an endpoint in this process that answers each attempt
after --attempt-time. Then, one scenario after the other, creates --jobs
one-off jobs due at one instant (after all are created) and waits until
every run is final: every job naming one limit key of max_running
--max-running; the jobs spread over --keys keys of the same max_running;
no limit at all. Each scenario's attempts per second (jobs / makespan)
are compared with the ideal: the slots (the keys' max_running in all or
the workers' slots, the smaller) / attempt time; also the slots'
utilisation, the wait from the due instant to each attempt's start, and
the most attempts of one key running at once at the endpoint, which must
not exceed max_running (the run fails if it does). Tables go to stdout,
progress to stderr, CSV and JSON to --out. See docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Progress = bf.progress()
			if !cmd.Flags().Changed("keys") && cfg.Keys > cfg.Jobs {
				cfg.Keys = cfg.Jobs // fewer jobs than the default keys: a key each
			}
			cfg.Fsync = !bf.noFsync
			bin, d, cleanup, err := childSetup("limits", dir)
			if err != nil {
				return err
			}
			defer cleanup()
			cfg.Binary, cfg.Dir = bin, d
			if fleetBinary != "" {
				cfg.Binary = fleetBinary
			}
			start := time.Now()
			res, err := limits.Run(cmd.Context(), cfg)
			if res != nil {
				if werr := writeBenchResult(cmd.OutOrStdout(), bf.out+"/limits", "limits", res, res.Tables(), res.Charts, time.Since(start)); err == nil {
					err = werr
				}
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&cfg.Members, "members", cfg.Members, "orchestrator processes")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "worker processes")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "slots of each worker (--concurrency)")
	fs.IntVar(&cfg.Jobs, "jobs", cfg.Jobs, "one-off jobs of each scenario (1 to 100000)")
	fs.DurationVar(&cfg.AttemptTime, "attempt-time", cfg.AttemptTime, "how long the endpoint takes to answer an attempt")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "limit keys the jobs of the second scenario are spread over (1 to 1000, at most --jobs; by default at most --jobs)")
	fs.IntVar(&cfg.MaxRunning, "max-running", cfg.MaxRunning, "max_running of every key")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "P")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on each scenario")
	fs.BoolVar(&cfg.NoLimitOnly, "no-limit-only", cfg.NoLimitOnly, "measure the no-limit scenario alone (the fleet's baseline)")
	fs.StringVar(&fleetBinary, "fleet-binary", "", "run the orchestrators and workers from this jobfleet binary (an earlier build, with --no-limit-only if it knows no limit keys), not this one")
	fs.StringVar(&dir, "dir", "", "directory for logs (default: a temporary one, removed at the end)")
	bf.add(fs, "CSV and JSON files", "run etcd without fsync")
	return cmd
}
