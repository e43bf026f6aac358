package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/soak"
	"github.com/jobfleet/jobfleet/internal/settings"
)

func init() { benchCommands = append(benchCommands, newBenchSoakCmd) }

func newBenchSoakCmd() *cobra.Command {
	cfg := soak.DefaultConfig()
	var (
		logFile       string
		quota         int64
		historyBudget int64
		bf            benchFlags
	)
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run a fleet at a steady fire rate for a long time and record etcd's size, revisions, compactions and history",
		Long: `Starts an embedded etcd (with --etcd-quota-bytes) and --members
orchestrators in this process, creates --fires-per-second jobs firing every
second, and completes every attempt at once with in-process no-op pollers.
For --duration it records, every --sample-interval, etcd's database size
and in-use size, its revision, the fleet's compacted revision and the runs
kept. It also measures what a job, a run, a revision and a member cost in
etcd. Tables go to stdout, progress to stderr, CSV, JSON and PNG charts to
--out. See docs/benchmarks.md and docs/operations.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Progress = bf.progress()
			cfg.HistoryBudget = historyBudget
			if err := cfg.Validate(); err != nil {
				return err
			}
			if logFile != "" {
				zc := zap.NewProductionConfig()
				zc.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
				zc.OutputPaths = []string{logFile}
				lg, err := zc.Build()
				if err != nil {
					return fmt.Errorf("--log-file: %w", err)
				}
				defer lg.Sync()
				cfg.Logger = lg
			}
			start := time.Now()
			etcd, err := bench.StartEtcdQuota(!bf.noFsync, quota)
			if err != nil {
				return err
			}
			defer etcd.Close()
			res, err := soak.Run(cmd.Context(), etcd.Endpoints(), cfg)
			if err != nil {
				return err
			}
			res.Fsync = !bf.noFsync
			w := cmd.OutOrStdout()
			dir := bf.out + "/soak"
			return writeBenchResult(w, dir, "soak", res, res.Tables(), res.Charts, time.Since(start))
		},
	}
	fs := cmd.Flags()
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the fleet fires")
	fs.IntVar(&cfg.FiresPerSecond, "fires-per-second", cfg.FiresPerSecond, "fire rate: this many jobs, each every second")
	fs.IntVar(&cfg.Members, "members", cfg.Members, "orchestrators")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "P")
	fs.DurationVar(&cfg.CompactionInterval, "compaction-interval", cfg.CompactionInterval, "the fleet's compaction interval (negative: none)")
	fs.IntVar(&cfg.HistoryMaxRuns, "history-max-runs", cfg.HistoryMaxRuns, "runs kept per job (0: the orchestrator's default)")
	settings.BytesVar(fs, &historyBudget, "history-budget", 0, "bytes of run documents the fleet keeps (0: the orchestrator's default)")
	fs.DurationVar(&cfg.SampleInterval, "sample-interval", cfg.SampleInterval, "how often etcd's figures are recorded")
	fs.IntVar(&cfg.Pollers, "pollers", cfg.Pollers, "no-op pollers per member")
	settings.BytesVar(fs, &quota, "etcd-quota-bytes", 8<<30, "the embedded etcd's space quota")
	bf.add(fs, "CSV, JSON and PNG files", "run etcd without fsync")
	fs.StringVar(&logFile, "log-file", "", "write the members' warnings and errors to this file (JSON lines)")
	return cmd
}
