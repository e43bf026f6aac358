package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/jobfleet/jobfleet/internal/etcdserver"
)

// Etcd is an embedded single-node etcd in a temporary directory, the store
// every strategy of a run is measured against.
type Etcd struct {
	srv *etcdserver.Server
	dir string
	// Fsync tells whether the server syncs its WAL to disk (it does in
	// production).
	Fsync bool
}

// StartEtcd starts an embedded etcd in a fresh temporary directory; fsync
// false skips fsync (faster, dishonest about the store: for CI only).
func StartEtcd(fsync bool) (*Etcd, error) { return StartEtcdQuota(fsync, 0) }

// StartEtcdQuota is StartEtcd with a space quota of quota bytes (etcd's
// --quota-backend-bytes; 0 is its default, 2 GiB).
func StartEtcdQuota(fsync bool, quota int64) (*Etcd, error) {
	dir, err := os.MkdirTemp("", "jobfleet-bench-etcd-")
	if err != nil {
		return nil, err
	}
	var srv *etcdserver.Server
	for range 5 { // a free port may be taken between probing and binding
		srv, err = etcdserver.Start(etcdserver.Config{Dir: dir, NoFsync: !fsync, QuotaBackendBytes: quota})
		if err == nil {
			break
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: start etcd: %w", err)
	}
	return &Etcd{srv: srv, dir: dir, Fsync: fsync}, nil
}

// Endpoints returns the client URLs.
func (e *Etcd) Endpoints() []string { return e.srv.Endpoints() }

// ClientAddr returns the client listener's host:port.
func (e *Etcd) ClientAddr() string { return e.srv.ClientAddr() }

// Close stops the server and removes its data.
func (e *Etcd) Close() {
	e.srv.Close()
	os.RemoveAll(e.dir)
}

// NewClient returns an etcd client of endpoints whose every unary call
// (Range, Txn, Put, Delete, lease grant and revoke, …) waits delay before
// it is sent: a fixed round trip, modelling a store across a network.
// Streams (watches, lease keepalives) are not delayed. delay 0 adds
// nothing.
func NewClient(endpoints []string, delay time.Duration) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		// Large batches of run documents stay well under etcd's request
		// limit (1.5 MiB); reading them back may not.
		MaxCallRecvMsgSize: 64 << 20,
	}
	if delay > 0 {
		cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(DelayInterceptor(delay))}
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: etcd client: %w", err)
	}
	return c, nil
}

// DelayInterceptor is a gRPC unary client interceptor that waits d before
// each call (or until ctx ends).
func DelayInterceptor(d time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}
