package api

import "time"

// Worker is a worker's registration, stored at Keys.Worker(ID) under a
// lease of its own that the orchestrators the worker registers with renew
// while it keeps registering (POST /v1/worker/register; package
// dispatch/workers): the key disappears one TTL after the worker's last
// contact, or at once when it deregisters on a graceful stop. It is also
// the document GET /v1/cluster/workers lists.
type Worker struct {
	// ID is the worker's ID, as it names itself in the worker protocol.
	ID string `json:"id"`
	// Credential is the ID of the credential the worker registered with:
	// the ID is bound to it (another credential may neither register nor
	// poll under this ID while the registration lives, nor for a grace
	// after it ended).
	Credential string `json:"credential"`
	// Prefix is that credential's job-ID scope, "" for all jobs: the
	// worker is handed only runs of jobs under it.
	Prefix string `json:"prefix,omitempty"`
	// Executors are the executor types the worker runs: "http", "shell"
	// and handler names.
	Executors []string `json:"executors"`
	// Labels are the worker's labels (key=value, Kubernetes' label
	// rules, at most placement.MaxLabels), which jobs' placement
	// selectors match; omitted when it has none. Its credential allowed
	// them when the registration was written.
	Labels map[string]string `json:"labels,omitempty"`
	// Concurrency is the number of attempts the worker holds at most.
	Concurrency int `json:"concurrency"`
	// Active is the number of attempts it held when the registration was
	// last written: a sample, stored at most every update interval (30s
	// by default), not at every refresh.
	Active int `json:"active"`
	// RegisteredAt is when this registration was created (a worker that
	// expired and registers again gets a new one).
	RegisteredAt time.Time `json:"registered_at"`
	// LastContact is when the registration was last written: at its
	// creation, a change of what the worker serves, or a sample of Active
	// or of Orchestrator. Refreshes that change nothing write nothing, so
	// it may be old; a listed registration's worker was in contact within
	// the last TTL.
	LastContact time.Time `json:"last_contact"`
	// Orchestrator is the ID of the member the worker registered with
	// when the registration was last written.
	Orchestrator string `json:"orchestrator"`
	// Orchestrators are the orchestrator URLs the worker says it polls;
	// omitted if it does not say.
	Orchestrators []string `json:"orchestrators,omitempty"`
}
