package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBenchCommands runs tiny versions of `jobfleet bench scaling`,
// `jobfleet bench soak`, `jobfleet bench scale`, `jobfleet bench
// rebalance`, `failover`, `items`, `limits` and `steps` as processes and checks their tables and
// files, so the commands cannot rot. Each writes its own directory of the
// output, so they run in parallel (up to -parallel at once), but for
// `failover`, which measures lease expiries against the clock and runs
// first, alone in this package.
func TestBenchCommands(t *testing.T) {
	out := t.TempDir()
	tests := []struct {
		name  string
		args  []string
		table string
		files []string
		// then is a second command run after the first, whose output
		// has the table too (files are checked after both).
		then []string
		// alone: not in parallel with the others.
		alone bool
	}{
		{
			name:  "scaling",
			args:  []string{"bench", "scaling", "--members=1,2", "--strategies=global-lock,sharded", "--workloads=drain", "--drain-jobs=30", "--partitions=8", "--store-writers=2", "--store-duration=200ms", "--no-fsync"},
			table: "sharded/global-lock",
			files: []string{"scaling/scaling_summary.csv", "scaling/scaling.json", "scaling/scaling_drain.png"},
		},
		{
			name:  "soak",
			args:  []string{"bench", "soak", "--duration=2s", "--fires-per-second=10", "--partitions=8", "--sample-interval=500ms", "--compaction-interval=1s", "--etcd-quota-bytes=64MiB", "--no-fsync"},
			table: "per kept run",
			files: []string{"soak/soak_summary.csv", "soak/soak_samples.csv", "soak/soak.json", "soak/soak_size.png"},
		},
		{
			name:  "scale",
			args:  []string{"bench", "scale", "--jobs=40,80", "--members=2", "--phases=list", "--partitions=8", "--etcd-quota-bytes=64MiB", "--no-fsync"},
			table: "create jobs/s",
			files: []string{"scale/scale_load.csv", "scale/scale_growth.csv", "scale/scale.json", "scale/scale_create_rate.png", "scale/scale_list_rate.png"},
			// and again from the saved run, which writes the tables and
			// charts anew
			then: []string{"bench", "scale", "--from=" + filepath.Join(out, "scale", "scale.json")},
		},
		{
			name:  "rebalance",
			args:  []string{"bench", "rebalance", "--no-gaps", "--partitions=32", "--max-members=4", "--leave-samples=1"},
			table: "join mean",
			files: []string{"rebalance/rebalance_settings.csv", "rebalance/rebalance.json", "rebalance/rebalance_movement.png"},
		},
		{
			name:  "failover",
			args:  []string{"bench", "failover", "--ttl=2s", "--members=1", "--partitions=8", "--leader-kills=1", "--etcd-down=500ms", "--crashes=1", "--stress=0", "--kills=1", "--no-fsync"},
			table: "failover p50 ms",
			files: []string{"failover/failover.csv", "failover/failover_kills.csv", "failover/failover.json", "failover/failover_time.png"},
			alone: true,
		},
		{
			name:  "items",
			args:  []string{"bench", "items", "--items=40", "--workers=2", "--concurrency=2", "--item-time=20ms", "--worker-ttl=2s", "--partitions=4", "--no-fsync"},
			table: "took / ideal",
			files: []string{"items/items.csv", "items/items.json"},
		},
		{
			name:  "items --pools",
			args:  []string{"bench", "items", "--pools=2", "--items=40", "--workers=4", "--concurrency=1", "--item-time=5ms", "--partitions=4", "--no-fsync"},
			table: "ratio to not placed",
			files: []string{"items/grants.csv", "items/items.json"},
		},
		{
			name:  "limits",
			args:  []string{"bench", "limits", "--members=2", "--workers=2", "--concurrency=2", "--jobs=12", "--keys=2", "--max-running=1", "--attempt-time=10ms", "--partitions=4", "--no-fsync"},
			table: "to no limit",
			files: []string{"limits/limits.csv", "limits/limits.json"},
		},
		{
			name:  "steps",
			args:  []string{"bench", "steps", "--chain=3", "--runs=2", "--fan-in=1", "--upstream=5", "--step-time=5ms", "--concurrency=2", "--partitions=4", "--no-fsync"},
			table: "gap p99 ms",
			files: []string{"steps/steps.csv", "steps/steps.json"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.alone {
				t.Parallel()
			}
			for _, args := range [][]string{tt.args, tt.then} {
				if args == nil {
					continue
				}
				cmd := exec.Command(binary, append(args, "--out="+out)...)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				b, err := cmd.Output()
				if err != nil {
					t.Fatalf("%v: %v\n%s\n%s", args, err, b, stderr.String())
				}
				if !strings.Contains(string(b), tt.table) {
					t.Errorf("%v: output has no %q:\n%s", args, tt.table, b)
				}
			}
			for _, f := range tt.files {
				if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
					t.Errorf("%s not written: %v", f, err)
				}
			}
		})
	}
}

func TestParseCounts(t *testing.T) {
	got, err := parseCounts("10k, 100K,1M,7")
	if err != nil || !slices.Equal(got, []int{10_000, 100_000, 1_000_000, 7}) {
		t.Errorf("parseCounts = %v, %v; want [10000 100000 1000000 7]", got, err)
	}
	for _, bad := range []string{"0", "-5k", "1G", "k", "ten"} {
		if got, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q) = %v, want an error", bad, got)
		}
	}
}
