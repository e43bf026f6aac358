package orchestrator

import (
	"context"
	"sync"

	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/limits"
)

// indexes are the fleet-wide documents a member's dispatcher reads from
// memory, each kept from a watch of its own: the calendars, the limit
// keys and the job dependencies.
type indexes struct {
	calendars *dispatch.CalendarCache
	limits    *limits.Table
	deps      *dispatch.DependencyCache
}

// newIndexes makes the indexes and hands them to dcfg. Errors: a cache's
// constructor's.
func (o *Orchestrator) newIndexes(dcfg *dispatch.Config) (*indexes, error) {
	var ix indexes
	var err error
	if ix.calendars, err = dispatch.NewCalendarCache(o.client, o.cfg.Namespace, o.cfg.Logger.Named("calendars")); err != nil {
		return nil, err
	}
	if ix.limits, err = limits.New(o.client, o.cfg.Namespace, o.cfg.Logger.Named("limits")); err != nil {
		return nil, err
	}
	if ix.deps, err = dispatch.NewDependencyCache(o.client, o.cfg.Namespace, o.cfg.Logger.Named("dependencies")); err != nil {
		return nil, err
	}
	dcfg.Calendars, dcfg.Limits, dcfg.Dependencies = ix.calendars, ix.limits, ix.deps
	return &ix, nil
}

// run follows each index until ctx ends, in goroutines of wg.
func (ix *indexes) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { _ = ix.calendars.Run(ctx) })
	wg.Go(func() { ix.limits.Run(ctx) })
	wg.Go(func() { _ = ix.deps.Run(ctx) })
}
