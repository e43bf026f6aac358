package admin

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// LimitStore is what the limit endpoints need of the job store
// (*store.Etcd has it); a store without it answers them 501.
type LimitStore interface {
	PutLimit(ctx context.Context, l api.Limit) (stored api.Limit, created bool, err error)
	GetLimit(ctx context.Context, key string) (api.Limit, error)
	DeleteLimit(ctx context.Context, key string) error
	ListLimits(ctx context.Context, prefix, cursor string, limit int) ([]api.Limit, string, error)
}

var _ LimitStore = (*store.Etcd)(nil)

// limits are the named objects of /v1/limits/{key}: PUT answers 201
// with the stored limit when created, 200 when replaced; GET and the
// listing add each key's use as this member sees it; after a DELETE
// (204), runs waiting for the key start as their workers poll and
// attempts holding it keep running.
var limits = &namedKind[api.Limit]{
	noun:    "limit",
	param:   "key",
	listing: "limits",
	maxName: api.MaxLimitKeyBytes,
	maxDoc:  api.MaxLimitBytes,
	decode:  api.DecodeLimit,
	name:    func(l *api.Limit) *string { return &l.Key },
	full:    store.ErrLimitCount,
	ops: func(s JobStore) (namedOps[api.Limit], bool) {
		ls, ok := s.(LimitStore)
		if !ok {
			return namedOps[api.Limit]{}, false
		}
		return namedOps[api.Limit]{put: ls.PutLimit, get: ls.GetLimit, del: ls.DeleteLimit, list: ls.ListLimits}, true
	},
	page: func(out []api.Limit, next string) any {
		return api.LimitList{Limits: out, NextCursor: next}
	},
	// A limit written is in effect on this member when answered: its
	// limit table has read it, so a job created here next is bounded by
	// it (other members read it within their watch's delay).
	inEffect: func(a *jobsAPI, ctx context.Context, l *api.Limit) {
		if a.limitsApplied == nil || l.Revision == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, effectWait)
		defer cancel()
		if err := a.limitsApplied(ctx, l.Revision); err != nil {
			a.lg.Warn("limit written, not yet read by this member's limit table", zap.String("key", l.Key), zap.Int64("revision", l.Revision), zap.Error(err))
		}
	},
	decorate: func(a *jobsAPI, l *api.Limit) {
		if a.limitStatus == nil {
			return
		}
		if st, ok := a.limitStatus(l.Key); ok {
			l.Status = &st
		}
	},
}

// explainLimits gives the waiting runs among runs that wait for a limit
// key on this member (their partition is owned here) that key as their
// reason, unless they have one already.
func (a *jobsAPI) explainLimits(runs []api.Run) {
	if a.runWaitingFor == nil {
		return
	}
	for i := range runs {
		r := &runs[i]
		if r.Status.Final() || r.Status == api.RunRunning && len(r.Items) == 0 || r.Reason != "" {
			continue
		}
		if k, ahead := a.runWaitingFor(r.ID); k != "" {
			r.Reason = fmt.Sprintf("waiting for limit key %s: no room, %d ahead of it (GET /v1/limits/%s)", quoteClip(k), ahead, k)
		}
	}
}
