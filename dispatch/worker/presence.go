package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
)

// The presence stream (api.PathPresence): the worker holds one request
// open to the orchestrator it registered with last, for as long as it is
// registered, sending a line every api.PresenceTick and ending the body
// properly whenever it closes the stream itself. When the worker's
// process dies its kernel closes the connection without that end, and the
// orchestrator revokes the registration after a short grace unless a new
// stream opens: the worker's attempts are retried at once instead of one
// registration TTL later. A stream cut while the worker lives is opened
// again at once, within that grace.

// presenceTarget returns the orchestrator the presence stream belongs
// with: the one the worker registered with last, "" before that.
func (w *Worker) presenceTarget() string {
	if p := w.presenceAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// setPresenceTarget moves the presence stream to addr (registerLoop
// calls it after each successful registration).
func (w *Worker) setPresenceTarget(addr string) {
	if w.presenceTarget() == addr {
		return
	}
	w.presenceAddr.Store(&addr)
	select {
	case w.presenceNote <- struct{}{}:
	default:
	}
}

// presenceLoop keeps the presence stream open with the current target
// until ctx ends, then ends it properly. An orchestrator that answers 404
// (no presence streams: an older version) is asked again after
// noRegistryInterval, one that answers 409 (no registration seen yet)
// after registerRetryInterval; a stream that fails is opened again at
// once, then with back-off if it keeps failing.
func (w *Worker) presenceLoop(ctx context.Context) {
	bo := newBackOff(w.cfg.RetryInitial, w.cfg.RetryMax)
	failures := 0
	for {
		addr := w.presenceTarget()
		if addr == "" {
			select {
			case <-ctx.Done():
				return
			case <-w.presenceNote:
			}
			continue
		}
		lg := w.lg.With(zap.String("orchestrator", addr))
		opened := w.cfg.Clock.Now()
		status, err := w.holdPresence(ctx, addr)
		if ctx.Err() != nil {
			return
		}
		lg.Debug("presence stream ended", zap.Int("status", status), zap.Error(err))
		wait := time.Duration(0)
		switch {
		case err == nil && status == http.StatusOK: // ended on purpose: moved to another target
			failures = 0
			bo.Reset()
			continue
		case status == http.StatusOK && !errors.Is(err, errPresenceEnded) && w.cfg.Clock.Since(opened) > api.PresenceTick:
			// The connection of a stream that was running failed: open it
			// again at once, before the orchestrator's grace ends.
			failures = 0
			bo.Reset()
			continue
		case err == nil && status == http.StatusNotFound:
			lg.Debug("orchestrator keeps no presence streams; the worker's death is known one registration TTL later there")
			wait = noRegistryInterval
		case err == nil && status == http.StatusConflict:
			wait = registerRetryInterval
		default:
			failures++
			if failures > 1 {
				wait = bo.Next()
			}
			if failures == 2 {
				lg.Warn("presence stream keeps failing; backing off", zap.Int("status", status), zap.Error(err))
			}
		}
		if wait > 0 && !w.presenceWait(ctx, addr, wait) {
			return
		}
	}
}

// presenceWait waits d, or until the target moves from addr; false if
// ctx ended.
func (w *Worker) presenceWait(ctx context.Context, addr string, d time.Duration) bool {
	t := w.cfg.Clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.Chan():
			return true
		case <-w.presenceNote:
			if w.presenceTarget() != addr {
				return true
			}
		}
	}
}

// presenceClient returns the client presence streams are sent with: hc
// with a copy of its transport that never reuses an idle connection, when
// that transport is an *http.Transport (else hc itself). A stream sent on
// a pooled connection that the other side closed meanwhile (a proxy
// recycling connections, the cut the stream reopens after) would fail
// only once the body's next line is written: net/http waits for the
// body's writer before it reports the connection's end, and the stream's
// body is silent until the orchestrator accepts it (presenceAnswerTimeout
// later), past the orchestrator's grace. A stream is one long request per
// registration, so a connection of its own costs nothing.
func presenceClient(hc *http.Client) *http.Client {
	tr, ok := hc.Transport.(*http.Transport)
	if hc.Transport == nil {
		tr, ok = http.DefaultTransport.(*http.Transport)
	}
	if !ok {
		return hc
	}
	tr = tr.Clone()
	tr.DisableKeepAlives = true
	c := *hc
	c.Transport = tr
	return &c
}

// presenceAnswerTimeout bounds the wait for the orchestrator's answer to
// a stream's hello. An orchestrator that does not read the stream (one of
// an older version, whose 404 comes only once the body has ended) or is
// too slow to check the registration is answered by the body's end.
const presenceAnswerTimeout = 3 * time.Second

