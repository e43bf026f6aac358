package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/bench/scale"
	"github.com/jobfleet/jobfleet/internal/settings"
)

func init() { benchCommands = append(benchCommands, newBenchScaleCmd) }

func newBenchScaleCmd() *cobra.Command {
	cfg := scale.DefaultConfig()
	var (
		jobs, members, phases, storeWriters, from string
		quota                                     int64
		bf                                        benchFlags
	)
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Measure what grows with the number of jobs: create, bytes, memory, listing, takeover, restart, herd, jittered and spread fires",
		Long: `For each job count N of --jobs and member count M of --members, starts one
embedded etcd in this process (fsync on, a fresh temporary directory each
time) and M orchestrator processes of this binary on loopback, creates N
one-off jobs through the API (POST /v1/jobs:batch when the members have it,
else one POST /v1/jobs each, --create-concurrency in flight; the report
says which), and measures: the create rate; bytes per job and per run in
etcd; the members' resident memory; the rate of listing every job (GET
/v1/jobs); a member SIGKILLed (time until its partitions are owned with
every survivor ready, and until they fire again, seen on @every 1s probe
jobs); a rolling restart of every member (misfires of the probes, want 0);
N jobs due in the same second (time until every run is durable, lag p50 and
p99 from fired_at and from visibility); the N jobs on one hourly schedule
(the same second of every hour) with a --jitter, against the herd (the most
fires in one second, fired_at − scheduled p50/p99/max); N jobs spread over N/--spread-rate
seconds, or the first --spread-jobs of them (lag); and, the members stopped, the store's limit on the filled
etcd (as bench scaling measures it), from which a store-shard model
predicts K etcd clusters. No worker runs: runs stay pending once durable. Tables go to
stdout, progress to stderr, CSV, JSON and one PNG chart per figure against
N on log-log axes (slope 1 = linear) to --out. See docs/scaling.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from != "" {
				res, err := loadScaleResults(splitList(from))
				if err != nil {
					return err
				}
				return writeBenchResult(cmd.OutOrStdout(), bf.out+"/scale", "scale", res, res.Tables(), res.Charts, res.Took)
			}
			var err error
			if cfg.Jobs, err = parseCounts(jobs); err != nil {
				return fmt.Errorf("--jobs: %w", err)
			}
			if cfg.Members, err = parseInts(members); err != nil {
				return fmt.Errorf("--members: %w", err)
			}
			if cfg.StoreWriters, err = parseInts(storeWriters); err != nil {
				return fmt.Errorf("--store-writers: %w", err)
			}
			cfg.Phases = splitList(phases)
			cfg.Fsync = !bf.noFsync
			cfg.Quota = quota
			if cfg.Binary, err = os.Executable(); err != nil {
				return fmt.Errorf("finding this binary: %w", err)
			}
			cfg.Progress = bf.progress()
			if err := cfg.Validate(); err != nil {
				return err
			}
			started := time.Now()
			res, err := scale.Run(cmd.Context(), cfg)
			if err != nil && (res == nil || len(res.Points) == 0) {
				return err
			}
			if err != nil {
				// Interrupted: the points measured so far are written.
				defer fmt.Fprintf(cmd.ErrOrStderr(), "bench scale: %v; wrote the %d points measured before\n", err, len(res.Points))
				res.Took = time.Since(started)
			}
			if err := writeBenchResult(cmd.OutOrStdout(), bf.out+"/scale", "scale", res, res.Tables(), res.Charts, res.Took); err != nil {
				return err
			}
			if err != nil {
				return err
			}
			if res.Failed() {
				return errors.New("bench scale: some measurements failed (see FAILED in the notes above)")
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&jobs, "jobs", "10k,100k", "job counts N, comma-separated (k and M suffixes: 10k, 1M)")
	fs.StringVar(&members, "members", "3", "orchestrator counts, comma-separated (at least 2: a takeover needs a survivor)")
	fs.StringVar(&phases, "phases", strings.Join(scale.AllPhases, ","), "phases run after creating the jobs: "+strings.Join(scale.AllPhases, ", "))
	fs.IntVar(&cfg.Partitions, "partitions", 0, "P (0: the orchestrator's default)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", 0, "the members' --lease-ttl (0: their default)")
	fs.IntVar(&cfg.CreateConcurrency, "create-concurrency", cfg.CreateConcurrency, "create requests in flight without the batch endpoint (with it, one batch per 8 of these)")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "jobs per batch request")
	fs.IntVar(&cfg.ListMax, "list-max", cfg.ListMax, "jobs listed for the listing rate (0: all)")
	fs.IntVar(&cfg.Probes, "probes", cfg.Probes, "@every 1s probe jobs for the takeover and the restart")
	fs.Float64Var(&cfg.SpreadRate, "spread-rate", cfg.SpreadRate, "fires per second of the spread workload (N jobs over N/rate seconds)")
	fs.DurationVar(&cfg.MinSpread, "min-spread", cfg.MinSpread, "shortest period of the spread workload")
	fs.DurationVar(&cfg.Jitter, "jitter", cfg.Jitter, "the jitter of the jitter phase's hourly jobs (0: 1m)")
	fs.IntVar(&cfg.SpreadJobs, "spread-jobs", 0, "spread only the first this many of the N jobs (over this many / --spread-rate seconds), the others staying resident: a slice of a longer spread (0: all N)")
	fs.StringVar(&storeWriters, "store-writers", joinInts(cfg.StoreWriters), "writer counts of the store-limit phase (the limit is the best)")
	fs.DurationVar(&cfg.StoreLimitDuration, "store-duration", cfg.StoreLimitDuration, "duration of each store-limit level")
	settings.BytesVar(fs, &quota, "etcd-quota-bytes", cfg.Quota, "the embedded etcd's space quota")
	fs.IntVar(&cfg.PortBase, "port-base", 0, "etcd on this port and the next, member i on port-base+10+i (0: free ports)")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for etcd's data and the members' logs (default: a temporary one)")
	fs.BoolVar(&cfg.KeepDir, "keep", false, "keep etcd's data and the logs after a successful measurement")
	fs.StringVar(&cfg.Reuse, "reuse", "", "start on the directory of a point kept with --keep (its etcd holds the jobs) instead of creating them, with one --jobs and --members (any member count); herd, spread and storelimit write into it: reuse a copy")
	bf.add(fs, "CSV, JSON and PNG files", "run etcd without fsync (faster, not honest about the store)")
	fs.StringVar(&from, "from", "", "measure nothing: print the tables and draw the charts of the points of these scale.json files of earlier runs, comma-separated (the first one's settings)")
	return cmd
}

// loadScaleResults reads scale.json files of earlier runs into one
// result: the first one's configuration, every file's points, the member
// counts of them all.
func loadScaleResults(files []string) (*scale.Result, error) {
	var res *scale.Result
	members := map[int]bool{}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("--from: %w", err)
		}
		var r scale.Result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("--from %s: %w", name, err)
		}
		if res == nil {
			res = &scale.Result{Config: r.Config}
			res.Config.Members = nil
		}
		res.Took += r.Took
		for _, p := range r.Points {
			res.Points = append(res.Points, p)
			if !members[p.Members] {
				members[p.Members] = true
				res.Config.Members = append(res.Config.Members, p.Members)
			}
		}
	}
	if res == nil || len(res.Points) == 0 {
		return nil, errors.New("--from: no points")
	}
	return res, nil
}
