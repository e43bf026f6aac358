package chaos

import (
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// stepSpec returns step job id: every 3s, extract, a sharded transform
// of ShardItems items (flaky: it dies now and then, item by item), load,
// then cleanup (always) and alert (on failure) after load; every step
// posts to the recorder, which records its step, item and round.
func (w *workload) stepSpec(id string) api.Job {
	st := func(sid, endpoint string, when api.StepWhen, needs ...string) api.Step {
		return api.Step{ID: sid, Needs: needs, When: when, Executor: api.Executor{Type: api.ExecutorHTTP, URL: w.rec.URL(endpoint)}}
	}
	transform := st("transform", endpointFlaky, "", "extract")
	transform.Shards = &api.Shards{Count: max(w.cfg.ShardItems, 1)}
	transform.Retry = api.RetryPolicy{MaxAttempts: 2, InitialBackoff: api.Duration(100 * time.Millisecond)}
	return api.Job{
		ID: id, Schedule: "@every 3s", Retry: retry, Timeout: api.Duration(30 * time.Second),
		Steps: []api.Step{
			st("extract", endpointFast, ""),
			transform,
			st("load", endpointSlow, "", "transform"),
			st("cleanup", endpointFast, api.StepAlways, "load"),
			st("alert", endpointFast, api.StepOnFailure, "load"),
		},
	}
}
