package notify

import (
	"context"
	"errors"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// Errors.
var (
	// ErrRefused is wrapped by a Sender's error when no later try can
	// succeed: the destination policy refuses the URL. The notification
	// is given up at once instead of being retried until Config.MaxAge.
	ErrRefused = errors.New("notification refused by the destination policy")
	// ErrGone is wrapped by a Store's error when the run document a
	// notification delivers is not in etcd: the notification is given
	// up.
	ErrGone = errors.New("run document of the notification is gone")
	// ErrInvalidConfig is wrapped by New's error for a bad Config.
	ErrInvalidConfig = errors.New("notify: invalid config")
)

// Sender delivers one notification: it POSTs o.Run to o.URL with o's
// headers and the Jobfleet-* ones, and returns nil only on a 2xx answer.
// It must obey the fleet's destination policy (an error wrapping
// ErrRefused says it refused the destination) and return when ctx ends.
// Safe for concurrent use.
type Sender interface {
	Send(ctx context.Context, o store.Outbox) error
}

// Entry is one pending notification of a partition.
type Entry struct {
	// Key is the notification's key in etcd (store.Keys.Outbox).
	Key string
	// Body is the key of the run document it delivers
	// (store.Keys.OutboxRun), shared by the notifications of one run
	// status; empty for a notification that holds the document itself
	// (Outbox.Run, as earlier versions wrote them).
	Body string
	// Outbox is the notification; its Run is empty unless Body is.
	Outbox store.Outbox
}

// Store is one partition's outbox in etcd as its owner keeps it: what an
// Outbox reads and deletes. Implementations are safe for concurrent use
// and bound each request in time.
type Store interface {
	// Body returns the run document stored at key (an Entry's Body); an
	// error wrapping ErrGone if there is none.
	Body(ctx context.Context, key string) ([]byte, error)
	// Delete deletes keys (at most 64) and records deliveries (at most
	// 32: each merged into its job's kept records,
	// api.MergeDeliveries) in one write fenced on the partition owner's
	// epoch. Deleting a key that is absent is no error; a record of a job
	// that is gone is not written.
	Delete(ctx context.Context, keys []string, deliveries []api.NotificationDelivery) error
}
