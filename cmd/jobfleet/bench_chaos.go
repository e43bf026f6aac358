package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/internal/chaos"
)

func init() { benchCommands = append(benchCommands, newBenchChaosCmd) }

// errChecksFailed makes `jobfleet bench chaos` exit non-zero when the
// checker found a violation (the report says which).
var errChecksFailed = errors.New("chaos: the checker found violations (see the report above)")

func newBenchChaosCmd() *cobra.Command {
	var (
		logs          = defaultLogOptions("console")
		seed          int64
		duration      time.Duration
		dir           string
		etcdMembers   int
		orchestrators int
		workers       int
		faults        []string
		leaseTTL      time.Duration
		runLease      time.Duration
		recheck       string
		hosts         bool
		gap           time.Duration
		noisy         bool
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run a fleet of processes under injected faults and check exactly-once firing",
		Long: `chaos starts a fleet on loopback as separate processes of this binary (an
etcd cluster, orchestrators, workers) and a recorder the jobs' http
executors post to. A workload creates every-second and one-off jobs and
bursts of creates, updates and deletes, while a seeded nemesis kills,
pauses, drains and restarts orchestrators, kills workers mid-attempt, kills
the etcd leader, restarts etcd and skews an orchestrator's clock. With
--hosts (root, Linux) every process runs on a host of its own, a network
namespace, and the nemesis also partitions them: a host isolated, the fleet
split in halves, an orchestrator cut from etcd, a worker cut from its
orchestrator, the etcd leader cut from its followers, slow and lossy links.
Then it heals the fleet, lets every run finish and checks the etcd history
and the recorder's log: no fire twice, no attempt executed twice, no fire
missed outside the windows the misfire policy allows, none earlier than a
skewed clock allows, no stale report accepted, no accepted job lost, and
(--noisy-tenant) that a team flooding the fleet with writes slowed no
other team's jobs and never filled etcd. It prints a
table per fault kind and writes report.json, executions.jsonl, ops.jsonl
and one log per process into --dir. The exit status is 1 if a check failed.
See docs/reliability.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if recheck != "" {
				return recheckRun(cmd, recheck)
			}
			lg, err := logs.build()
			if err != nil {
				return err
			}
			defer lg.Sync()
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("finding this binary: %w", err)
			}
			if !cmd.Flags().Changed("seed") {
				seed = time.Now().UnixNano() % 1_000_000
			}
			if dir == "" {
				dir = filepath.Join(os.TempDir(), fmt.Sprintf("jobfleet-chaos-%d-%s", seed, time.Now().Format("20060102-150405")))
			}
			kinds, err := chaos.ParseKinds(faults)
			if err != nil {
				return err
			}
			cfg := chaos.DefaultConfig(self, dir, seed, duration)
			cfg.EtcdMembers, cfg.Orchestrators, cfg.Workers = etcdMembers, orchestrators, workers
			cfg.LeaseTTL, cfg.RunLease = leaseTTL, runLease
			cfg.Faults = kinds
			cfg.Hosts = hosts
			cfg.NoisyTenant = noisy
			if cmd.Flags().Changed("gap") {
				cfg.Gap = gap
			} else if hosts {
				cfg.Gap = chaos.HostsGap
			}
			cfg.Logger = lg
			fmt.Fprintf(cmd.OutOrStdout(), "chaos: seed %d, duration %v, files in %s\n", seed, duration, dir)
			rep, err := chaos.Run(cmd.Context(), cfg)
			if rep != nil {
				out := cmd.OutOrStdout()
				fmt.Fprintln(out)
				rep.WriteFaults(out)
				fmt.Fprintln(out)
				rep.WriteTable(out)
			}
			if err != nil {
				return err
			}
			if !rep.OK() {
				return errChecksFailed
			}
			return nil
		},
	}
	logs.register(cmd.Flags())
	fs := cmd.Flags()
	fs.Int64Var(&seed, "seed", 0, "seed of the nemesis, the workload and the recorder's failures (default: random, printed)")
	fs.DurationVar(&duration, "duration", 10*time.Minute, "how long faults are injected (the run takes about a minute more)")
	fs.StringVar(&dir, "dir", "", "directory for logs, data and the report (default: a new one under $TMPDIR)")
	fs.IntVar(&etcdMembers, "etcd-members", 3, "etcd cluster size: 1 or 3")
	fs.IntVar(&orchestrators, "orchestrators", 4, "orchestrator processes")
	fs.IntVar(&workers, "workers", 3, "worker processes")
	fs.StringSliceVar(&faults, "faults", nil, "fault kinds to inject, comma separated (default all): "+fmt.Sprint(chaos.AllKinds))
	fs.DurationVar(&leaseTTL, "lease-ttl", 2*time.Second, "orchestrators' --lease-ttl")
	fs.DurationVar(&runLease, "run-lease", 4*time.Second, "orchestrators' --run-lease")
	fs.BoolVar(&hosts, "hosts", false, "run every process on a host of its own (a Linux network namespace; needs root) and add the network faults: partitions, one-way cuts, slow and lossy links")
	fs.DurationVar(&gap, "gap", 3*time.Second, "quiet time between two faults: a random duration from gap to twice gap (default 3s, 500ms with --hosts)")
	fs.StringVar(&recheck, "recheck", "", "check the saved history of the run in this directory again, without running a fleet")
	fs.BoolVar(&noisy, "noisy-tenant", true, "while the faults last, a scoped operator and a scoped worker flood the fleet with writes (a megabyte job rewritten, paused and resumed; the largest registrations); the other tenants' jobs must keep firing and etcd must never run out of space")
	_ = fs.MarkHidden("recheck")
	return cmd
}

// recheckRun runs the checker again over a finished run's saved input and
// prints the report with the new findings.
func recheckRun(cmd *cobra.Command, dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return err
	}
	var rep chaos.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("report.json: %w", err)
	}
	updates := rep.Global.JobUpdates
	if rep.Result, err = chaos.Recheck(dir); err != nil {
		return err
	}
	rep.Global.JobUpdates = updates
	rep.WriteTable(cmd.OutOrStdout())
	if !rep.OK() {
		return errChecksFailed
	}
	return nil
}
