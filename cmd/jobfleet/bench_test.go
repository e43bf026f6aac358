package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchCommands runs tiny versions of `jobfleet bench scaling`,
// `jobfleet bench soak` and `jobfleet bench rebalance` as processes and checks their tables and
// files, so the commands cannot rot.
func TestBenchCommands(t *testing.T) {
	out := t.TempDir()
	tests := []struct {
		name  string
		args  []string
		table string
		files []string
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
			name:  "rebalance",
			args:  []string{"bench", "rebalance", "--no-gaps", "--partitions=32", "--max-members=4", "--leave-samples=1"},
			table: "join mean",
			files: []string{"rebalance/rebalance_settings.csv", "rebalance/rebalance.json", "rebalance/rebalance_movement.png"},
		},
		{
			name:  "failover",
			args:  []string{"bench", "failover", "--ttl=2s", "--members=1", "--partitions=8", "--leader-kills=1", "--etcd-down=500ms", "--crashes=1", "--stress=0", "--no-fsync"},
			table: "failover p50 ms",
			files: []string{"failover/failover.csv", "failover/failover.json", "failover/failover_time.png"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary, append(tt.args, "--out="+out)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			b, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %v\n%s\n%s", tt.args, err, b, stderr.String())
			}
			if !strings.Contains(string(b), tt.table) {
				t.Errorf("output has no %q:\n%s", tt.table, b)
			}
			for _, f := range tt.files {
				if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
					t.Errorf("%s not written: %v", f, err)
				}
			}
		})
	}
}
