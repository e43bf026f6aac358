package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	// ErrUnavailable: etcd cannot serve the request now (no leader, timed
	// out, unreachable). Nothing is known to have been written.
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

// JobState is the scheduling state the partition's owner keeps for a job,
// apart from its spec so that a spec update never races a fire.
type JobState struct {
	// Last is the latest scheduled time accounted for (fired, skipped or
	// dropped); see schedule.Decision.Last.
	Last time.Time `json:"last"`
	// Next is the next scheduled time, zero if none.
	Next time.Time `json:"next,omitzero"`
	// SpecRevision is the spec revision Last and Next were computed from.
	SpecRevision int64 `json:"spec_revision"`
	// Fired, Skipped and Dropped count the job's scheduled times by fate.
	Fired   int64 `json:"fired"`
	Skipped int64 `json:"skipped"`
	Dropped int64 `json:"dropped"`
	// Runs is how many run documents the job has stored, as of the last
	// fire.
	Runs int `json:"runs"`
	// FinishedAt is when a one-off job finished: its time fired and its
	// runs are final. Zero while it has not. A finished one-off job is
	// deleted after its retention (Job.DeleteAfter).
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

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
}

// NewEtcd returns the store of namespace ns with p partitions.
func NewEtcd(client *clientv3.Client, ns string, p int, limits Limits, now func() time.Time) *Etcd {
	if now == nil {
		now = time.Now
	}
	return &Etcd{client: client, keys: Keys{NS: ns}, partitions: p, limits: limits, now: now}
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

// Create stores a new job. The job is normalized and validated here; it
// returns a *FieldError for invalid input, ErrExists if the ID is taken,
// and the stored job (with partition, timestamps and revision) on success,
// once it is durable in etcd. A store WithGuard returns the guard's error
// (ErrHighWater, ErrNoSpace) for valid input it refuses.
func (s *Etcd) Create(ctx context.Context, j Job) (Job, error) {
	j, p, err := s.prepare(j)
	if err != nil {
		return Job{}, err
	}
	if err := s.guard(); err != nil {
		return Job{}, err
	}
	now := s.nowMillis()
	j.CreatedAt, j.UpdatedAt = now, now
	val, err := json.Marshal(j)
	if err != nil {
		return Job{}, err
	}
	key := s.keys.Spec(p, j.ID)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val))).
		Commit()
	if err != nil {
		return Job{}, Classify(err)
	}
	if !resp.Succeeded {
		return Job{}, fmt.Errorf("job %q: %w", j.ID, ErrExists)
	}
	j.Revision = resp.Header.Revision
	return j, nil
}

// Put creates or replaces a job, keeping the creation time of a replaced
// one. created tells which happened. A store WithGuard asks its guard
// before creating, or before replacing with a larger document.
//
// A job that names a Revision (as one read with Get does) replaces only
// the stored job of that revision: if the stored job has another, or is
// gone, Put changes nothing and returns an error matching
// ErrStaleRevision, so that two people editing the same job cannot lose
// one edit silently. A job without a Revision replaces whatever is stored.
func (s *Etcd) Put(ctx context.Context, j Job) (stored Job, created bool, err error) {
	want := j.Revision
	j, p, err := s.prepare(j)
	if err != nil {
		return Job{}, false, err
	}
	key := s.keys.Spec(p, j.ID)
	for range 10 {
		old, rev, size, err := s.getSized(ctx, key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Job{}, false, err
		}
		switch {
		case want == 0 || rev == want:
		case rev == 0:
			return Job{}, false, fmt.Errorf("job %s: %w: the document names revision %d, but the job no longer exists; leave \"revision\" out to create it again",
				quoteClipped(j.ID), ErrStaleRevision, want)
		default:
			return Job{}, false, fmt.Errorf("job %s: %w: the document names revision %d, but the job is at revision %d: it changed since the document was read; read it again, redo the change and apply that",
				quoteClipped(j.ID), ErrStaleRevision, want, rev)
		}
		now := s.nowMillis()
		j.CreatedAt, j.UpdatedAt = now, now
		if rev != 0 {
			j.CreatedAt = old.CreatedAt
		}
		val, err := json.Marshal(j)
		if err != nil {
			return Job{}, false, err
		}
		if rev == 0 || len(val) > size {
			if err := s.guard(); err != nil {
				return Job{}, false, err
			}
		}
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, string(val))).
			Commit()
		if err != nil {
			return Job{}, false, Classify(err)
		}
		if resp.Succeeded {
			j.Revision = resp.Header.Revision
			return j, rev == 0, nil
		}
	}
	return Job{}, false, fmt.Errorf("job %q: %w", j.ID, ErrConflict)
}

