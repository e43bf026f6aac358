package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
)

// This file lays out job-to-job dependencies ("after"): the index of
// their edges, written by the API with the downstream job's spec, and the
// hand-overs an upstream run's end leaves for the downstream job's
// partition:
//
//	deps/<up>/<down>                     edge: <down> runs after <up>; value DepEdge (API, with <down>'s spec)
//	jobs/<p>/<down>/after/<up run id>    hand-over of <up run id>'s end to <down> (upstream owner, with the run's final status; the downstream owner fires and deletes it)
//
// <up>, <down> and <up run id> are escaped (EscapeID).

// DepEdge is the value of an edge of the dependency index: the states of
// the upstream run that fire the downstream job.
type DepEdge struct {
	On []api.RunStatus `json:"on"`
}

// Handover is the value of a hand-over key: the upstream run that ended
// and how, and when the hand-over was written.
type Handover struct {
	Cause api.RunCause `json:"caused_by"`
	// At is the upstream run's scheduled time: the downstream run's,
	// unless the downstream job has a run for it already.
	At        time.Time `json:"at"`
	CreatedAt time.Time `json:"created_at"`
}

// DepsPrefix is the prefix of every edge of the dependency index.
func (k Keys) DepsPrefix() string { return k.NS + "deps/" }

// DepsOfPrefix is the prefix of the edges from upstream job up: the
// jobs that run after it.
func (k Keys) DepsOfPrefix(up string) string { return k.DepsPrefix() + EscapeID(up) + "/" }

// Dep is the key of the edge "down runs after up".
func (k Keys) Dep(up, down string) string { return k.DepsOfPrefix(up) + EscapeID(down) }

// ParseDep splits a key under DepsPrefix into its upstream and
// downstream job IDs.
func (k Keys) ParseDep(key string) (up, down string, ok bool) {
	rest, found := strings.CutPrefix(key, k.DepsPrefix())
	if !found {
		return "", "", false
	}
	u, d, found := strings.Cut(rest, "/")
	if !found {
		return "", "", false
	}
	up, err := UnescapeID(u)
	if err != nil {
		return "", "", false
	}
	down, err = UnescapeID(d)
	if err != nil {
		return "", "", false
	}
	return up, down, true
}

// AfterPrefix is the prefix of job id's pending hand-overs.
func (k Keys) AfterPrefix(p int, id string) string { return k.Spec(p, id) + "/after/" }

// Handover is the key of the hand-over of upstream run upRun's end to
// job id (in id's partition p).
func (k Keys) Handover(p int, id, upRun string) string { return k.AfterPrefix(p, id) + EscapeID(upRun) }

// DepOps returns the writes that make the dependency index say what
// job id's after says: the edges of old (the stored job's) that after
// drops deleted, every edge of after put.
func (k Keys) DepOps(id string, old, after []api.Dependency) ([]clientv3.Op, error) {
	var ops []clientv3.Op
	for _, d := range old {
		if !slices.ContainsFunc(after, func(n api.Dependency) bool { return n.Job == d.Job }) {
			ops = append(ops, clientv3.OpDelete(k.Dep(d.Job, id)))
		}
	}
	for _, d := range after {
		on := d.On
		if len(on) == 0 {
			on = api.DefaultAfterOn
		}
		b, err := json.Marshal(DepEdge{On: on})
		if err != nil {
			return nil, err
		}
		ops = append(ops, clientv3.OpPut(k.Dep(d.Job, id), string(b)))
	}
	return ops, nil
}

// checkAfter refuses job j if its after would close a cycle with the
// edges stored: a *FieldError naming "after" and the cycle, each job in
// it running after the next ("after: cycle a -> b -> a"). It returns the
// compare that a write of j's edges must hold (no edge written since the
// read) and nil for a job without after (it cannot close a cycle).
func (s *Etcd) checkAfter(ctx context.Context, j Job) ([]clientv3.Cmp, error) {
	if len(j.After) == 0 {
		return nil, nil
	}
	resp, err := s.client.Get(ctx, s.keys.DepsPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, Classify(err)
	}
	down := map[string][]string{} // the stored edges: up -> the jobs after it
	for _, kv := range resp.Kvs {
		if u, d, ok := s.keys.ParseDep(string(kv.Key)); ok && d != j.ID {
			down[u] = append(down[u], d)
		}
	}
	ups := make([]string, len(j.After))
	for i, d := range j.After {
		ups[i] = d.Job
	}
	for i, u := range ups {
		if len(down[u]) >= api.MaxDependents {
			return nil, fieldErr(fmt.Sprintf("after[%d].job", i), "%s has %d jobs after it already, the most one job hands its runs' ends over to", quoteClipped(u), api.MaxDependents)
		}
	}
	if cycle := FindCycle(j.ID, ups, down); cycle != nil {
		return nil, fieldErr("after", "cycle %s: each job runs after the next; remove one of the dependencies", strings.Join(cycle, " -> "))
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.keys.DepsPrefix()).WithPrefix(), "<", resp.Header.Revision+1)}, nil
}

// FindCycle returns a cycle that job id running after the jobs ups
// would close, given the other jobs' edges down (upstream job -> the
// jobs that run after it; id's own are left out): id, then each job the
// previous one runs after, back to id. Nil if there is none. The cycle is
// a shortest one through id.
func FindCycle(id string, ups []string, down map[string][]string) []string {
	// Search from id along "runs after me" edges for one of ups: a path
	// id <- x1 <- ... <- u means u runs after ... after id, and id after
	// u closes the cycle.
	target := make(map[string]bool, len(ups))
	for _, u := range ups {
		target[u] = true
	}
	if target[id] {
		return []string{id, id}
	}
	prev := map[string]string{id: ""}
	queue := []string{id}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		next := slices.Clone(down[n])
		slices.Sort(next)
		for _, m := range next {
			if _, seen := prev[m]; seen {
				continue
			}
			prev[m] = n
			if target[m] {
				// m runs after prev[m], ... after id: the cycle is id ->
				// m -> prev[m] -> ... -> id.
				cycle := []string{id}
				for x := m; x != ""; x = prev[x] {
					cycle = append(cycle, x)
				}
				return cycle
			}
			queue = append(queue, m)
		}
	}
	return nil
}

// Dependents returns the jobs that run after job id, as the dependency
// index says, sorted by ID.
func (s *Etcd) Dependents(ctx context.Context, id string) ([]api.Dependency, error) {
	resp, err := s.client.Get(ctx, s.keys.DepsOfPrefix(id), clientv3.WithPrefix(), clientv3.WithLimit(4*api.MaxDependents))
	if err != nil {
		return nil, Classify(err)
	}
	out := make([]api.Dependency, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		_, d, ok := s.keys.ParseDep(string(kv.Key))
		if !ok {
			continue
		}
		var e DepEdge
		if err := json.Unmarshal(kv.Value, &e); err != nil {
			return nil, fmt.Errorf("dependency %s: %w", kv.Key, err)
		}
		out = append(out, api.Dependency{Job: d, On: e.On})
	}
	return out, nil
}
