// Package admintest makes admin.Members for tests of the HTTP API: a
// Member is given the parts a test uses, and a part left out answers as a
// member that has not joined the cluster (the API's 503), or has none.
// A test's own member embeds a Member and overrides what it scripts.
package admintest

import (
	"context"
	"fmt"
	"time"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/cursor"
	"github.com/jobfleet/jobfleet/store"
)

// Member is an admin.Member made of parts; its zero value has none. Safe
// for concurrent use as long as its parts are.
type Member struct {
	// View is what Members returns.
	View api.View
	// Table, if set, is what Partitions returns; nil returns
	// admin.ErrNotStarted.
	Table *api.PartitionTable
	// Jobs is the job store; nil: JobStore returns admin.ErrNotStarted.
	Jobs admin.JobStore
	// Protocol is the worker protocol; nil: WorkerProtocol returns
	// admin.ErrNotStarted.
	Protocol admin.WorkerProtocol
	// Registry is the worker registry; nil: none.
	Registry admin.WorkerRegistry
	// Auth authenticates requests; nil: none.
	Auth admin.Authenticator
	// Cluster serves the placement, overview and partition-stream
	// endpoints; nil: they return admin.ErrNotStarted.
	Cluster admin.Cluster
	// StorageReport reads etcd's storage; nil: Storage returns
	// ErrNoStorage.
	StorageReport func(ctx context.Context) (api.StorageReport, error)
	// CursorCodec signs the listings' cursors; nil: TestCursors.
	CursorCodec *cursor.Codec
	// Room, if set, is what StorageRoom returns; nil returns 0 (the room
	// of etcd's default quota).
	Room func() int64
	// Wrote, if set, is told what NoteWritten is told.
	Wrote func(bytes int64)
}

// TestCursors is the cursor codec of Members without one: a fixed key,
// so that members made by a test take each other's cursors.
var TestCursors = func() *cursor.Codec {
	c, err := cursor.New([]byte("admintest's cursor key, for tests"))
	if err != nil {
		panic(err)
	}
	return c
}()

// Cursors returns m.CursorCodec, or TestCursors.
func (m Member) Cursors() (*cursor.Codec, error) {
	if m.CursorCodec == nil {
		return TestCursors, nil
	}
	return m.CursorCodec, nil
}

// ErrNoStorage is what Storage returns without a StorageReport: etcd's
// storage is unavailable (503).
var ErrNoStorage = fmt.Errorf("%w: this member does not report storage", store.ErrUnavailable)

var _ admin.Member = Member{}

// Members returns m.View.
func (m Member) Members() api.View { return m.View }

// Partitions returns m.Table, or admin.ErrNotStarted without one.
func (m Member) Partitions() (api.PartitionTable, error) {
	if m.Table == nil {
		return api.PartitionTable{}, admin.ErrNotStarted
	}
	return *m.Table, nil
}

// Ready says the member is ready.
func (Member) Ready() (bool, string) { return true, "" }

// Healthy says the member is healthy.
func (Member) Healthy(time.Duration) error { return nil }

// Drain does nothing.
func (Member) Drain() {}

// Placement asks m.Cluster.
func (m Member) Placement(ctx context.Context, id string) (api.Placement, error) {
	if m.Cluster == nil {
		return api.Placement{}, admin.ErrNotStarted
	}
	return m.Cluster.Placement(ctx, id)
}

// Overview asks m.Cluster.
func (m Member) Overview() (api.Overview, error) {
	if m.Cluster == nil {
		return api.Overview{}, admin.ErrNotStarted
	}
	return m.Cluster.Overview()
}

// Activity asks m.Cluster.
func (m Member) Activity(ctx context.Context) (api.FleetActivity, error) {
	if m.Cluster == nil {
		return api.FleetActivity{}, admin.ErrNotStarted
	}
	return m.Cluster.Activity(ctx)
}

// Late asks m.Cluster.
func (m Member) Late(ctx context.Context) (api.LateRuns, error) {
	if m.Cluster == nil {
		return api.LateRuns{}, admin.ErrNotStarted
	}
	return m.Cluster.Late(ctx)
}

// PartitionState asks m.Cluster.
func (m Member) PartitionState() (api.PartitionStreamSnapshot, <-chan struct{}, error) {
	if m.Cluster == nil {
		return api.PartitionStreamSnapshot{}, nil, admin.ErrNotStarted
	}
	return m.Cluster.PartitionState()
}

// Storage asks m.StorageReport.
func (m Member) Storage(ctx context.Context) (api.StorageReport, error) {
	if m.StorageReport == nil {
		return api.StorageReport{}, ErrNoStorage
	}
	return m.StorageReport(ctx)
}

// JobStore returns m.Jobs.
func (m Member) JobStore() (admin.JobStore, error) {
	if m.Jobs == nil {
		return nil, admin.ErrNotStarted
	}
	return m.Jobs, nil
}

// WorkerProtocol returns m.Protocol.
func (m Member) WorkerProtocol() (admin.WorkerProtocol, error) {
	if m.Protocol == nil {
		return nil, admin.ErrNotStarted
	}
	return m.Protocol, nil
}

// StorageRoom asks m.Room, or returns 0 without one.
func (m Member) StorageRoom() int64 {
	if m.Room == nil {
		return 0
	}
	return m.Room()
}

// NoteWritten tells m.Wrote, if set.
func (m Member) NoteWritten(bytes int64) {
	if m.Wrote != nil {
		m.Wrote(bytes)
	}
}

// WorkerRegistry returns m.Registry.
func (m Member) WorkerRegistry() admin.WorkerRegistry { return m.Registry }

// Authenticator returns m.Auth.
func (m Member) Authenticator() admin.Authenticator { return m.Auth }
