package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/cursor"
	"github.com/jobfleet/jobfleet/store"
)

// JobStore is what the job endpoints need; *store.Etcd implements it.
// Errors are those of store.Etcd: a *api.FieldError (matching
// api.ErrInvalidJob) for invalid input, and store.ErrNotFound,
// ErrExists, ErrConflict, ErrTooLarge, ErrNoSpace, ErrHighWater or
// ErrUnavailable.
type JobStore interface {
	Create(ctx context.Context, j api.Job) (api.Job, error)
	Put(ctx context.Context, j api.Job) (stored api.Job, created bool, err error)
	WriteBatch(ctx context.Context, items []store.BatchItem, mode store.BatchMode) ([]store.BatchResult, error)
	Get(ctx context.Context, id string) (api.Job, error)
	ListPrefix(ctx context.Context, prefix, cursor string, limit int) ([]api.Job, string, error)
	ListPrefixWhere(ctx context.Context, prefix, cursor string, limit, scan int, keep func(api.Job) bool) ([]api.Job, string, error)
	Delete(ctx context.Context, id string) error
	SetPaused(ctx context.Context, id string, paused bool) (api.Job, error)
	Trigger(ctx context.Context, id string) (runID string, err error)
	Runs(ctx context.Context, id string, limit int) ([]api.Run, error)
	GetRun(ctx context.Context, runID string) (api.Run, error)
	ListFailing(ctx context.Context, q store.FailingQuery) ([]api.FailingRun, string, error)
	RequestCancel(ctx context.Context, runID, by string) (int64, error)
	AwaitCancel(ctx context.Context, runID string) (api.Run, bool, error)
	RequestRetry(ctx context.Context, runID, from, by string) (int64, error)
	AwaitRetry(ctx context.Context, runID string) (api.Run, bool, error)
	GetBackfill(ctx context.Context, id string) (store.Backfill, int64, error)
	PutBackfill(ctx context.Context, id string, b store.Backfill, prev int64) (int64, error)
	DeleteBackfill(ctx context.Context, id string) error
	RunTimes(ctx context.Context, id string, from, to time.Time) (map[int64]bool, error)
}

// Limits of the job endpoints.
const (
	// maxJobBodyBytes caps a job document in a request body; larger bodies
	// are refused with 413 before they are decoded.
	maxJobBodyBytes = api.DefaultMaxDocumentBytes
	// defaultListLimit is the page size of GET /v1/jobs and of runs
	// without ?limit.
	defaultListLimit = 100
	// maxListLimit is the largest ?limit.
	maxListLimit = 1000
	// filterScan is how many jobs a filtered listing (GET
	// /v1/jobs?paused=) reads at most per request: a page may hold fewer
	// jobs than its limit, and the cursor continues the scan.
	filterScan = 5000
	// storeTimeout bounds each request's store calls, so that an
	// unreachable etcd answers 503 instead of hanging the client.
	storeTimeout = 10 * time.Second
)

// jobsAPI serves the job and run endpoints (their routes are in the
// route table, routes.go).
//
// Job IDs are free-form, so an ID containing '/' must be sent
// percent-encoded ("/v1/jobs/a%2Fb/runs" addresses job "a/b"). ServeMux
// matches patterns against r.URL.EscapedPath() segment by segment and
// unescapes each segment, so r.PathValue returns the ID exactly, '/',
// '%', '?', '#', '+', spaces and non-ASCII characters included.
type jobsAPI struct {
	jobs     func() (JobStore, error) // Member.JobStore
	lg       *zap.Logger
	triggers *triggerLimiter
	// whyPending returns what fills in the reasons of waiting runs
	// (workerAPI.whyPending), nil without a worker registry.
	whyPending func(readerPrefix string) func(runs []api.Run, job func() (executor, selector string, ok bool))
	now        func() time.Time // the clock of next fire times
	cancelWait time.Duration    // Config.CancelWait
	cursors    listCursors      // of GET /v1/jobs and /v1/runs
	throttled  throttleCounter  // 429s by reason
	// limitStatus returns a limit key's use as this member sees it
	// (Member.LimitStatus), nil without one.
	limitStatus func(key string) (api.LimitStatus, bool)
	// limitsApplied blocks until this member's limit table reflects an
	// etcd revision (Member.WaitLimits), nil without one.
	limitsApplied func(ctx context.Context, rev int64) error
	// runWaitingFor returns the limit key a run waits for on this member
	// and how many runs waiting for it rank ahead of it there
	// (Member.RunWaitingFor), nil without one.
	runWaitingFor func(runID string) (string, int)
	// checkNotify checks a job's notify URLs against the destination
	// policy of the member's deliveries (Member.CheckNotifications), nil
	// without one.
	checkNotify func(ns []api.Notification) error
}

