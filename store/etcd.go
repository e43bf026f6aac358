package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jobfleet/jobfleet/shard"
)

// Errors of the etcd store. Callers compare with errors.Is.
var (
	// ErrNotFound: no such job or run.
	ErrNotFound = errors.New("not found")
	// ErrExists: a job with that ID exists already.
	ErrExists = errors.New("already exists")
	// ErrConflict: the document changed concurrently too often; retry.
	ErrConflict = errors.New("concurrent update conflict")
	// ErrUnavailable: etcd did not answer the request in time (no leader,
	// timed out, unreachable, the context ended). For a read nothing was
	// returned; for a write the outcome is unknown: a request that timed
	// out on the client may still have been applied by etcd, so read the
	// keys again before deciding what to write next.
	ErrUnavailable = errors.New("store unavailable")
	// ErrTooManyTriggers: a job was triggered too often at once (every
	// run ID a trigger could take now is taken); retry in a moment.
	ErrTooManyTriggers = errors.New("too many triggers at once")
	// ErrNoSpace: etcd's database is full (its space quota alarm is raised);
	// it accepts no writes until an operator compacts and defragments it.
	ErrNoSpace = errors.New("store full: etcd database space exceeded")
	// ErrHighWater: etcd's database is above the fleet's high-water mark,
	// a fraction of its quota; writes that would grow it (new jobs, larger
	// replacements, triggers) are refused so that firing can go on.
	ErrHighWater = errors.New("store nearly full: etcd database above its high-water mark")
)

// Etcd is the etcd implementation of job and run storage for the API side:
// it writes specs and trigger requests, and reads everything. The owner's
// writes (state, runs, queue) are made by package dispatch through fenced
// transactions. Safe for concurrent use.
type Etcd struct {
	client     *clientv3.Client
	keys       Keys
	partitions int
	limits     Limits
	now        func() time.Time
	admit      func() error // nil: every write is admitted
	// listDensity is the spec keys per partition, in thousandths, that
	// the last listing page saw over the whole partitions it read (0:
	// none yet); shared by the copies WithGuard makes. It sizes the first
	// window of the next page (listDocs).
	listDensity *atomic.Int64
	// sizes is the mean stored size of the job documents listings have
	// read; shared by the copies WithGuard makes. It sizes each listing
	// read to the page's remaining bytes (MaxListPageBytes).
	sizes *docSizes
	// runSizes is sizes for run documents (Runs).
	runSizes *docSizes
}

// NewEtcd returns the store of namespace ns with p partitions.
func NewEtcd(client *clientv3.Client, ns string, p int, limits Limits, now func() time.Time) *Etcd {
	if now == nil {
		now = time.Now
	}
	return &Etcd{client: client, keys: Keys{NS: ns}, partitions: p, limits: limits, now: now, listDensity: new(atomic.Int64), sizes: new(docSizes), runSizes: new(docSizes)}
}

// WithGuard returns a copy of the store that asks admit before each write
// that grows etcd's database: Create, Put of a new job or of a larger
// document than the one it replaces, and Trigger. A non-nil error from
// admit (wrapping ErrHighWater or ErrNoSpace) refuses the write, which
// changes nothing. Deletes, pauses and resumes are always admitted: they
// are how an operator makes room. admit must be fast and safe for
// concurrent use (*storage.Monitor.Admit answers from memory).
func (s *Etcd) WithGuard(admit func() error) *Etcd {
	c := *s
	c.admit = admit
	return &c
}

// guard returns admit's verdict, nil without a guard.
func (s *Etcd) guard() error {
	if s.admit == nil {
		return nil
	}
	return s.admit()
}

// Keys returns the store's key layout.
func (s *Etcd) Keys() Keys { return s.keys }

// Partitions returns P.
func (s *Etcd) Partitions() int { return s.partitions }

// Partition returns job id's partition.
func (s *Etcd) Partition(id string) int { return shard.Partition(id, s.partitions) }

// Classify maps etcd client errors onto the store's errors, keeping the
// original in the chain: ErrNoSpace for a full database, ErrTooLarge for a
// request over etcd's size limit, ErrUnavailable for no leader, a leader
// change, timeouts, a stopping or unhealthy server, an overloaded one
// ("too many requests": its applied index fell behind), connection
// failures and cancelled requests (a member stopping closes its client,
// cancelling what it has in flight). Other errors are returned as they
// are.
//
// etcd's client returns its server's errors as rpctypes.EtcdError, which
// carries a gRPC code but no gRPC status, so both forms are looked at.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, rpctypes.ErrNoSpace), errors.Is(err, rpctypes.ErrGRPCNoSpace):
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	case errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrGRPCRequestTooLarge):
		// Clients see this message (413), so it leaves etcd's out.
		return &classified{msg: ErrTooLarge.Error() + ": etcd refused the request as too large", errs: []error{ErrTooLarge, err}}
	case errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, rpctypes.ErrGRPCNoLeader),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, rpctypes.ErrTimeout),
		errors.Is(err, rpctypes.ErrGRPCTimeout),
		// Cancelled: the member is stopping and closed its client (or the
		// caller left, and hears nothing either way).
		errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		switch {
		case ee.Code() == codes.Unavailable, ee.Code() == codes.DeadlineExceeded,
			errors.Is(err, rpctypes.ErrTooManyRequests):
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		case codes.ResourceExhausted:
			if st.Message() == rpctypes.ErrTooManyRequests.Error() {
				return fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			if strings.Contains(st.Message(), "space") {
				return fmt.Errorf("%w: %w", ErrNoSpace, err)
			}
		}
	}
	return err
}

// classified is an etcd error mapped onto a store error whose message is
// the store's own: both stay in the chain for errors.Is and errors.As.
type classified struct {
	msg  string
	errs []error
}

func (c *classified) Error() string   { return c.msg }
func (c *classified) Unwrap() []error { return c.errs }
