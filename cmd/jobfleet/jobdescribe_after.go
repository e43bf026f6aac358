package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

// dependentsOf returns the jobs that run after job id; none from a
// server that does not list them.
func dependentsOf(ctx context.Context, c *client.Client, id string) ([]api.Dependency, error) {
	d, err := c.Dependents(ctx, id)
	if errors.Is(err, client.ErrNotFound) {
		return []api.Dependency{}, nil
	}
	return d.Dependents, err
}

// printDependencies writes job describe's DEPENDENCIES section: the jobs
// the job runs after (its after) and those that run after it; nothing
// for a job with neither.
func printDependencies(w io.Writer, d described) {
	if len(d.Job.After) == 0 && len(d.Dependents) == 0 {
		return
	}
	fmt.Fprintln(w, "\nDEPENDENCIES")
	for _, dep := range d.Job.After {
		fmt.Fprintf(w, "  after %s: fires when a run of it ends %s\n", dep.Job, onText(dep.On))
	}
	for _, dep := range d.Dependents {
		fmt.Fprintf(w, "  before %s: fires it when a run of this job ends %s\n", dep.Job, onText(dep.On))
	}
}

// onText lists the states of a dependency ("succeeded" by default).
func onText(on []api.RunStatus) string {
	if len(on) == 0 {
		on = api.DefaultAfterOn
	}
	s := make([]string, len(on))
	for i, st := range on {
		s[i] = string(st)
	}
	return strings.Join(s, " or ")
}
