package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// httpServer is an HTTP server bound before it serves, so a taken port is
// reported at start-up.
type httpServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

func listenHTTP(addr string, h http.Handler) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	s := &httpServer{
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan error, 1),
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
func (s *httpServer) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
	return <-s.done
}
