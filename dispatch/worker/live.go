package worker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
)

// Live output bounds.
const (
	// liveBatch is how many bytes of output waiting make a push go at
	// once, before Config.OutputPushInterval is up.
	liveBatch = 16 << 10
	// liveMax is the most bytes waiting for a push: beyond it the oldest
	// are dropped (the orchestrator counts them as skipped).
	liveMax = api.MaxOutputChunkBytes
	// liveLastPush bounds the push of the last bytes after the executor
	// returns, which the completion waits for.
	liveLastPush = time.Second
)

// livePusher sends one running attempt's output to its owner as it
// comes: at most every Config.OutputPushInterval, or as soon as liveBatch
// bytes wait, one push at a time, best-effort (a push that fails is
// dropped, and its bytes are skipped for the readers; the attempt goes
// on). Write never blocks on the network. Its Write is safe for
// concurrent use; run is its one goroutine.
type livePusher struct {
	at   *attempt
	more chan struct{} // buffer 1: bytes wait (coalesced)
	kick chan struct{} // buffer 1: liveBatch bytes wait (coalesced)

	mu      sync.Mutex // guards the fields below
	buf     []byte     // bytes not pushed yet
	dropped int64      // bytes dropped from buf's front since the last push
	stopped bool       // the orchestrator takes no more of this attempt

	sent int64 // offset of the next push (run's only)
}

func newLivePusher(at *attempt) *livePusher {
	return &livePusher{at: at, more: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
}

// Write queues b for the next push; it never fails.
func (p *livePusher) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return len(b), nil
	}
	p.buf = append(p.buf, b...)
	if over := len(p.buf) - liveMax; over > 0 {
		p.buf = p.buf[:copy(p.buf, p.buf[over:])]
		p.dropped += int64(over)
	}
	notify(p.more)
	if len(p.buf) >= liveBatch {
		notify(p.kick)
	}
	return len(b), nil
}

// notify makes a non-blocking send on c (buffer 1).
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// run pushes until ctx is done, then pushes what is left (within
// liveLastPush) and returns. Once bytes wait it pushes them
// Config.OutputPushInterval later, or at once when liveBatch wait; it
// waits on no timer while there is nothing to push.
func (p *livePusher) run(ctx context.Context) {
	w := p.at.w
	defer func() {
		last, cancel := context.WithTimeout(context.Background(), liveLastPush)
		defer cancel()
		p.push(last, true)
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.more:
		}
		t := w.cfg.Clock.NewTimer(w.cfg.OutputPushInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		case <-p.kick:
			t.Stop()
		}
		p.push(ctx, false)
	}
}

// push sends the bytes waiting, but for a last rune begun and not
// complete unless final.
func (p *livePusher) push(ctx context.Context, final bool) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	n := len(p.buf)
	if !final {
		n = completeRunes(p.buf)
	}
	// As the report's output will be: invalid bytes U+FFFD each, control
	// characters escaped, so that a live reader sees the same text.
	data := safeText(string(p.buf[:n]))
	p.buf = p.buf[:copy(p.buf, p.buf[n:])]
	skipped := p.dropped
	p.dropped = 0
	p.mu.Unlock()
	if data == "" {
		p.sent += skipped
		return
	}
	w, at := p.at.w, p.at
	req := api.OutputPush{Worker: w.cfg.ID, RunID: at.a.RunID, Attempt: at.a.Attempt, Item: at.item(), Offset: p.sent + skipped, Data: data}
	p.sent += skipped + int64(len(data))
	addr := at.ownerAddr()
	r, err := w.client.post(ctx, addr, api.PathOutput, req, w.cfg.RequestTimeout, maxOtherReplyBytes)
	stop := false
	switch {
	case err != nil:
		at.lg.Debug("live output not pushed", zap.Error(err))
	case r.status == http.StatusOK:
		var resp api.OutputPushResponse
		stop = json.Unmarshal(r.body, &resp) == nil && !resp.Held
	case r.status == http.StatusMisdirectedRequest:
		at.redirect(r.notOwner(), addr) // the next push goes there
	case r.status == http.StatusConflict, r.status == http.StatusForbidden, r.status == http.StatusNotFound:
		stop = true // the attempt is not (or no longer) this worker's there
	default:
		at.lg.Debug("live output refused", zap.Int("status", r.status), zap.Error(r.err()))
	}
	if stop {
		p.mu.Lock()
		p.stopped, p.buf = true, nil
		p.mu.Unlock()
	}
}

// completeRunes returns the length of b without a UTF-8 sequence begun at
// its end and not complete.
func completeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// liveCtxKey keys the attempt's live writer in its execution context.
type liveCtxKey struct{}

// withLive returns ctx carrying w, the writer of the attempt's live
// output.
func withLive(ctx context.Context, w io.Writer) context.Context {
	return context.WithValue(ctx, liveCtxKey{}, w)
}

// liveWriter returns the live writer ctx carries, nil if none.
func liveWriter(ctx context.Context) io.Writer {
	w, _ := ctx.Value(liveCtxKey{}).(io.Writer)
	return w
}

// lockedOutput is a handler's Run.Output: an output buffer (and its live
// writer) safe for concurrent writes.
type lockedOutput struct {
	mu  sync.Mutex
	out *outputBuffer
}

func (l *lockedOutput) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.Write(b)
}
