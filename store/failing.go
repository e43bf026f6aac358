package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file has the index of failing runs: one small entry per run whose
// status is failed (an attempt failed, another remains) or dead, written
// by the partition's owner in the transaction that gives the run that
// status and deleted in the one that takes it away (a retry starts), or
// with the run (history trimmed, job deleted). The owner also deletes the
// entries of dead runs older than FailingWindow. Keys:
//
//	failing/<p>/<id>/<time>   entry of job id's run for scheduled time <time>
//
// laid out like the run's own key, so the entries of a job go with its
// runs by prefix and a listing reads them by job-ID prefix per partition.

// AllFailingPrefix is the prefix of every partition's failing-runs index.
func (k Keys) AllFailingPrefix() string { return k.NS + "failing/" }

// FailingPrefix is the prefix of partition p's failing-runs index.
func (k Keys) FailingPrefix(p int) string { return k.AllFailingPrefix() + part(p) + "/" }

// FailingJobPrefix is the prefix of job id's failing-runs index entries.
func (k Keys) FailingJobPrefix(p int, id string) string {
	return k.FailingPrefix(p) + EscapeID(id) + "/"
}

// Failing is the failing-runs index key of job id's run for time t.
func (k Keys) Failing(p int, id string, t time.Time) string {
	return k.partitionKey("failing/", p, "", id, "", t)
}

// ParseFailingKey splits a key under FailingPrefix(p) into job ID and
// scheduled time.
func (k Keys) ParseFailingKey(p int, key string) (id string, t time.Time, ok bool) {
	return parseIDTime(k.FailingPrefix(p), key)
}

// FailingOps returns the writes of the failing-runs index that go with
// changing a run from status prev to r at at: the put of r's entry if r
// is failed or dead, its deletion if r is neither and prev was, nothing
// otherwise. The caller puts them in the transaction that writes r.
func (k Keys) FailingOps(prev RunStatus, r Run, at time.Time) ([]clientv3.Op, error) {
	key := k.Failing(r.Partition, r.JobID, r.ScheduledAt)
	switch {
	case r.Status.Failing():
		val, err := json.Marshal(NewFailingRun(r, at))
		if err != nil {
			return nil, fmt.Errorf("encode failing-run entry of %s: %w", r.ID, err)
		}
		return []clientv3.Op{clientv3.OpPut(key, string(val))}, nil
	case prev.Failing():
		return []clientv3.Op{clientv3.OpDelete(key)}, nil
	}
	return nil, nil
}

// FailingQuery selects entries of the failing-runs index.
type FailingQuery struct {
	// Prefix limits the entries to jobs whose ID starts with it ("" for
	// all).
	Prefix string
	// Statuses are the statuses wanted, some of RunFailed and RunDead;
	// empty for both.
	Statuses []RunStatus
	// Since drops entries whose At is before it.
	Since time.Time
	// Cursor is the NextCursor of the previous page, "" for the first.
	Cursor string
	// Limit is the page size, 1..1000.
	Limit int
	// Scan is the most entries a page reads (0: DefaultFailingScan).
	Scan int
}

// DefaultFailingScan is how many index entries ListFailing reads at most
// for one page: a filter (status, since) that keeps few entries costs a
// request that much, not the whole index.
const DefaultFailingScan = 10000

// failingRangeLimit is how many entries each partition's range of a
// ListFailing transaction reads at first (rangesPerTxn of them per
// transaction, a few hundred bytes each); a range with more reads on.
const failingRangeLimit = 32

// ListFailing returns up to q.Limit entries of the failing-runs index
// that q selects, and the cursor of the next page ("" at the end), all
// read at one revision. It reads at most q.Scan entries: when they hold
// fewer than q.Limit selected ones, the page is short (maybe empty) and
// the cursor continues after the last entry read.
//
// The order is that of the keys: by partition, then job ID (escaped),
// then scheduled time, oldest first: the index is laid out by partition
// like the runs, so ordering it by time would mean reading all of it for
// every page. Each partition is read only in the key range of q.Prefix.
// Errors: ErrInvalidJob (wrapped in a *FieldError naming the parameter)
// for a bad limit, status or cursor; etcd's, classified.
func (s *Etcd) ListFailing(ctx context.Context, q FailingQuery) ([]FailingRun, string, error) {
	if q.Limit < 1 || q.Limit > 1000 {
		return nil, "", fieldErr("limit", "%d outside 1..1000", q.Limit)
	}
	for _, st := range q.Statuses {
		if !st.Failing() {
			return nil, "", fieldErr("status", "%q is not %q or %q", string(st), RunDead, RunFailed)
		}
	}
	if len(q.Cursor) > MaxCursorBytes {
		return nil, "", fieldErr("cursor", "%d bytes long; no cursor is longer than %d", len(q.Cursor), MaxCursorBytes)
	}
	root := s.keys.AllFailingPrefix()
	first, after := 0, ""
	if q.Cursor != "" {
		ps, _, ok := strings.Cut(q.Cursor, "/")
		p, err := strconv.Atoi(ps)
		if !ok || err != nil || p < 0 || p >= s.partitions || len(ps) != 5 {
			return nil, "", fieldErr("cursor", "%s is not one this server made", quoteClipped(q.Cursor))
		}
		first, after = p, root+q.Cursor+"\x00"
	}
	esc := EscapeID(q.Prefix)
	var (
		out  []FailingRun
		keys []string // out's keys
		rev  int64
	)
	withRev := func(opts ...clientv3.OpOption) []clientv3.OpOption {
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		return opts
	}
	scan := q.Scan
	if scan <= 0 {
		scan = DefaultFailingScan
	}
	scanned, seen := 0, "" // entries read, and the last one's key
	full := func() bool { return len(out) > q.Limit }
	done := func() bool { return full() || scanned >= scan }
	// take adds the selected entries among kvs; it returns the key of the
	// last one it looked at.
	take := func(kvs []*mvccpb.KeyValue) string {
		last := ""
		for _, kv := range kvs {
			if done() {
				break
			}
			last = string(kv.Key)
			scanned, seen = scanned+1, last
			var f FailingRun
			if err := json.Unmarshal(kv.Value, &f); err != nil {
				continue // not ours to judge: the owner rewrites or deletes it
			}
			if (len(q.Statuses) > 0 && !slices.Contains(q.Statuses, f.Status)) || f.At.Before(q.Since) {
				continue
			}
			out = append(out, f)
			keys = append(keys, last)
		}
		return last
	}
	for p := first; p < s.partitions && !done(); p += rangesPerTxn {
		n := min(rangesPerTxn, s.partitions-p)
		ops, ends := partitionRanges(p, n, first, s.keys.FailingPrefix, esc, after, withRev(clientv3.WithLimit(failingRangeLimit))...)
		resp, err := s.client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, "", Classify(err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for i, r := range resp.Responses {
			if done() {
				break
			}
			rr := r.GetResponseRange()
			last := take(rr.Kvs)
			for more := rr.More; more && !done(); {
				gr, err := s.client.Get(ctx, last+"\x00", withRev(clientv3.WithRange(ends[i]), clientv3.WithLimit(int64(min(q.Limit+1, 256))))...)
				if err != nil {
					return nil, "", Classify(err)
				}
				last = take(gr.Kvs)
				more = gr.More && len(gr.Kvs) > 0
			}
		}
	}
	next := ""
	switch {
	case full():
		out = out[:q.Limit]
		next = strings.TrimPrefix(keys[q.Limit-1], root)
	case scanned >= scan:
		next = strings.TrimPrefix(seen, root)
	}
	if out == nil {
		out = []FailingRun{}
	}
	return out, next, nil
}
