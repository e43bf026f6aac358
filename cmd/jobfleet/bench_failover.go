package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/bench/failover"
)

func init() { benchCommands = append(benchCommands, newBenchFailoverCmd) }

func newBenchFailoverCmd() *cobra.Command {
	cfg := failover.DefaultConfig()
	var dir string
	var bf benchFlags
	var killsOnly bool
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Crash failover time and spurious handoffs under etcd leader kills, per lease TTL",
		Long: `For each --ttl, runs --members orchestrators in this process on a
3-member etcd cluster (three "jobfleet etcd" processes of this binary, on
free loopback ports, data in --dir), then: kills the etcd leader
--leader-kills times (SIGKILL, down --etcd-down, started again) while
--stress busy processes spin, counting the partitions handed over and the
members that fenced themselves although nothing had to move; then crashes
a member --crashes times (cut off from etcd and stopped) and measures the
time until the survivors own every partition. Then, with the dead member
detector and without, it runs --kill-members "jobfleet orchestrator"
processes at the default lease TTL with --kill-jobs jobs firing every
second, and kills one with SIGKILL --kills times (another each time,
started again after): it measures the time until every partition of the
killed member is owned again and until its jobs fire again, and checks
the fires as the fault suite does. --kills-only skips the TTL grid.
Tables go to stdout, progress to stderr, CSV and JSON to --out. See
docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Progress = bf.progress()
			cfg.Fsync = !bf.noFsync
			bin, d, cleanup, err := childSetup("failover", dir)
			if err != nil {
				return err
			}
			defer cleanup()
			cfg.Binary, cfg.Dir = bin, d
			if killsOnly {
				cfg.TTLs = nil
			}
			start := time.Now()
			res, err := failover.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return writeBenchResult(cmd.OutOrStdout(), bf.out+"/failover", "failover", res, res.Tables(), res.Charts, time.Since(start))
		},
	}
	fs := cmd.Flags()
	fs.DurationSliceVar(&cfg.TTLs, "ttl", cfg.TTLs, "member lease TTLs to measure, whole seconds, comma separated")
	fs.IntVar(&cfg.Members, "members", cfg.Members, "orchestrators")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "P")
	fs.IntVar(&cfg.LeaderKills, "leader-kills", cfg.LeaderKills, "etcd leader kills per TTL")
	fs.DurationVar(&cfg.EtcdDown, "etcd-down", cfg.EtcdDown, "how long a killed etcd leader stays down")
	fs.IntVar(&cfg.Crashes, "crashes", cfg.Crashes, "member crashes per TTL")
	fs.IntVar(&cfg.Kills, "kills", cfg.Kills, "member process kills (SIGKILL) with the dead member detector, and as many without (0: none)")
	fs.IntVar(&cfg.KillMembers, "kill-members", cfg.KillMembers, "orchestrator processes of the kill measurement")
	fs.IntVar(&cfg.KillJobs, "kill-jobs", cfg.KillJobs, "jobs firing every second during the kills")
	fs.BoolVar(&killsOnly, "kills-only", false, "measure the process kills only, not the TTL grid")
	fs.IntVar(&cfg.Stress, "stress", cfg.Stress, "busy processes spinning during the leader kills")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on each wait for the fleet to settle")
	fs.IntVar(&cfg.PortBase, "port-base", 0, "first of 6 loopback ports for the etcd members (0: free ports)")
	fs.StringVar(&dir, "dir", "", "directory for etcd data and logs (default: a temporary one, removed at the end)")
	bf.add(fs, "CSV and JSON files", "run etcd without fsync")
	return cmd
}
