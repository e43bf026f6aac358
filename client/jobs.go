package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// jobPath is the API path of job id, with id escaped as one path segment
// (IDs may hold '/'), and sub-resources after it.
func jobPath(id string, sub ...string) string {
	return strings.Join(append([]string{"/v1/jobs/" + url.PathEscape(id)}, sub...), "/")
}

// CreateJob creates job (POST /v1/jobs) and returns it as stored, with its
// partition and revision. It fails with ErrConflict if the ID exists and
// ErrBadRequest if the document is invalid.
func (c *Client) CreateJob(ctx context.Context, job api.Job) (api.Job, error) {
	return c.CreateJobJSON(ctx, mustJSON(job))
}

// CreateJobJSON is CreateJob with the job document as JSON, sent as it is
// (so that the server, not a Go struct, judges unknown or misspelt
// fields).
func (c *Client) CreateJobJSON(ctx context.Context, doc []byte) (api.Job, error) {
	var j api.Job
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/jobs", body: doc, out: &j})
	return j, err
}

// PutJob creates or replaces job.ID (PUT /v1/jobs/{id}). With a non-zero
// job.Revision it replaces only that revision, failing with ErrConflict
// if the job changed since; created reports whether the job was new.
func (c *Client) PutJob(ctx context.Context, job api.Job) (stored api.Job, created bool, err error) {
	return c.PutJobJSON(ctx, job.ID, mustJSON(job))
}

// PutJobJSON is PutJob with the job document as JSON, sent as it is; id
// must be the document's "id".
func (c *Client) PutJobJSON(ctx context.Context, id string, doc []byte) (stored api.Job, created bool, err error) {
	code, err := c.do(ctx, request{method: http.MethodPut, path: jobPath(id), body: doc, out: &stored})
	return stored, code == http.StatusCreated, err
}

// GetJob returns job id (ErrNotFound if there is none).
func (c *Client) GetJob(ctx context.Context, id string) (api.Job, error) {
	var j api.Job
	_, err := c.do(ctx, request{method: http.MethodGet, path: jobPath(id), out: &j})
	return j, err
}

// ListOptions select a page of a listing.
type ListOptions struct {
	// Limit is the page size, 1 to 1000; 0 is the server's default.
	Limit int
	// Cursor continues after the page whose NextCursor it is; "" starts
	// at the beginning.
	Cursor string
	// Prefix lists only jobs whose ID starts with it; "" lists all (within
	// the credential's prefix).
	Prefix string
	// Paused, if set, lists only the jobs paused (true) or not (false)
	// (ListJobs only). Such a page may hold fewer than Limit jobs, or none,
	// before the last: the server reads a bounded number of jobs per
	// request; continue while NextCursor is not "".
	Paused *bool
	// State asks for each job's scheduling state and status (ListJobs
	// only): one more read per 64 jobs on the server.
	State bool
}

// pageQuery returns the query of a page of a listing: limit, cursor and
// prefix, those set.
func (o ListOptions) pageQuery() url.Values {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if o.Prefix != "" {
		q.Set("prefix", o.Prefix)
	}
	return q
}

// ListJobs returns one page of jobs (GET /v1/jobs), in the API's order (by
// partition, then ID); the page's NextCursor continues it ("" on the last
// page). AllJobs reads every page.
func (c *Client) ListJobs(ctx context.Context, opts ListOptions) (api.JobList, error) {
	q := opts.pageQuery()
	if opts.Paused != nil {
		q.Set("paused", strconv.FormatBool(*opts.Paused))
	}
	if opts.State {
		q.Set("state", "true")
	}
	var page api.JobList
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/jobs", query: q, out: &page})
	return page, err
}

// AllJobs reads every page of the job listing, pageSize jobs per request
// (0: 1000), and returns the jobs in the API's order.
func (c *Client) AllJobs(ctx context.Context, pageSize int) ([]api.Job, error) {
	if pageSize <= 0 {
		pageSize = 1000
	}
	jobs := []api.Job{}
	opts := ListOptions{Limit: pageSize}
	for {
		page, err := c.ListJobs(ctx, opts)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, page.Jobs...)
		if page.NextCursor == "" {
			return jobs, nil
		}
		opts.Cursor = page.NextCursor
	}
}

// DeleteJob deletes job id; its runs are removed by its partition's owner.
// It fails with ErrNotFound if there is no such job.
func (c *Client) DeleteJob(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: jobPath(id)})
	return err
}

// PauseJob pauses job id: it does not fire until resumed (a trigger still
// runs it). It returns the job as stored.
func (c *Client) PauseJob(ctx context.Context, id string) (api.Job, error) {
	var j api.Job
	_, err := c.do(ctx, request{method: http.MethodPost, path: jobPath(id, "pause"), out: &j})
	return j, err
}

// ResumeJob resumes job id; times scheduled while it was paused are not
// made up. It returns the job as stored.
func (c *Client) ResumeJob(ctx context.Context, id string) (api.Job, error) {
	var j api.Job
	_, err := c.do(ctx, request{method: http.MethodPost, path: jobPath(id, "resume"), out: &j})
	return j, err
}