// checkNotifications refuses a job whose notify entries the member's
// destination policy would refuse to deliver (a *api.FieldError).
func (a *jobsAPI) checkNotifications(j api.Job) error {
	if a.checkNotify == nil {
		return nil
	}
	return a.checkNotify(j.Notify)
}

// store returns the job store and a context bounding the request's store
// calls, or writes 503 and returns ok false.
func (a *jobsAPI) store(w http.ResponseWriter, r *http.Request) (s JobStore, ctx context.Context, cancel context.CancelFunc, ok bool) {
	s, err := a.jobs()
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, "jobs are not available on this member yet: "+unavailable(err, "it"))
		return nil, nil, nil, false
	}
	ctx, cancel = context.WithTimeout(r.Context(), storeTimeout)
	return s, ctx, cancel, true
}

// jobStore is store, then pathID: the job store, a context bounding the
// request's store calls (the caller cancels it) and the path's job {id};
// or, having written the 503 or the 400, ok false.
func (a *jobsAPI) jobStore(w http.ResponseWriter, r *http.Request) (s JobStore, ctx context.Context, cancel context.CancelFunc, id string, ok bool) {
	if s, ctx, cancel, ok = a.store(w, r); !ok {
		return nil, nil, nil, "", false
	}
	if id, ok = pathID(w, r); !ok {
		cancel()
		return nil, nil, nil, "", false
	}
	return s, ctx, cancel, id, true
}

// errBodyRead marks a request body that could not be read to its end:
// the client went away or stalled mid-body. It is the client's failure
// (400), not the server's.
var errBodyRead = errors.New("reading the request body failed")

// decode reads the request's job document, capped at maxJobBodyBytes.
func decode(w http.ResponseWriter, r *http.Request) (api.Job, error) {
	body, err := readBody(w, r, maxJobBodyBytes)
	if err != nil {
		return api.Job{}, err
	}
	return api.DecodeJob(bytes.NewReader(body), maxJobBodyBytes)
}

// pathID returns the request's {id}, or writes 400 and returns false if it
// is longer than any job ID, so that it never reaches etcd (whose error
// for an oversized key would otherwise be the reply).
func pathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if len(id) > api.MaxIDBytes {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("id: %d bytes long; no job ID is longer than %d", len(id), api.MaxIDBytes))
		return "", false
	}
	return id, true
}

// reply writes doc with code, logging a reply that could not be encoded.
func (a *jobsAPI) reply(w http.ResponseWriter, r *http.Request, code int, doc any) {
	if err := WriteJSON(w, code, doc); err != nil {
		a.lg.Error("job reply failed", zap.String("method", r.Method), zap.String("path", clip(r.URL.Path)), zap.Error(err))
	}
}

func (a *jobsAPI) create(w http.ResponseWriter, r *http.Request) {
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	j, err := decode(w, r)
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	setJobID(r.Context(), j.ID)
	p, _ := auth.FromContext(r.Context())
	if err := auth.Authorize(p, api.AccessWrite, j.ID, true); err != nil {
		WriteError(w, http.StatusForbidden, err.Error())
		return
	}
	if err := authorizeAfter(r, j); err != nil {
		WriteError(w, http.StatusForbidden, err.Error())
		return
	}
	if err := a.checkNotifications(j); err != nil {
		a.fail(w, r, j.ID, err)
		return
	}
	stored, err := s.Create(ctx, j)
	if err != nil {
		a.fail(w, r, j.ID, err)
		return
	}
	a.reply(w, r, http.StatusCreated, jobFor(r, stored))
}

func (a *jobsAPI) put(w http.ResponseWriter, r *http.Request) {
	s, ctx, cancel, id, ok := a.jobStore(w, r)
	if !ok {
		return
	}
	defer cancel()
	j, err := decode(w, r)
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	switch j.ID {
	case "":
		j.ID = id
	case id:
	default:
		a.fail(w, r, id, &api.FieldError{Field: "id", Msg: fmt.Sprintf("%s differs from the ID in the path, %s; leave it out or make them equal", quoteClip(j.ID), quoteClip(id))})
		return
	}
	if err := authorizeAfter(r, j); err != nil {
		WriteError(w, http.StatusForbidden, err.Error())
		return
	}
	if err := a.checkNotifications(j); err != nil {
		a.fail(w, r, id, err)
		return
	}
	stored, created, err := s.Put(ctx, j)
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	a.reply(w, r, code, jobFor(r, stored))
}

