package admin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/workers"
	"github.com/jobfleet/jobfleet/store"
)

// WorkerPresence serves workers' presence streams; *workers.Registry
// implements it. A WorkerRegistry that does not answers them 404.
type WorkerPresence interface {
	// Presence serves one stream until it ends
	// (workers.Registry.Presence).
	Presence(ctx context.Context, credential string, s workers.PresenceStream) error
}

// maxPresenceLine bounds one line of a presence stream.
const maxPresenceLine = 4 << 10

// presence serves POST /v1/worker/presence (api.PresenceHello): a stream
// accepted is answered 200 at once and its reply ends ({}) when the
// stream does; one refused at its start is answered at once (400, 409,
// 503).
func (a *workerAPI) presence(w http.ResponseWriter, r *http.Request) {
	pr, ok := a.reg.(WorkerPresence)
	if !ok {
		WriteError(w, http.StatusNotFound, "this member keeps no worker presence streams")
		return
	}
	who, _ := auth.FromContext(r.Context())
	rc := http.NewResponseController(w)
	// The answer comes when the stream ends, however long it lasts.
	_ = rc.SetWriteDeadline(time.Time{})
	s := &presenceBody{w: w, br: bufio.NewReaderSize(r.Body, maxPresenceLine), rc: rc}
	err := pr.Presence(r.Context(), who.ID, s)
	switch {
	case s.accepted:
		_, _ = w.Write([]byte("{}")) // the end of the reply; the worker may be gone
	case err == nil:
		writeBody(w, http.StatusOK, []byte("{}"))
	case errors.Is(err, dispatch.ErrBadRequest):
		WriteError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, workers.ErrNotRegistered), errors.Is(err, workers.ErrIDTaken):
		WriteError(w, http.StatusConflict, err.Error())
	case errors.Is(err, store.ErrUnavailable):
		WriteError(w, http.StatusServiceUnavailable, err.Error())
	default:
		WriteError(w, http.StatusServiceUnavailable, publicMessage(err))
	}
}

// presenceBody reads a presence stream's lines from a request body, each
// within its timeout (the server's read timeout does not bound the
// stream).
type presenceBody struct {
	w        http.ResponseWriter
	br       *bufio.Reader
	rc       *http.ResponseController
	accepted bool
}

// Accept sends the reply's status and headers at once, keeping the body
// open: the worker reads it to learn that the stream ended.
func (b *presenceBody) Accept() error {
	if err := b.rc.EnableFullDuplex(); err != nil {
		return err
	}
	b.w.Header().Set("Content-Type", "application/json")
	b.w.WriteHeader(http.StatusOK)
	b.accepted = true
	return b.rc.Flush()
}

// wallClock sets the presence streams' read deadlines: a connection's
// deadline is on the wall clock, whatever clock the API is given.
var wallClock = clockwork.NewRealClock()

func (b *presenceBody) Next(timeout time.Duration) ([]byte, error) {
	if err := b.rc.SetReadDeadline(wallClock.Now().Add(timeout)); err != nil {
		return nil, err
	}
	line, err := b.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fmt.Errorf("%w: presence stream: a line longer than %d bytes", dispatch.ErrBadRequest, maxPresenceLine)
	case err != nil && len(line) > 0 && errors.Is(err, io.EOF):
		return line, nil // the last line, unterminated; the end follows
	case err != nil:
		return nil, err
	}
	return line, nil
}
