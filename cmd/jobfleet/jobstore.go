package main

import (
	"errors"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/store"
)

// jobsSource is what orchestratorJobs needs of the orchestrator: Jobs
// fails with orchestrator.ErrNotStarted until Run has read the cluster's
// partition count and made the store.
type jobsSource interface {
	Jobs() (*store.Etcd, error)
}

// orchestratorJobs returns the admin.JobsFunc of a member: its
// orchestrator's job store, once there is one.
func orchestratorJobs(orch jobsSource) admin.JobsFunc {
	return func() (admin.JobStore, error) {
		s, err := orch.Jobs()
		if errors.Is(err, orchestrator.ErrNotStarted) {
			return nil, errors.New("it has not joined the cluster yet")
		}
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return s, nil
	}
}
