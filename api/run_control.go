package api

// CancelRequested is the reply of POST /v1/runs/{run_id}/cancel (202)
// when the run's partition's owner has not applied the request within
// the wait: the request is durable, and the owner applies it (a
// partition between owners: its next owner). GET /v1/runs/{run_id} shows
// the run cancelled once it has. The reply once applied (200) is the
// cancelled run.
type CancelRequested struct {
	RunID string `json:"run_id"`
	// Status is "cancel requested".
	Status string `json:"status"`
}

// StatusCancelRequested is CancelRequested.Status.
const StatusCancelRequested = "cancel requested"
