package etcddiscovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/membership"
)

// Members discovers orchestrators from their registrations in etcd
// (<namespace>members/<id>), following changes with a watch. It is a
// worker.Discovery and a worker.EtcdEndpointer. Create it with New.
type Members struct {
	client    *clientv3.Client
	namespace string
	// Logger; nil means no logs. Set before the worker runs.
	Logger *zap.Logger
}

var (
	_ worker.Discovery      = (*Members)(nil)
	_ worker.EtcdEndpointer = (*Members)(nil)
)

// New returns a Discovery that reads the members of the fleet in
// namespace (for example "/jobfleet/") from etcd and follows changes.
func New(client *clientv3.Client, namespace string) *Members {
	return &Members{client: client, namespace: namespace}
}

// Validate reports whether the client and namespace are usable.
func (d *Members) Validate() error {
	if d.client == nil {
		return errors.New("nil etcd client")
	}
	if d.namespace == "" || !strings.HasSuffix(d.namespace, "/") {
		return fmt.Errorf("etcd namespace %q must end in '/'", d.namespace)
	}
	return nil
}

// EtcdEndpoints returns the etcd client's endpoints, which the worker
// refuses to "http" jobs; none for a nil client.
func (d *Members) EtcdEndpoints() []string {
	if d.client == nil {
		return nil
	}
	return d.client.Endpoints()
}

// Watch mirrors the members prefix and reports the members' addresses
// whenever they change. Connection trouble is retried by the mirror; the
// last list stays in force meanwhile.
func (d *Members) Watch(ctx context.Context, update func([]string)) error {
	if err := d.Validate(); err != nil {
		return err
	}
	lg := d.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	mw, err := membership.NewWatcher(d.client, d.namespace, lg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- mw.Run(ctx) }()
	var (
		last     []string
		reported bool
	)
	for {
		v, changed := mw.View()
		if v.Revision > 0 {
			addrs := memberAddrs(v)
			if !reported || !slices.Equal(addrs, last) {
				lg.Info("orchestrators discovered", zap.Strings("orchestrators", addrs), zap.Int64("revision", v.Revision))
				update(slices.Clone(addrs))
				last, reported = addrs, true
			}
		}
		select {
		case <-changed:
		case err := <-runErr:
			// The mirror stops only when ctx ends, or on a bug.
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch members: stopped: %v", err)
		case <-ctx.Done():
			cancel()
			<-runErr
			return nil
		}
	}
}

// memberAddrs returns the distinct members' addresses of v, without
// surrounding spaces or trailing slashes, sorted.
func memberAddrs(v api.View) []string {
	addrs := make([]string, 0, len(v.Members))
	for _, m := range v.Members {
		if a := strings.TrimRight(strings.TrimSpace(m.Addr), "/"); a != "" {
			addrs = append(addrs, a)
		}
	}
	slices.Sort(addrs)
	return slices.Compact(addrs)
}
