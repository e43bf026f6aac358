package workers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/workers"
)

// stream is a scripted presence stream: Next returns the lines and
// errors the test sends, in order.
type stream struct {
	next     chan result
	accepted chan struct{}
}

type result struct {
	line []byte
	err  error
}

func newStream(worker string) *stream {
	s := &stream{next: make(chan result, 8), accepted: make(chan struct{})}
	s.next <- result{line: []byte(fmt.Sprintf(`{"worker":%q}`+"\n", worker))}
	return s
}

func (s *stream) Accept() error { close(s.accepted); return nil }

func (s *stream) Next(time.Duration) ([]byte, error) {
	r := <-s.next
	return r.line, r.err
}

// serve runs Presence for s until it returns, on a goroutine; the
// returned channel has its error.
func serve(r *workers.Registry, credential string, s *stream) <-chan error {
	done := make(chan error, 1)
	go func() { done <- r.Presence(context.Background(), credential, s) }()
	return done
}

// withW1 returns member m1's registry with worker w1 registered under
// credential cred, the setting of every presence test.
func withW1(t *testing.T) (*env, *workers.Registry) {
	t.Helper()
	e := newEnv(t)
	r := e.registry("m1", workers.Config{})
	e.register(r, req("w1", "cred"))
	return e, r
}

// openW1 opens a presence stream for w1 under cred with serve and waits
// until Presence has accepted it.
func openW1(r *workers.Registry) (*stream, <-chan error) {
	s := newStream("w1")
	done := serve(r, "cred", s)
	<-s.accepted
	return s, done
}

// TestPresenceEvidence: how a stream ends decides what happens to the
// registration. Only a connection closed or reset by the worker's side,
// with no new stream within the grace, revokes it.
func TestPresenceEvidence(t *testing.T) {
	for _, tt := range []struct {
		name    string
		end     error
		revoked bool
	}{
		{"proper end", io.EOF, false},
		{"silent", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), false},
		{"closed on this side", errors.New("use of closed network connection"), false},
		{"closed mid-body", io.ErrUnexpectedEOF, true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, r := withW1(t)
			_, before, _ := e.stored("w1")
			s, done := openW1(r)
			s.next <- result{line: []byte("{}\n")}
			s.next <- result{err: tt.end}
			if tt.revoked {
				e.clock.BlockUntilContext(context.Background(), 1) // the grace's timer
				e.clock.Advance(workers.DefaultPresenceGrace)
			}
			if err := <-done; err != nil {
				t.Fatalf("Presence = %v, want nil", err)
			}
			_, _, ok := e.stored("w1")
			if ok == tt.revoked {
				t.Fatalf("registration there: %v, want %v", ok, !tt.revoked)
			}
			if ok {
				if _, after, _ := e.stored("w1"); after.create != before.create {
					t.Fatalf("registration replaced")
				}
			}
		})
	}
}

// TestPresenceReturnWithinGrace: a worker whose stream broke and that
// opens a new one before the grace ends keeps its registration.
func TestPresenceReturnWithinGrace(t *testing.T) {
	e, r := withW1(t)
	first, done := openW1(r)
	first.next <- result{err: io.ErrUnexpectedEOF}
	e.clock.BlockUntilContext(context.Background(), 1) // waiting out the grace
	second, secondDone := openW1(r)
	if err := <-done; err != nil {
		t.Fatalf("first stream: %v", err)
	}
	e.clock.Advance(time.Hour)
	if _, _, ok := e.stored("w1"); !ok {
		t.Fatal("a worker that came back within the grace was revoked")
	}
	second.next <- result{err: io.EOF}
	if err := <-secondDone; err != nil {
		t.Fatalf("second stream: %v", err)
	}
}

// TestPresenceRegistrationChanged: a registration that is no longer the
// one the stream began under (the worker registered again meanwhile) is
// not revoked.
func TestPresenceRegistrationChanged(t *testing.T) {
	e, r := withW1(t)
	s, done := openW1(r)
	s.next <- result{err: syscall.ECONNRESET}
	e.clock.BlockUntilContext(context.Background(), 1)
	// The worker deregisters and registers again: a new registration.
	if err := r.Deregister(context.Background(), api.DeregisterRequest{Worker: "w1", Credential: "cred"}); err != nil {
		t.Fatal(err)
	}
	e.register(r, req("w1", "cred"))
	_, now, _ := e.stored("w1")
	e.clock.Advance(workers.DefaultPresenceGrace)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, after, ok := e.stored("w1"); !ok || after.create != now.create {
		t.Fatal("the worker's new registration was revoked")
	}
}

