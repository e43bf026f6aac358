package main

import (
	"testing"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// fakeJobsSource is a jobsSource whose answer the test sets.
type fakeJobsSource struct {
	s   *store.Etcd
	err error
}

func (f *fakeJobsSource) Jobs() (*store.Etcd, error) { return f.s, f.err }

func TestOrchestratorJobsWaitsForStart(t *testing.T) {
	src := &fakeJobsSource{err: admin.ErrNotStarted}
	jobs := orchestratorJobs(src)
	s, err := jobs()
	if err == nil || s != nil {
		t.Fatalf("before start: got store %v (nil interface: %v), error %v; want a nil store and an error", s, s == nil, err)
	}
	src.s, src.err = store.NewEtcd(etcd.Client(t), etcdtest.Namespace(t), 32, store.DefaultLimits(), nil), nil
	s, err = jobs()
	if err != nil || s != admin.JobStore(src.s) {
		t.Fatalf("after start: got %v, %v; want the orchestrator's store", s, err)
	}
}