// nowMillis is the store's time in UTC at millisecond precision, the
// precision of run IDs: a job with neither schedule nor run_at runs at
// its creation time, and its run's scheduled_at must match its run ID.
func (s *Etcd) nowMillis() time.Time { return s.now().UTC().Truncate(time.Millisecond) }

func (s *Etcd) prepare(j Job) (Job, int, error) {
	j.State = nil // server-set, read-only
	j.Normalize()
	if err := j.ValidateAt(s.limits, s.now()); err != nil {
		return Job{}, 0, err
	}
	j.Partition = s.Partition(j.ID)
	j.Revision = 0
	return j, j.Partition, nil
}

// Get returns job id with its scheduling state, or ErrNotFound.
func (s *Etcd) Get(ctx context.Context, id string) (Job, error) {
	p := s.Partition(id)
	resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(s.keys.Spec(p, id)), clientv3.OpGet(s.keys.State(p, id))).Commit()
	if err != nil {
		return Job{}, Classify(err)
	}
	spec := resp.Responses[0].GetResponseRange().Kvs
	if len(spec) == 0 {
		return Job{}, ErrNotFound
	}
	j, err := DecodeStoredJob(spec[0].Value, spec[0].ModRevision)
	if err != nil {
		return Job{}, err
	}
	if st := resp.Responses[1].GetResponseRange().Kvs; len(st) == 1 {
		var state JobState
		if json.Unmarshal(st[0].Value, &state) == nil {
			j.State = &state
		}
	}
	return j, nil
}

func (s *Etcd) get(ctx context.Context, key string) (Job, int64, error) {
	j, rev, _, err := s.getSized(ctx, key)
	return j, rev, err
}

// getSized is get that also returns the stored document's size in bytes.
func (s *Etcd) getSized(ctx context.Context, key string) (Job, int64, int, error) {
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return Job{}, 0, 0, Classify(err)
	}
	if len(resp.Kvs) == 0 {
		return Job{}, 0, 0, ErrNotFound
	}
	j, err := DecodeStoredJob(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	return j, resp.Kvs[0].ModRevision, len(resp.Kvs[0].Value), err
}

// DecodeStoredJob decodes a spec as stored in etcd, with its mod revision.
func DecodeStoredJob(val []byte, rev int64) (Job, error) {
	var j Job
	if err := json.Unmarshal(val, &j); err != nil {
		return Job{}, fmt.Errorf("stored job is corrupt: %w", err)
	}
	j.Revision = rev
	j.State = nil
	return j, nil
}

// List returns up to limit jobs (1..1000) in key order (partition, then
// escaped ID) after the cursor, and the cursor of the next page ("" at the
// end). The cursor is opaque, at most MaxCursorBytes long.
func (s *Etcd) List(ctx context.Context, cursor string, limit int) ([]Job, string, error) {
	if limit < 1 || limit > 1000 {
		return nil, "", fmt.Errorf("%w: limit %d outside 1..1000", ErrInvalidJob, limit)
	}
	if len(cursor) > MaxCursorBytes {
		return nil, "", fieldErr("cursor", "%d bytes long; no cursor is longer than %d", len(cursor), MaxCursorBytes)
	}
	prefix := s.keys.JobsPrefix()
	from := prefix
	if cursor != "" {
		from = prefix + cursor + "\x00"
	}
	jobs := make([]Job, 0, limit)
	for {
		resp, err := s.client.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithLimit(int64(limit+1)))
		if err != nil {
			return nil, "", Classify(err)
		}
		for _, kv := range resp.Kvs {
			rest := strings.TrimPrefix(string(kv.Key), prefix)
			if strings.Count(rest, "/") != 1 { // a trigger key
				continue
			}
			if len(jobs) == limit {
				return jobs, strings.TrimPrefix(s.lastKey(jobs), prefix), nil
			}
			j, err := DecodeStoredJob(kv.Value, kv.ModRevision)
			if err != nil {
				return nil, "", err
			}
			jobs = append(jobs, j)
		}
		if !resp.More {
			return jobs, "", nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

func (s *Etcd) lastKey(jobs []Job) string {
	j := jobs[len(jobs)-1]
	return s.keys.Spec(j.Partition, j.ID)
}

// Delete removes job id and its pending trigger requests. The owner then
// stops scheduling it and removes its state, runs and queue entries.
// ErrNotFound if there is no such job.
func (s *Etcd) Delete(ctx context.Context, id string) error {
	p := s.Partition(id)
	key := s.keys.Spec(p, id)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(s.keys.TriggerPrefix(p, id), clientv3.WithPrefix())).
		Commit()
	if err != nil {
		return Classify(err)
	}
	if !resp.Succeeded {
		return ErrNotFound
	}
	return nil
}

// SetPaused pauses or resumes job id and returns the stored job.
func (s *Etcd) SetPaused(ctx context.Context, id string, paused bool) (Job, error) {
	key := s.keys.Spec(s.Partition(id), id)
	for range 10 {
		j, rev, err := s.get(ctx, key)
		if err != nil {
			return Job{}, err
		}
		if j.Paused == paused {
			return j, nil
		}
		j.Paused, j.UpdatedAt = paused, s.nowMillis()
		j.Revision = 0
		val, err := json.Marshal(j)
		if err != nil {
			return Job{}, err
		}
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, string(val))).
			Commit()
		if err != nil {
			return Job{}, Classify(err)
		}
		if resp.Succeeded {
			j.Revision = resp.Header.Revision
			return j, nil
		}
	}
	return Job{}, ErrConflict
}

