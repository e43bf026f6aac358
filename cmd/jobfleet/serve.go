package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// httpServer is an HTTP server bound before it serves, so a taken port is
// reported at start-up.
type httpServer struct {
	srv    *http.Server
	ln     net.Listener
	done   chan error
	cancel context.CancelFunc // cancels in-flight requests' contexts
	once   sync.Once
	err    error
}

func listenHTTP(addr string, h http.Handler) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	// Requests run under a context cancelled at shutdown, so long polls
	// return at once instead of holding the shutdown for their whole wait.
	base, cancel := context.WithCancel(context.Background())
	s := &httpServer{
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
			BaseContext: func(net.Listener) context.Context { return base }},
		ln:     ln,
		done:   make(chan error, 1),
		cancel: cancel,
	}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// Addr returns the bound host:port.
func (s *httpServer) Addr() string { return s.ln.Addr().String() }

// shutdown stops accepting, lets in-flight requests finish (bounded), and
// waits for the serving goroutine.
// It is idempotent.
func (s *httpServer) shutdown() error {
	s.once.Do(func() {
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.srv.Close()
		}
		s.err = <-s.done
	})
	return s.err
}
