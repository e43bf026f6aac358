package admin

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/store"
)

// stateReader is a JobStore that reads the scheduling states of listed
// jobs (*store.Etcd does).
type stateReader interface {
	States(ctx context.Context, jobs []api.Job) ([]*api.JobState, error)
}

var _ stateReader = (*store.Etcd)(nil)

// stateParam returns ?state: true asks a listing for each job's state and
// status (one more read per 64 jobs).
func stateParam(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("state"); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("state: %s is not true or false", quoteClip(v))
	}
}

// attachStates sets each listed job's state and status (api.Job.ApplyState).
func (a *jobsAPI) attachStates(ctx context.Context, s JobStore, jobs []api.Job) error {
	sr, ok := s.(stateReader)
	if !ok {
		return nil
	}
	states, err := sr.States(ctx, jobs)
	if err != nil {
		return err
	}
	for i := range jobs {
		jobs[i].ApplyState(states[i])
	}
	return nil
}
