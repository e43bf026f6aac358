package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/store"
)

// Cluster is what the placement, overview and partition-stream endpoints
// read of the Member; *orchestrator.Orchestrator implements it. Its
// methods return (or wrap) ErrNotStarted while the member does not know
// the partition count.
type Cluster interface {
	// Placement returns where the valid job ID id lands and who owns it.
	Placement(ctx context.Context, id string) (api.Placement, error)
	// Overview returns the fleet as the member sees it.
	Overview() (api.Overview, error)
	// Activity returns every member's last hour per minute.
	Activity(ctx context.Context) (api.FleetActivity, error)
	// Late returns every member's late runs, of every job.
	Late(ctx context.Context) (api.LateRuns, error)
	// PartitionState returns every partition's placement and the member
	// view, and a channel closed when they change. Rows must not be
	// modified.
	PartitionState() (api.PartitionStreamSnapshot, <-chan struct{}, error)
}

// StreamPing is how often a partition stream sends a comment line when
// nothing changes, so that proxies and the client see the stream alive.
const StreamPing = 15 * time.Second

// streamWriteWindow is how long one write of a stream may take: the
// server's write timeout is pushed this far ahead before every write, so
// that it does not cut the stream, yet a client that stops reading is
// dropped.
const streamWriteWindow = 30 * time.Second

// clusterFailed answers an error of a Cluster method.
func (a *server) clusterFailed(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, ErrNotStarted):
		WriteError(w, http.StatusServiceUnavailable, "this member has not joined the cluster yet")
	case errors.Is(store.Classify(err), store.ErrUnavailable):
		a.cfg.Logger.Warn(what+" failed", zap.Error(err))
		WriteError(w, http.StatusServiceUnavailable, publicMessage(err))
	default:
		a.cfg.Logger.Error(what+" failed", zap.Error(err))
		WriteError(w, http.StatusInternalServerError, publicMessage(err))
	}
}

func (a *server) placement(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("job")
	if err := api.ValidateID(id); err != nil {
		WriteError(w, http.StatusBadRequest, "query parameter job: "+err.Error())
		return
	}
	c := a.m
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	pl, err := c.Placement(ctx, id)
	if err != nil {
		a.clusterFailed(w, "placement", err)
		return
	}
	WriteJSON(w, http.StatusOK, pl)
}

func (a *server) overview(w http.ResponseWriter, r *http.Request) {
	c := a.m
	ov, err := c.Overview()
	if err != nil {
		a.clusterFailed(w, "overview", err)
		return
	}
	WriteJSON(w, http.StatusOK, ov)
}

// activity serves GET /v1/cluster/activity: every registered member's
// last hour, per minute (api.FleetActivity), for the console's charts.
func (a *server) activity(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	act, err := a.m.Activity(ctx)
	if err != nil {
		a.clusterFailed(w, "activity", err)
		return
	}
	WriteJSON(w, http.StatusOK, act)
}

// late serves GET /v1/runs/late: the runs late across the fleet, the
// most late first, those of jobs the caller may read.
func (a *server) late(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	late, err := a.m.Late(ctx)
	if err != nil {
		a.clusterFailed(w, "late runs", err)
		return
	}
	p, _ := auth.FromContext(r.Context())
	late.Runs = slices.DeleteFunc(late.Runs, func(lr api.LateRun) bool { return auth.Authorize(p, api.AccessRead, lr.JobID, true) != nil })
	WriteJSON(w, http.StatusOK, late)
}

func (a *server) whoami(w http.ResponseWriter, r *http.Request) {
	p, _ := auth.FromContext(r.Context())
	WriteJSON(w, http.StatusOK, api.Whoami{Credential: p.ID, Role: string(p.Role), Prefix: p.Prefix})
}

// watchPartitions serves GET /v1/cluster/partitions/watch: an event
// stream (text/event-stream) of the partition table. It sends "snapshot"
// first, then "change" per partition whose owner, epoch or target
// changed, "members" when the member view changed, and a ": ping" comment
// every StreamPing. It reads the member's own watches (Cluster's
// PartitionState), never etcd, so streams cost no etcd watch each. It
// ends when the client goes or the server stops (the request's context).
func (a *server) watchPartitions(w http.ResponseWriter, r *http.Request) {
	c := a.m
	st, changed, err := c.PartitionState()
	if err != nil {
		a.clusterFailed(w, "partition stream", err)
		return
	}
	release, ok := a.streams.admit(w, r)
	if !ok {
		return
	}
	defer release()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy that buffers would hold the events
	w.WriteHeader(http.StatusOK)
	send := func(chunk []byte) bool {
		// An error means the connection does not support deadlines (a
		// test recorder): then there is no timeout to push.
		_ = httpserver.ExtendWriteDeadline(w, streamWriteWindow)
		if _, err := w.Write(chunk); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(streamEvent("snapshot", st)) {
		return
	}
	ping := a.cfg.Clock.NewTicker(StreamPing)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.Chan():
			if !send([]byte(": ping\n\n")) {
				return
			}
		case <-changed:
			next, ch, err := c.PartitionState()
			if err != nil {
				return
			}
			if !send(streamDiff(st, next)) {
				return
			}
			st, changed = next, ch
		}
	}
}

// streamDiff returns the events that take a stream's client from old to
// next: "members" if the member view changed, then one "change" per
// partition whose owner, epoch or target changed.
func streamDiff(old, next api.PartitionStreamSnapshot) []byte {
	var b bytes.Buffer
	if !bytes.Equal(old.Members, next.Members) {
		b.Write(streamEvent("members", next.Members))
	}
	for i, row := range next.Rows {
		if i < len(old.Rows) && old.Rows[i].Owner == row.Owner && old.Rows[i].Epoch == row.Epoch && old.Rows[i].Target == row.Target {
			continue
		}
		b.Write(streamEvent("change", row))
	}
	return b.Bytes()
}

// streamEvent formats one server-sent event with data v as one line of
// compact JSON (which holds no newline).
func streamEvent(name string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil { // cannot happen: plain documents
		data = []byte(`{}`)
	}
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", name, data)
}

// streamCap bounds the streams of one kind (partition streams, output
// streams) served at once, in all and per credential. Safe for concurrent
// use.
type streamCap struct {
	max, perCredential int
	what               string // "partition streams"

	mu    sync.Mutex // guards total and by
	total int
	by    map[string]int // streams by credential ID
}

func newStreamCap(l Limits, what string) *streamCap {
	return &streamCap{max: l.MaxStreams, perCredential: min(l.MaxStreamsPerCredential, l.MaxStreams), what: what, by: map[string]int{}}
}

// admit is acquire for the request's credential, or writes 429 (retry
// after 5 s) naming the cap reached and returns ok false.
func (s *streamCap) admit(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	p, _ := auth.FromContext(r.Context())
	release, err := s.acquire(p.ID)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		WriteError(w, http.StatusTooManyRequests, err.Error())
		return nil, false
	}
	return release, true
}

// acquire takes a slot for a stream of credential id, or says which cap
// is reached; release gives it back.
func (s *streamCap) acquire(id string) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.by[id] >= s.perCredential:
		return nil, fmt.Errorf("credential %q holds %d %s on this member already (its --max-streams-per-credential); close a console tab or retry later", id, s.by[id], s.what)
	case s.total >= s.max:
		return nil, fmt.Errorf("this member serves %d %s already (its --max-streams); retry later or on another member", s.total, s.what)
	}
	s.total++
	s.by[id]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.total--
		if s.by[id]--; s.by[id] == 0 {
			delete(s.by, id)
		}
	}, nil
}