// holdPresence holds one presence stream with addr until ctx ends or the
// target moves (then it ends the body properly and waits for the reply's
// end), or the orchestrator ends it, refuses it, or the connection fails.
// It returns the reply's status (0 without one) and the error that ended
// the stream, if any.
//
// The body's first line is the hello; the ticks follow only once the
// orchestrator accepted the stream, with 200 at once, keeping the reply
// open until the body ends: a connection that dies is then noticed at
// once here too (reading the reply fails), and the stream is opened again
// well within the orchestrator's grace.
func (w *Worker) holdPresence(ctx context.Context, addr string) (int, error) {
	pr, pw := io.Pipe()
	// Not under ctx: cancelling the request would cut the connection,
	// which is what a dead process does. The stream ends with the body.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	req, err := w.client.newRequest(rctx, http.MethodPost, strings.TrimRight(addr, "/")+api.PathPresence, pr)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	accepted := make(chan struct{})
	writerDone := make(chan error, 1)
	stopWriter := make(chan struct{})
	go func() { writerDone <- w.presenceWriter(pw, accepted, stopWriter) }() // ends when stopped or a write fails
	writerExited := false
	waitWriter := func() { // only this goroutine calls it
		if !writerExited {
			close(stopWriter)
			<-writerDone
			writerExited = true
		}
	}
	defer func() {
		pw.CloseWithError(errPresenceOver) // a no-op after a proper end; unblocks a write
		waitWriter()
	}()
	// endBody ends the body properly and waits for what follows (the
	// reply, or its end) up to RequestTimeout, then gives up on it.
	endBody := func(wait <-chan struct{}) {
		waitWriter()
		pw.Close()
		t := w.cfg.Clock.NewTimer(w.cfg.RequestTimeout)
		defer t.Stop()
		select {
		case <-wait:
		case <-t.Chan():
			cancel()
			<-wait
		}
	}

	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan struct{})
	var ans answer
	go func() { // ends when Do does: with the answer, or when rctx is cancelled
		defer close(answered)
		ans.resp, ans.err = w.presenceHC.Do(req)
	}()
	t := w.cfg.Clock.NewTimer(presenceAnswerTimeout)
	select {
	case <-answered:
	case <-t.Chan():
		endBody(answered)
	case <-ctx.Done():
		endBody(answered)
	}
	t.Stop()
	if ans.err != nil {
		return 0, ans.err
	}
	resp := ans.resp
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || writerExited {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxOtherReplyBytes))
		return resp.StatusCode, nil
	}
	close(accepted)
	replyDone := make(chan struct{})
	var replyErr error
	go func() { // ends when the reply does: the orchestrator ended it, or the connection failed
		defer close(replyDone)
		_, replyErr = io.Copy(io.Discard, io.LimitReader(resp.Body, maxOtherReplyBytes))
	}()
	for {
		select {
		case <-ctx.Done():
			endBody(replyDone)
			return http.StatusOK, replyErr
		case <-w.presenceNote:
			if w.presenceTarget() != addr {
				endBody(replyDone)
				return http.StatusOK, replyErr
			}
		case <-replyDone: // the orchestrator ended the stream, or the connection failed
			if replyErr == nil {
				replyErr = errPresenceEnded
			}
			return http.StatusOK, replyErr
		case err := <-writerDone: // the connection failed under a write
			writerExited = true
			cancel()
			<-replyDone
			return http.StatusOK, err
		}
	}
}

// errPresenceOver closes a presence stream's body when the stream is
// over; errPresenceEnded is a stream the orchestrator ended.
var (
	errPresenceOver  = errors.New("presence stream over")
	errPresenceEnded = errors.New("the orchestrator ended the presence stream")
)

// presenceWriter writes the hello, then, once accepted closes, a line
// every tick, until stop closes or a write fails (its request failed).
func (w *Worker) presenceWriter(pw *io.PipeWriter, accepted, stop <-chan struct{}) error {
	hello, err := json.Marshal(api.PresenceHello{Worker: w.cfg.ID})
	if err != nil {
		return err
	}
	if _, err := pw.Write(append(hello, '\n')); err != nil {
		return err
	}
	select {
	case <-stop:
		return nil
	case <-accepted:
	}
	tick := w.cfg.Clock.NewTicker(api.PresenceTick)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-tick.Chan():
			if _, err := pw.Write([]byte("{}\n")); err != nil {
				return err
			}
		}
	}
}
