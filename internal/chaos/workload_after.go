package chaos

import (
	"context"
	"fmt"

	"github.com/jobfleet/jobfleet/api"
)

// chainLength is how many jobs the workload's chain of after jobs holds:
// a head every 2s on the flaky endpoint, then each job after the one
// before it (on the ends the chain lists), on jobs whose IDs hash to
// different partitions, so that hand-overs cross partitions and, with
// several members, members.
const chainLength = 3

// chainOn are the states each job of the chain fires on, after its
// predecessor: the second after every end of the head, the third after
// the second's successes only.
var chainOn = [][]api.RunStatus{nil, {api.RunSucceeded, api.RunDead}, {api.RunSucceeded}}

// createChain creates the chain of after jobs, the downstream ones first
// (so that every run of the head ends once the jobs after it exist).
func (w *workload) createChain(ctx context.Context) error {
	for i := chainLength - 1; i >= 0; i-- {
		id := fmt.Sprintf("chain-%d", i+1)
		schedule := ""
		if i == 0 {
			schedule = "@every 2s"
		}
		j := w.spec(id, jobChain, schedule, nil, "", 1)
		j.Executor.URL = w.rec.URL(endpointFlaky)
		if i > 0 {
			j.After = []api.Dependency{{Job: fmt.Sprintf("chain-%d", i), On: chainOn[i]}}
		}
		if !w.create(ctx, j, jobChain) {
			return fmt.Errorf("creating chain job %q failed", id)
		}
	}
	return nil
}
