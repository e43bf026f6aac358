package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/store"
)

// Defaults of the per-job trigger limit (Config.TriggerRate, TriggerBurst).
const (
	// DefaultTriggerRate is one trigger a second per job on each member:
	// triggers are for people and scripts running a job now, not a queue.
	DefaultTriggerRate = 1.0
	// DefaultTriggerBurst lets a job be triggered ten times at once.
	DefaultTriggerBurst = 10
	// maxTrackedJobs is how many jobs' limiters are kept before those at
	// rest (full, so the same as new ones) are dropped.
	maxTrackedJobs = 10000
)

// triggerLimiter limits the triggers of each job accepted by this member:
// a token bucket per job ID (golang.org/x/time/rate). It is per member, not
// per fleet: a client spreading triggers over n members gets up to n times
// the rate. Whatever gets through, the job's active-run cap and history
// retention bound what it stores. Safe for concurrent use.
type triggerLimiter struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	mu   sync.Mutex // guards jobs
	jobs map[string]*rate.Limiter
}

func newTriggerLimiter(perSecond float64, burst int, now func() time.Time) *triggerLimiter {
	if perSecond == 0 {
		perSecond = DefaultTriggerRate
	}
	if burst == 0 {
		burst = DefaultTriggerBurst
	}
	if now == nil {
		now = time.Now
	}
	return &triggerLimiter{rate: rate.Limit(perSecond), burst: burst, now: now, jobs: map[string]*rate.Limiter{}}
}

// allow takes a token of job id's bucket, or says how long until one is
// available.
func (l *triggerLimiter) allow(id string) (ok bool, retryAfter time.Duration) {
	if l.rate < 0 {
		return true, 0 // unlimited
	}
	now := l.now()
	l.mu.Lock()
	lim := bucketOf(l.jobs, id, maxTrackedJobs,
		func(b *rate.Limiter) bool { return b.TokensAt(now) >= float64(l.burst) },
		func() *rate.Limiter { return rate.NewLimiter(l.rate, l.burst) })
	// Taken under the lock: a bucket let go of could be forgotten as idle
	// by another job's request before its token is taken.
	wait, ok := httpserver.TakeToken(lim, now)
	l.mu.Unlock()
	return ok, wait
}

// payloadTriggerer is a JobStore that triggers with a payload
// (*store.Etcd is).
type payloadTriggerer interface {
	TriggerWith(ctx context.Context, id string, payload json.RawMessage) (string, error)
}

var _ payloadTriggerer = (*store.Etcd)(nil)

// maxTriggerBodyBytes caps the body of POST /v1/jobs/{id}/trigger: a
// payload of store.MaxTriggerPayloadBytes, and room around it.
const maxTriggerBodyBytes = store.MaxTriggerPayloadBytes + 1<<10

// trigger serves POST /v1/jobs/{id}/trigger: 202 with the run's ID, or
// 429 with Retry-After when the job was triggered too often here. An
// optional body {"payload": …} gives the run that payload instead of
// the job's.
func (a *jobsAPI) trigger(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	body, err := readBody(w, r, maxTriggerBodyBytes)
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	var req api.TriggerRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := api.Unmarshal(body, &req); err != nil {
			var de *api.DecodeError
			if errors.As(err, &de) && de.Path == "" {
				err = fmt.Errorf("%w; the body must be {\"payload\": any JSON value}, or empty", err)
			}
			a.fail(w, r, id, err)
			return
		}
		if string(bytes.TrimSpace(req.Payload)) == "null" {
			req.Payload = nil
		}
	}
	if ok, wait := a.triggers.allow(id); !ok {
		a.throttled.inc(reasonTrigger)
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		WriteError(w, http.StatusTooManyRequests, fmt.Sprintf("job %q is triggered more often than %v a second (bursts of %d) on this member; retry after %v",
			id, float64(a.triggers.rate), a.triggers.burst, wait.Round(time.Millisecond)))
		return
	}
	s, ctx, cancel, ok := a.store(w, r)
	if !ok {
		return
	}
	defer cancel()
	var runID string
	if req.Payload == nil {
		runID, err = s.Trigger(ctx, id)
	} else if pt, ok := s.(payloadTriggerer); ok {
		runID, err = pt.TriggerWith(ctx, id, req.Payload)
	} else {
		WriteError(w, http.StatusNotImplemented, "this member's store does not trigger with a payload")
		return
	}
	if errors.Is(err, store.ErrTooManyTriggers) {
		a.throttled.inc(reasonRunIDs)
		w.Header().Set("Retry-After", "1")
		WriteError(w, http.StatusTooManyRequests, err.Error())
		return
	}
	if err != nil {
		a.fail(w, r, id, err)
		return
	}
	a.reply(w, r, http.StatusAccepted, api.Triggered{RunID: runID})
}
