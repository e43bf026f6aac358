package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
)

// ErrBackfillRunning: a backfill of the job is not done yet; a job has
// one at a time.
var ErrBackfillRunning = errors.New("a backfill of the job is running")

// Outcomes of a backfill's times (Backfill.Outcome, one byte each).
const (
	BackfillPending  = 'p' // its run is yet to be created
	BackfillCreated  = 'c' // the backfill created its run
	BackfillExisting = 'e' // it had a run already: not run again
)

// Backfill is a job's backfill as stored (Keys.Backfill): the request the
// API writes, and the progress its partition's owner writes over it
// (fenced, compare-and-swap on its revision) as it creates the runs.
type Backfill struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	Max  int       `json:"max"`
	// Times are the scheduled times to backfill, ascending; Outcome has
	// one byte per time, BackfillPending, BackfillCreated or
	// BackfillExisting.
	Times   []time.Time `json:"times"`
	Outcome string      `json:"outcome"`
	// Skipped are times of [From, To) after the first Max (at most Max of
	// them); NextFrom the first, zero if none.
	Skipped  []time.Time `json:"skipped,omitempty"`
	NextFrom time.Time   `json:"next_from,omitzero"`
	// RequestedBy is the credential that asked, RequestedAt when; DoneAt
	// when no time was pending any more (zero until then).
	RequestedBy string    `json:"requested_by,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
	DoneAt      time.Time `json:"done_at,omitzero"`
}

// Pending reports whether some time of b still waits for its run.
func (b Backfill) Pending() bool {
	for i := range len(b.Outcome) {
		if b.Outcome[i] == BackfillPending {
			return true
		}
	}
	return false
}

// Doc returns b as the API shows it for job id, in status (dry run) or,
// if status is "", running or done as b says.
func (b Backfill) Doc(id, status string) api.Backfill {
	d := api.Backfill{JobID: id, From: b.From.UTC(), To: b.To.UTC(), Max: b.Max, Status: status,
		Created: []time.Time{}, Existing: []time.Time{}, Pending: []time.Time{}, Skipped: slices.Clone(b.Skipped),
		RequestedBy: b.RequestedBy, RequestedAt: b.RequestedAt, DoneAt: b.DoneAt}
	if d.Skipped == nil {
		d.Skipped = []time.Time{}
	}
	if !b.NextFrom.IsZero() {
		next := b.NextFrom.UTC()
		d.NextFrom = &next
	}
	for i, t := range b.Times {
		switch b.Outcome[i] {
		case BackfillCreated:
			d.Created = append(d.Created, t.UTC())
		case BackfillExisting:
			d.Existing = append(d.Existing, t.UTC())
		default:
			d.Pending = append(d.Pending, t.UTC())
		}
	}
	if status == "" {
		d.Status = api.BackfillRunning
		if len(d.Pending) == 0 {
			d.Status = api.BackfillDone
		}
	}
	return d
}

// Validate checks a stored backfill's shape: an outcome per time.
func (b Backfill) Validate() error {
	if len(b.Outcome) != len(b.Times) {
		return fmt.Errorf("backfill: %d outcomes for %d times", len(b.Outcome), len(b.Times))
	}
	return nil
}

// GetBackfill returns job id's backfill and its revision; ErrNotFound if
// it has none.
func (s *Etcd) GetBackfill(ctx context.Context, id string) (Backfill, int64, error) {
	resp, err := s.client.Get(ctx, s.keys.Backfill(s.Partition(id), id))
	if err != nil {
		return Backfill{}, 0, Classify(err)
	}
	if len(resp.Kvs) == 0 {
		return Backfill{}, 0, ErrNotFound
	}
	var b Backfill
	if err := json.Unmarshal(resp.Kvs[0].Value, &b); err != nil {
		return Backfill{}, 0, fmt.Errorf("stored backfill of job %q is corrupt: %w", id, err)
	}
	if err := b.Validate(); err != nil {
		return Backfill{}, 0, fmt.Errorf("stored backfill of job %q is corrupt: %w", id, err)
	}
	return b, resp.Kvs[0].ModRevision, nil
}

// RunTimes returns the scheduled times in [from, to) of job id's stored
// runs, in Unix milliseconds (the precision of run IDs), read at one
// revision (keys only).
func (s *Etcd) RunTimes(ctx context.Context, id string, from, to time.Time) (map[int64]bool, error) {
	p := s.Partition(id)
	resp, err := s.client.Get(ctx, s.keys.Run(p, id, from), clientv3.WithRange(s.keys.Run(p, id, to)), clientv3.WithKeysOnly())
	if err != nil {
		return nil, Classify(err)
	}
	out := make(map[int64]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if _, t, ok := s.keys.ParseRunKey(p, string(kv.Key)); ok {
			out[t.UnixMilli()] = true
		}
	}
	return out, nil
}

// PutBackfill records b as job id's backfill, replacing the one of
// revision prev (0: none may exist), only while the job exists. It
// returns ErrNotFound if the job is gone, ErrBackfillRunning if another
// backfill was recorded meanwhile; a store WithGuard asks its guard
// first. The partition's owner creates b's pending runs.
func (s *Etcd) PutBackfill(ctx context.Context, id string, b Backfill, prev int64) (int64, error) {
	if err := b.Validate(); err != nil {
		return 0, err
	}
	if err := s.guard(); err != nil {
		return 0, err
	}
	val, err := json.Marshal(b)
	if err != nil {
		return 0, err
	}
	p := s.Partition(id)
	key, spec := s.keys.Backfill(p, id), s.keys.Spec(p, id)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(spec), ">", 0)).
		Then(clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", prev)},
			[]clientv3.Op{clientv3.OpPut(key, string(val))}, nil)).
		Commit()
	if err != nil {
		return 0, Classify(err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	if !resp.Responses[0].GetResponseTxn().Succeeded {
		return 0, fmt.Errorf("job %q: %w (recorded meanwhile)", id, ErrBackfillRunning)
	}
	return resp.Header.Revision, nil
}

// DeleteBackfill deletes job id's backfill, stopping it if it is
// running: runs it created stay. ErrNotFound if there is none.
func (s *Etcd) DeleteBackfill(ctx context.Context, id string) error {
	resp, err := s.client.Delete(ctx, s.keys.Backfill(s.Partition(id), id))
	if err != nil {
		return Classify(err)
	}
	if resp.Deleted == 0 {
		return ErrNotFound
	}
	return nil
}