// Trigger records a request to fire job id now and returns the ID the run
// will have. The request is durable when Trigger returns; the partition's
// owner fires it (once) and deletes it. ErrNotFound if there is no such
// job. A paused job can be triggered. A store WithGuard asks its guard
// first.
//
// Every accepted trigger gets a run of its own: run IDs have millisecond
// precision, so a trigger whose millisecond is taken (by another trigger
// or an existing run) takes the next free one of TriggerSlots. It is one
// transaction: the candidates are nested, each tried only if the ones
// before are taken. If all are, it returns ErrTooManyTriggers.
func (s *Etcd) Trigger(ctx context.Context, id string) (string, error) {
	if err := s.guard(); err != nil {
		return "", err
	}
	p := s.Partition(id)
	at := s.nowMillis()
	var chain []clientv3.Op // the candidates from slot i on
	for i := TriggerSlots - 1; i >= 0; i-- {
		t := at.Add(time.Duration(i) * time.Millisecond)
		trig, run := s.keys.Trigger(p, id, t), s.keys.Run(p, id, t)
		chain = []clientv3.Op{clientv3.OpTxn(
			[]clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(trig), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(run), "=", 0),
			},
			[]clientv3.Op{clientv3.OpPut(trig, "")},
			chain)}
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(s.keys.Spec(p, id)), ">", 0)).
		Then(chain...).
		Commit()
	if err != nil {
		return "", Classify(err)
	}
	if !resp.Succeeded {
		return "", ErrNotFound
	}
	level := resp.Responses[0].GetResponseTxn()
	for i := 0; level != nil; i++ {
		if level.Succeeded {
			return RunID(id, at.Add(time.Duration(i)*time.Millisecond)), nil
		}
		if len(level.Responses) == 0 {
			break
		}
		level = level.Responses[0].GetResponseTxn()
	}
	return "", fmt.Errorf("job %q: %w: %d milliseconds from %s are taken", id, ErrTooManyTriggers, TriggerSlots, FormatTime(at))
}

// TriggerSlots is how many consecutive milliseconds Trigger tries for a
// trigger's run.
const TriggerSlots = 16

// Runs returns up to limit (1..1000) of job id's runs, newest first.
func (s *Etcd) Runs(ctx context.Context, id string, limit int) ([]Run, error) {
	if limit < 1 || limit > 1000 {
		return nil, fmt.Errorf("%w: limit %d outside 1..1000", ErrInvalidJob, limit)
	}
	prefix := s.keys.RunPrefix(s.Partition(id), id)
	resp, err := s.client.Get(ctx, prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, Classify(err)
	}
	runs := make([]Run, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r Run
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("stored run %s is corrupt: %w", kv.Key, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// GetRun returns one run, or ErrNotFound.
func (s *Etcd) GetRun(ctx context.Context, runID string) (Run, error) {
	id, t, err := ParseRunID(runID)
	if err != nil {
		return Run{}, err
	}
	resp, err := s.client.Get(ctx, s.keys.Run(s.Partition(id), id, t))
	if err != nil {
		return Run{}, Classify(err)
	}
	if len(resp.Kvs) == 0 {
		return Run{}, ErrNotFound
	}
	var r Run
	if err := json.Unmarshal(resp.Kvs[0].Value, &r); err != nil {
		return Run{}, fmt.Errorf("stored run is corrupt: %w", err)
	}
	return r, nil
}

// Classify maps etcd client errors onto the store's errors, keeping the
// original in the chain: ErrNoSpace for a full database, ErrTooLarge for a
// request over etcd's size limit, ErrUnavailable for no leader, timeouts
// and connection failures. Other errors are returned as they are.
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
		errors.Is(err, rpctypes.ErrGRPCTimeout):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded:
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		case codes.ResourceExhausted:
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