// TestPresenceRefusals: a stream is refused at once, before it is
// accepted, without a valid hello, for a worker not registered, or under
// another credential.
func TestPresenceRefusals(t *testing.T) {
	_, r := withW1(t)
	for _, tt := range []struct {
		name  string
		hello string
		cred  string
		want  error
	}{
		{"no hello", "nonsense\n", "cred", dispatch.ErrBadRequest},
		{"bad worker ID", `{"worker":""}` + "\n", "cred", dispatch.ErrBadRequest},
		{"unknown field", `{"worker":"w1","workers":"w2"}` + "\n", "cred", dispatch.ErrBadRequest},
		{"key twice", `{"worker":"w2","worker":"w1"}` + "\n", "cred", dispatch.ErrBadRequest},
		{"second value", `{"worker":"w1"} {}` + "\n", "cred", dispatch.ErrBadRequest},
		{"not registered", `{"worker":"w2"}` + "\n", "cred", workers.ErrNotRegistered},
		{"another credential", `{"worker":"w1"}` + "\n", "other", workers.ErrIDTaken},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &stream{next: make(chan result, 1), accepted: make(chan struct{})}
			s.next <- result{line: []byte(tt.hello)}
			err := r.Presence(context.Background(), tt.cred, s)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Presence = %v, want %v", err, tt.want)
			}
			select {
			case <-s.accepted:
				t.Fatal("a refused stream was accepted")
			default:
			}
		})
	}
}

// TestPresenceSuperseded: a stream whose worker opened another one here
// ends at its next line, so one worker holds one stream.
func TestPresenceSuperseded(t *testing.T) {
	e, r := withW1(t)
	first, firstDone := openW1(r)
	second, secondDone := openW1(r)
	first.next <- result{line: []byte("{}\n")}
	if err := <-firstDone; err != nil {
		t.Fatalf("superseded stream: %v", err)
	}
	second.next <- result{err: io.EOF}
	if err := <-secondDone; err != nil {
		t.Fatalf("second stream: %v", err)
	}
	if _, _, ok := e.stored("w1"); !ok {
		t.Fatal("registration gone")
	}
}

// TestPresenceEndsWithoutEvidence: a line after the hello that is not a
// tick ({}), decoded as strictly as a request body, ends the stream at
// once, as does the stream's context ending (its credential revoked);
// neither revokes the registration.
func TestPresenceEndsWithoutEvidence(t *testing.T) {
	for _, tt := range []struct {
		name   string
		line   string
		cancel bool
	}{
		{"unknown field", `{"worker":"w1"}` + "\n", false},
		{"not an object", "[]\n", false},
		{"not JSON", "tick\n", false},
		{"key twice", `{"a":1,"a":1}` + "\n", false},
		{"context ended", "{}\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, r := withW1(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := newStream("w1")
			done := make(chan error, 1)
			go func() { done <- r.Presence(ctx, "cred", s) }()
			<-s.accepted
			if tt.cancel {
				cancel()
			}
			// The end that follows stays unread if the line ended the
			// stream.
			s.next <- result{line: []byte(tt.line)}
			s.next <- result{err: io.EOF}
			if err := <-done; err != nil {
				t.Fatalf("Presence = %v, want nil", err)
			}
			if got := len(s.next); got != 1 {
				t.Errorf("%d results left unread, want 1: the stream went on after %q", got, tt.line)
			}
			if _, _, ok := e.stored("w1"); !ok {
				t.Fatal("registration revoked")
			}
		})
	}
}

// TestPresenceRegisteredAgainWithinGrace: a worker whose stream broke
// and whose process registers again through this member before the grace
// ends (restarted with the same ID, registering the same way, so that the
// registration in etcd is unchanged) keeps its registration: the
// registration is proof of life.
func TestPresenceRegisteredAgainWithinGrace(t *testing.T) {
	e, r := withW1(t)
	s, done := openW1(r)
	s.next <- result{err: syscall.ECONNRESET}
	e.clock.BlockUntilContext(context.Background(), 1) // waiting out the grace
	e.register(r, req("w1", "cred"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
	case <-time.After(10 * time.Second):
		e.clock.Advance(time.Hour)
		<-done
		_, _, kept := e.stored("w1")
		t.Fatalf("the broken stream still waited out its grace after the worker registered again (registration kept: %v)", kept)
	}
	e.clock.Advance(time.Hour)
	if _, _, ok := e.stored("w1"); !ok {
		t.Fatal("a worker that registered again within the grace was revoked")
	}
}