func (a *jobsAPI) list(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if q := r.URL.Query().Get("prefix"); len(q) > api.MaxIDBytes {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("prefix: %d bytes long; no job ID is longer than %d", len(q), api.MaxIDBytes))
		return
	}
	paused, filtered, err := pausedParam(r)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	withState, err := stateParam(r)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	p, _ := auth.FromContext(r.Context())
	prefix, ok := listPrefix(p.Prefix, r.URL.Query().Get("prefix"))
	if !ok {
		a.reply(w, r, http.StatusOK, api.JobList{Jobs: []api.Job{}})
		return
	}
	after, seal, ok := a.cursors.open(w, r, jobsListing(prefix, r.URL.Query().Get("paused"), filtered))
	if !ok {
		return
	}
	var (
		jobs []api.Job
		next string
	)
	switch dl, isDL := s.(docLister); {
	case filtered:
		jobs, next, err = s.ListPrefixWhere(ctx, prefix, after, limit, filterScan, func(j api.Job) bool { return j.Paused == paused })
	case isDL && !withState:
		a.listDocs(ctx, w, r, dl, prefix, after, seal, limit)
		return
	default:
		jobs, next, err = s.ListPrefix(ctx, prefix, after, limit)
	}
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	if jobs == nil {
		jobs = []api.Job{}
	}
	if withState {
		if err := a.attachStates(ctx, s, jobs); err != nil {
			a.fail(w, r, "", err)
			return
		}
	}
	for i := range jobs {
		jobs[i] = jobFor(r, jobs[i])
	}
	a.reply(w, r, http.StatusOK, api.JobList{Jobs: jobs, NextCursor: seal(next)})
}

// jobsListing is the listing of GET /v1/jobs of the jobs under prefix
// (the credential's combined with ?prefix), paused or not if filtered:
// its cursors are valid only for the same prefix and filter.
func jobsListing(prefix, paused string, filtered bool) cursor.Listing {
	if !filtered {
		paused = ""
	}
	return cursor.Listing{Kind: "jobs", Params: []string{prefix, paused}}
}

// pausedParam returns ?paused: filtered is false if absent; else it must
// be true or false.
func pausedParam(r *http.Request) (paused, filtered bool, err error) {
	q := r.URL.Query()
	if !q.Has("paused") {
		return false, false, nil
	}
	switch v := q.Get("paused"); v {
	case "true", "false":
		return v == "true", true, nil
	default:
		return false, false, fmt.Errorf("paused: %s is not true or false", quoteClip(v))
	}
}

// listPrefix returns the prefix a listing reads: the narrower of the
// credential's prefix (cred, "" for all) and the one asked (?prefix=,
// "" for all). ok is false when they are disjoint: no job is within both.
func listPrefix(cred, asked string) (prefix string, ok bool) {
	switch {
	case strings.HasPrefix(asked, cred):
		return asked, true
	case strings.HasPrefix(cred, asked):
		return cred, true
	}
	return "", false
}

// byID serves an endpoint on the job named by the path's {id}: it supplies
// the store, a bounded context and the ID, and writes call's document with
// code (no body if the document is nil) or the error reply.
func (a *jobsAPI) byID(code int, call func(ctx context.Context, s JobStore, id string) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ctx, cancel, id, ok := a.jobStore(w, r)
		if !ok {
			return
		}
		defer cancel()
		doc, err := call(ctx, s, id)
		if err != nil {
			a.fail(w, r, id, err)
			return
		}
		if j, ok := doc.(api.Job); ok {
			doc = jobFor(r, j)
		}
		if doc == nil {
			w.WriteHeader(code)
			return
		}
		a.reply(w, r, code, doc)
	}
}

func getJob(ctx context.Context, s JobStore, id string) (any, error) { return s.Get(ctx, id) }

func deleteJob(ctx context.Context, s JobStore, id string) (any, error) {
	return nil, s.Delete(ctx, id)
}

func pauseJob(ctx context.Context, s JobStore, id string) (any, error) {
	return s.SetPaused(ctx, id, true)
}

func resumeJob(ctx context.Context, s JobStore, id string) (any, error) {
	return s.SetPaused(ctx, id, false)
}

// The etcd store serves the endpoints.
var _ JobStore = (*store.Etcd)(nil)

// jobFor returns job j as the request's caller may see it: every job
// document of a reply passes through here. Callers who may not change
// jobs (viewers) get api.Job.Redacted: the literal values of the http
// executor's headers (often credentials of the target) replaced by
// api.RedactedValue; header names and secret references stay.
func jobFor(r *http.Request, j api.Job) api.Job {
	p, _ := auth.FromContext(r.Context())
	if p.Role.Allows(api.AccessWrite) {
		return j
	}
	return j.Redacted()
}
