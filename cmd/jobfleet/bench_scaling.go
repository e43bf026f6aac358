package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/scaling"
)

func init() { benchCommands = append(benchCommands, newBenchScalingCmd) }

func newBenchScalingCmd() *cobra.Command {
	cfg := scaling.DefaultConfig()
	var members, strategies, workloads, storeLevels, storeShares, delays string
	var bf benchFlags
	cmd := &cobra.Command{
		Use:   "scaling",
		Short: "Sharded fleet vs global lock vs no coordination, and the store's own limit, on one embedded etcd",
		Long: `Measures, on one embedded etcd (fsync on) started for the run, for
n = 1, 2, 4, 8 in-process orchestrators: a backlog drain (N one-off jobs due
at one instant: time until every run exists) and a steady load (J jobs
@every 1s: schedule lag), under three strategies: global-lock (one etcd
mutex around read-and-fire), no-coordination (everyone fires everything; the
run key's create-if-absent check counts the duplicates) and sharded
(jobfleet's orchestrators and scheduler). It also measures the store limit:
fenced batched transactions of the same shape written as fast as etcd
takes them. --delay adds a fixed round trip to every store call of the
orchestrators, modelling an etcd across a network; several delays give one
report each. Tables go to stdout, progress to stderr, CSV, JSON and PNG
charts to --out. See docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Members, err = parseInts(members); err != nil {
				return fmt.Errorf("--members: %w", err)
			}
			if cfg.StoreLimitConcurrency, err = parseInts(storeLevels); err != nil {
				return fmt.Errorf("--store-writers: %w", err)
			}
			if cfg.StoreLimitShares, err = parseInts(storeShares); err != nil {
				return fmt.Errorf("--store-shares: %w", err)
			}
			cfg.Strategies = splitList(strategies)
			cfg.Workloads = splitList(workloads)
			cfg.Fsync = !bf.noFsync
			var ds []time.Duration
			for _, s := range splitList(delays) {
				d, err := time.ParseDuration(s)
				if err != nil {
					return fmt.Errorf("--delay: %w", err)
				}
				ds = append(ds, d)
			}
			if len(ds) == 0 {
				ds = []time.Duration{0}
			}
			cfg.Progress = bf.progress()
			if err := cfg.Validate(); err != nil {
				return err
			}
			etcd, err := bench.StartEtcd(cfg.Fsync)
			if err != nil {
				return err
			}
			defer etcd.Close()
			w := cmd.OutOrStdout()
			for _, d := range ds {
				c := cfg
				c.Delay = d
				cfg.Progress.Step("scaling: delay %v per store call", d)
				res, err := scaling.RunOn(cmd.Context(), etcd.Endpoints(), c)
				if err != nil {
					return err
				}
				name := "scaling"
				if len(ds) > 1 || d > 0 {
					name = "scaling-delay-" + d.String()
				}
				dir := bf.out + "/" + name
				charts := func(dir string) ([]string, error) { return res.Charts(dir, "scaling_") }
				if err := writeBenchResult(w, dir, "scaling", res, res.Tables(), charts, res.Took); err != nil {
					return err
				}
				fmt.Fprintln(w)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&members, "members", joinInts(cfg.Members), "orchestrator counts, comma-separated")
	fs.StringVar(&strategies, "strategies", strings.Join(cfg.Strategies, ","), "strategies: global-lock, no-coordination, sharded, sharded-unbatched (sharded with no batching across partitions: the scheduler before it)")
	fs.StringVar(&workloads, "workloads", strings.Join(cfg.Workloads, ","), "workloads: drain, steady")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "P of the sharded fleet")
	fs.IntVar(&cfg.DrainJobs, "drain-jobs", cfg.DrainJobs, "N: one-off jobs of the drain workload")
	fs.IntVar(&cfg.SteadyJobs, "steady-jobs", cfg.SteadyJobs, "J: @every 1s jobs of the steady workload")
	fs.DurationVar(&cfg.SteadyWindow, "steady-window", cfg.SteadyWindow, "how long the steady workload is measured")
	fs.StringVar(&delays, "delay", "0", "round trip added to every store call (e.g. 2ms); a comma-separated list runs each")
	fs.IntVar(&cfg.FireBatch, "fire-batch", cfg.FireBatch, "runs per transaction, for every strategy")
	fs.IntVar(&cfg.LockBatches, "lock-batches", cfg.LockBatches, "transactions a global-lock holder writes per hold")
	fs.StringVar(&storeLevels, "store-writers", joinInts(cfg.StoreLimitConcurrency), "writer counts of the store-limit measurement")
	fs.StringVar(&storeShares, "store-shares", joinInts(cfg.StoreLimitShares), "partitions' fenced transactions per request in the store-limit measurement")
	fs.DurationVar(&cfg.StoreLimitDuration, "store-duration", cfg.StoreLimitDuration, "duration of each store-limit level")
	fs.IntVar(&cfg.CommitsInFlight, "commits-in-flight", 0, "sharded members' fenced writes in flight before they are batched across partitions (0: the shipped default; -1: no batching, the scheduler before it)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "lease TTL of the orchestrators")
	bf.add(fs, "CSV, JSON and PNG files", "run etcd without fsync (faster, not honest about the store)")
	return cmd
}