// TriggerJob fires job id now and returns the ID its run will have. Beyond
// the member's trigger rate it fails with ErrTooManyRequests (see
// Error.RetryAfter).
func (c *Client) TriggerJob(ctx context.Context, id string) (runID string, err error) {
	var t api.Triggered
	_, err = c.do(ctx, request{method: http.MethodPost, path: jobPath(id, "trigger"), out: &t})
	return t.RunID, err
}

// ListRuns returns job id's runs, newest first, at most limit of them (1
// to 1000; 0 is the server's default).
func (c *Client) ListRuns(ctx context.Context, id string, limit int) ([]api.Run, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var rl api.RunList
	_, err := c.do(ctx, request{method: http.MethodGet, path: jobPath(id, "runs"), query: q, out: &rl})
	return rl.Runs, err
}

// FailingOptions select a page of failing runs (GET /v1/runs).
type FailingOptions struct {
	ListOptions
	// Statuses are the statuses wanted, some of api.RunDead and
	// api.RunFailed; empty for both.
	Statuses []api.RunStatus
	// Since lists only runs that got their status within it, up to
	// api.FailingWindow; 0 is the server's default (the whole window).
	Since time.Duration
}

// ListFailingRuns returns one page of the runs failed or dead across the
// fleet (GET /v1/runs), within the credential's prefix, in the API's
// order (by partition, job and scheduled time); the page's NextCursor
// continues it ("" on the last page).
func (c *Client) ListFailingRuns(ctx context.Context, opts FailingOptions) (api.FailingRunList, error) {
	q := opts.pageQuery()
	if len(opts.Statuses) > 0 {
		ss := make([]string, len(opts.Statuses))
		for i, s := range opts.Statuses {
			ss[i] = string(s)
		}
		q.Set("status", strings.Join(ss, ","))
	}
	if opts.Since > 0 {
		q.Set("since", opts.Since.String())
	}
	var page api.FailingRunList
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/runs", query: q, out: &page})
	return page, err
}

// GetRun returns run runID (ErrNotFound if there is none).
func (c *Client) GetRun(ctx context.Context, runID string) (api.Run, error) {
	var r api.Run
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/runs/" + url.PathEscape(runID), out: &r})
	return r, err
}

// mustJSON encodes a document whose types always encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("client: encode " + err.Error()) // api.Job always encodes
	}
	return b
}

// Batch modes of WriteBatch.
const (
	// BatchCreate creates every job of a batch; an existing ID fails its
	// item with 409.
	BatchCreate = "create"
	// BatchApply creates or replaces every job of a batch; an item naming
	// a "revision" replaces only that revision.
	BatchApply = "apply"
)

// MaxBatchJobs is the most job documents one WriteBatch may send.
const MaxBatchJobs = api.MaxBatchJobs

// WriteBatch writes up to MaxBatchJobs job documents (JSON, sent as they
// are) in one request (POST /v1/jobs:batch), all or none, with mode
// BatchCreate or BatchApply. The reply has one result per document, in
// order. If any item failed, nothing was written: the error is an *Error
// with the status code of the failures (400, 403 or 409) and the reply
// still holds every item's result. Errors of the batch as a whole (413
// too large, 507 store nearly full, 503) come with an empty reply.
//
// Each document must be JSON (the server refuses the whole batch
// otherwise); the documents are sent as they are, not re-encoded.
func (c *Client) WriteBatch(ctx context.Context, mode string, docs []json.RawMessage) (api.BatchReply, error) {
	// The body by hand: json.Marshal would scan and compact every
	// document again, which costs as much as sending it.
	var body bytes.Buffer
	body.WriteString(`{"mode":`)
	body.Write(mustJSON(mode))
	body.WriteString(`,"jobs":[`)
	for i, d := range docs {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(d)
	}
	body.WriteString("]}")
	var reply api.BatchReply
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/jobs:batch", body: body.Bytes(), out: &reply, errOut: &reply})
	return reply, err
}

// NextFires returns job id's next count scheduled times (1 to 100; 0 is
// the server's default, 10), as its partition's owner will fire them.
func (c *Client) NextFires(ctx context.Context, id string, count int) (api.NextFires, error) {
	q := url.Values{}
	if count > 0 {
		q.Set("count", strconv.Itoa(count))
	}
	var nf api.NextFires
	_, err := c.do(ctx, request{method: http.MethodGet, path: jobPath(id, "next"), query: q, out: &nf})
	return nf, err
}

// Deliveries returns the delivery records of job id's latest
// notifications, newest first (GET /v1/jobs/{id}/notifications).
func (c *Client) Deliveries(ctx context.Context, id string) ([]api.NotificationDelivery, error) {
	var out api.NotificationDeliveries
	_, err := c.do(ctx, request{method: http.MethodGet, path: jobPath(id, "notifications"), out: &out})
	return out.Deliveries, err
}

// PreviewSchedule returns the times a job with req's schedule (or run_at)
// would fire, without storing anything (POST /v1/schedule:preview). An
// invalid request fails with ErrBadRequest, naming the field.
func (c *Client) PreviewSchedule(ctx context.Context, req api.PreviewRequest) (api.NextFires, error) {
	var nf api.NextFires
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/schedule:preview", body: req, out: &nf})
	return nf, err
}
