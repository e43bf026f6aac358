package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/store"
)

// opKeys lists a nested transaction's then-branch as "put <key>" and
// "del <key>".
func opKeys(t *testing.T, op clientv3.Op) []string {
	t.Helper()
	if !op.IsTxn() {
		t.Fatalf("op is not a transaction")
	}
	_, then, _ := op.Txn()
	var out []string
	for _, o := range then {
		switch {
		case o.IsPut():
			out = append(out, "put "+string(o.KeyBytes()))
		case o.IsDelete():
			out = append(out, "del "+string(o.KeyBytes()))
		default:
			t.Fatalf("unexpected op %+v", o)
		}
	}
	return out
}

func TestRunOps(t *testing.T) {
	k := store.Keys{NS: "/ns/"}
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	run := api.Run{ID: store.RunID("a/b", at), JobID: "a/b", Partition: 3, ScheduledAt: at, Status: api.RunPending, Attempts: []api.Attempt{}}
	runKey, queueKey := k.Run(3, "a/b", at), k.Queue(3, "a/b", at)
	if want := "/ns/queue/00003/a%2Fb/"; k.QueueJobPrefix(3, "a/b") != want || queueKey[:len(want)] != want {
		t.Fatalf("QueueJobPrefix = %q, queue key %q; want prefix %q", k.QueueJobPrefix(3, "a/b"), queueKey, want)
	}

	tests := []struct {
		name string
		op   func(api.Run, []byte) clientv3.Op
		run  api.Run
		want []string
	}{
		{"create pending", k.CreateRunOp, run, []string{"put " + runKey, "put " + queueKey}},
		{"create skipped", k.CreateRunOp, withStatus(run, api.RunSkipped), []string{"put " + runKey}},
		{"update running", func(r api.Run, v []byte) clientv3.Op { return k.UpdateRunOp(r, v, 7) }, withStatus(run, api.RunRunning), []string{"put " + runKey}},
		{"update final", func(r api.Run, v []byte) clientv3.Op { return k.UpdateRunOp(r, v, 7) }, withStatus(run, api.RunSucceeded), []string{"put " + runKey, "del " + queueKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			val, err := store.EncodeRun(tt.run)
			if err != nil {
				t.Fatal(err)
			}
			op := tt.op(tt.run, val)
			got := opKeys(t, op)
			if len(got) != len(tt.want) {
				t.Fatalf("ops = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("ops = %v, want %v", got, tt.want)
				}
			}
			if want, _ := json.Marshal(tt.run); string(val) != string(want) {
				t.Errorf("EncodeRun = %s, want %s", val, want)
			}
			_, then, _ := op.Txn()
			if string(then[0].ValueBytes()) != string(val) {
				t.Errorf("stored %s, want %s", then[0].ValueBytes(), val)
			}
			cmps, _, _ := op.Txn()
			if len(cmps) != 1 || string(cmps[0].KeyBytes()) != runKey {
				t.Errorf("compare = %+v, want one on the run key", cmps)
			}
		})
	}
	failingKey := "/ns/failing/00003/a%2Fb/" + api.FormatTime(at)
	if got := opKeys(t, k.DeleteRunOp(3, "a/b", at)); len(got) != 2 || got[0] != "del "+runKey || got[1] != "del "+failingKey {
		t.Errorf("DeleteRunOp = %v, want the run's deletion and its failing-runs entry's", got)
	}
	cmps, _, _ := k.DeleteRunOp(3, "a/b", at).Txn()
	if len(cmps) != 1 || string(cmps[0].KeyBytes()) != queueKey {
		t.Errorf("DeleteRunOp compares %+v, want the queue entry's absence", cmps)
	}
}

func withStatus(r api.Run, s api.RunStatus) api.Run {
	r.Status = s
	return r
}
