package admin

import (
	"context"
	"errors"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/cursor"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
)

// Member is what the API needs of the orchestrator it runs in, and the
// only way it reaches it; MemberOf makes the Member of an
// *orchestrator.Orchestrator. Its methods are called from request
// goroutines, concurrently. Those returning an error return (or wrap)
// ErrNotStarted while the member has not joined the cluster (it does not
// know the partition count yet): their routes answer 503.
type Member interface {
	// Members returns the member view (GET /v1/cluster/members).
	Members() api.View
	// Partitions returns the partition table (GET
	// /v1/cluster/partitions).
	Partitions() (api.PartitionTable, error)
	// Ready answers GET /readyz: whether the member serves, or why not.
	Ready() (bool, string)
	// Healthy answers GET /healthz: an error if the member owns
	// partitions without having renewed its lease within its TTL plus
	// grace.
	Healthy(grace time.Duration) error
	// Drain makes the member hand its partitions over and leave (POST
	// /v1/cluster/drain); it does not wait.
	Drain()
	// Cluster serves the placement, overview and partition-stream
	// endpoints.
	Cluster
	// Storage reads etcd's storage as the member sees it now (GET
	// /v1/cluster/storage).
	Storage(ctx context.Context) (api.StorageReport, error)
	// JobStore returns the job store of the /v1/jobs and /v1/runs
	// endpoints.
	JobStore() (JobStore, error)
	// WorkerProtocol returns the worker protocol's server (POST
	// /v1/worker/poll, heartbeat, complete).
	WorkerProtocol() (WorkerProtocol, error)
	// WorkerRegistry returns the worker registry (POST
	// /v1/worker/register and deregister, GET /v1/cluster/workers, the
	// reasons waiting runs give); nil answers 503 for its routes, and
	// runs carry no pending reasons. Handler asks once.
	WorkerRegistry() WorkerRegistry
	// StorageRoom returns the bytes between etcd's high-water mark and
	// its quota as the member knows them now ((*storage.Monitor).Room):
	// write budgets left at 0 are sized from it (WriteBytesFor); 0 or
	// less is the room of etcd's default quota, 409.6 MiB. It is called
	// on every charge, so it must be fast.
	StorageRoom() int64
	// NoteWritten tells the member the bytes a request was charged to
	// its credential's write budgets (Limits.WriteBytes): etcd history
	// written through this member, which compacting by history size
	// counts ((*storage.Monitor).NoteWritten). It must be fast.
	NoteWritten(bytes int64)
	// Authenticator returns what authenticates requests (an
	// *auth.Cache); nil makes every route but /healthz and /readyz
	// answer 503 unless Config.Insecure. Handler asks once.
	Authenticator() Authenticator
	// Cursors returns the codec of the listings' cursors (GET /v1/jobs,
	// /v1/runs, /v1/tokens), made from the fleet's cursor key: the same
	// on every member, so that a cursor one issued works on all.
	Cursors() (*cursor.Codec, error)
}

// ErrNotStarted is what a Member returns before it has joined the
// cluster; the API answers 503.
var ErrNotStarted = orchestrator.ErrNotStarted

// unavailable returns the message of the 503 answering err, a Member's
// refusal: for ErrNotStarted, that who (the member) has not joined the
// cluster yet.
func unavailable(err error, who string) string {
	if errors.Is(err, ErrNotStarted) {
		return who + " has not joined the cluster yet"
	}
	return err.Error()
}

// MemberOf returns the Member of orchestrator o: o itself, with its job
// store and dispatcher (the worker protocol) once it has joined the
// cluster, its worker registry and its credential cache.
func MemberOf(o *orchestrator.Orchestrator) Member { return orchestratorMember{o} }

// orchestratorMember is an orchestrator as the API reaches it: the
// methods it lacks, or has with their concrete types, are added here.
type orchestratorMember struct{ *orchestrator.Orchestrator }

func (m orchestratorMember) JobStore() (JobStore, error) {
	s, err := m.Jobs()
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return s, nil
}

func (m orchestratorMember) WorkerProtocol() (WorkerProtocol, error) {
	d, err := m.Dispatcher()
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return d, nil
}

func (m orchestratorMember) WorkerRegistry() WorkerRegistry { return m.Workers() }

func (m orchestratorMember) Authenticator() Authenticator { return m.Credentials() }
