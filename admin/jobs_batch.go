package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/store"
)

// maxBatchBodyBytes caps the body of POST /v1/jobs:batch. The stored
// documents of a batch are bounded by api.MaxBatchBytes; a body may be
// larger than what it stores (white space, escapes), so the cap leaves
// room for that.
const maxBatchBodyBytes = 4 * api.MaxBatchBytes

// batch serves POST /v1/jobs:batch: decode every item, check each one's
// ID against the credential's prefix (one outside refuses the whole batch
// with 403), and write them in one transaction (store.WriteBatch). The
// reply has one result per item; if any failed, nothing was written and
// the status code is that of the failures (400 before 409).
func (a *jobsAPI) batch(w http.ResponseWriter, r *http.Request) {
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	var req api.BatchRequest
	if err := decodeBody(w, r, maxBatchBodyBytes, &req); err != nil {
		var de *api.DecodeError
		if errors.As(err, &de) {
			err = fmt.Errorf("%w; the body must be {\"jobs\": [job documents], \"mode\": \"create\" or \"apply\"}", err)
		}
		a.fail(w, r, "", err)
		return
	}
	if req.Mode == "" {
		req.Mode = string(store.BatchCreate)
	}
	items := make([]store.BatchItem, len(req.Jobs))
	ids := make([]string, len(req.Jobs))
	for i, raw := range req.Jobs {
		j, err := api.DecodeJob(bytes.NewReader(raw), maxJobBodyBytes)
		if err != nil {
			var head struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(raw, &head) // best effort, to name the item
			ids[i], items[i].Err = head.ID, err
			continue
		}
		ids[i], items[i].Job = j.ID, j
		if err := a.checkNotifications(j); err != nil {
			items[i].Err = err
		}
	}
	// The audit line names the batch's jobs, as many as fit its field.
	if len(ids) == 1 {
		setJobID(r.Context(), ids[0])
	} else {
		setJobID(r.Context(), clip(fmt.Sprintf("%d jobs: %s", len(ids), strings.Join(ids, ", "))))
	}
	// A scoped credential writes within its prefix or not at all.
	p, _ := auth.FromContext(r.Context())
	for i, id := range ids {
		if err := auth.Authorize(p, api.AccessWrite, id, true); err != nil {
			WriteError(w, http.StatusForbidden, fmt.Sprintf("item %d (id %s): %v; nothing was written", i, quoteClip(id), err))
			return
		}
	}
	// The route's cost charged the body and one key version; every
	// other item writes one more.
	chargeMore(r.Context(), 0, len(items)-1)
	results, err := s.WriteBatch(ctx, items, store.BatchMode(req.Mode))
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	reply := api.BatchReply{Results: make([]api.BatchResult, len(results))}
	failed, code := 0, http.StatusOK
	for i, res := range results {
		out := &reply.Results[i]
		out.ID = ids[i]
		switch {
		case res.Err == nil && res.Created:
			out.Status, out.Revision = http.StatusCreated, res.Job.Revision
		case res.Err == nil:
			out.Status, out.Revision = http.StatusOK, res.Job.Revision
		case errors.Is(res.Err, store.ErrBatchAborted):
			out.Status, out.Error = http.StatusFailedDependency, res.Err.Error()
		default:
			out.Status, out.Error = status(res.Err)
			failed++
		}
		if out.Status >= 400 && out.Status != http.StatusFailedDependency {
			code = worseBatchStatus(code, out.Status)
		}
	}
	if failed > 0 {
		reply.Error = fmt.Sprintf("%d of %d jobs failed; nothing was written", failed, len(results))
	}
	a.reply(w, r, code, reply)
}

// worseBatchStatus returns the status code of a failed batch with item
// failures of codes have and next: 400 before 409 before the rest
// (invalid input is what the sender must fix first).
func worseBatchStatus(have, next int) int {
	rank := func(c int) int {
		switch c {
		case http.StatusOK:
			return 0
		case http.StatusBadRequest:
			return 3
		case http.StatusConflict:
			return 2
		}
		return 1
	}
	if rank(next) > rank(have) {
		return next
	}
	return have
}
