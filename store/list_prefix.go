package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rangesPerTxn is how many partitions one ListPrefix transaction reads,
// and how many documents it fetches with their pause keys (etcd allows
// 128 operations per transaction by default).
const rangesPerTxn = 64

// ListPrefix is List limited to jobs whose ID starts with prefix: up to
// limit jobs (1..1000) in List's order after the cursor, and the cursor of
// the next page ("" at the end). An empty prefix is List.
//
// Specs are keyed by partition first, so a prefix's jobs are spread over
// every partition; each partition is read only in the key range of the
// prefix (EscapeID keeps prefixes: the escaped ID of a job starts with the
// escaped prefix), keys only, a transaction of rangesPerTxn partitions at
// a time, and then only the page's documents are fetched, all at one
// revision, in reads sized to the page's remaining bytes; the page ends at
// MaxListPageBytes as List's does. A page costs a few requests however many jobs lie outside the
// prefix.
func (s *Etcd) ListPrefix(ctx context.Context, prefix, cursor string, limit int) ([]Job, string, error) {
	docs, next, err := s.ListPrefixDocs(ctx, prefix, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	jobs, err := decodeDocs(docs)
	return jobs, next, err
}

// partitionRanges returns the reads, one a partition, of the keys of
// partitions p to p+n-1 that start with prefix(partition) + esc, with
// opts after the range; the read of partition first starts after after
// where that is within its range. ends are the ranges' ends, to read on
// from where a range had more.
func partitionRanges(p, n, first int, prefix func(p int) string, esc, after string, opts ...clientv3.OpOption) (ops []clientv3.Op, ends []string) {
	ops = make([]clientv3.Op, n)
	ends = make([]string, n)
	for i := range n {
		from := prefix(p+i) + esc
		ends[i] = clientv3.GetPrefixRangeEnd(from)
		if p+i == first && after > from {
			from = min(after, ends[i])
		}
		ops[i] = clientv3.OpGet(from, append([]clientv3.OpOption{clientv3.WithRange(ends[i])}, opts...)...)
	}
	return ops, ends
}

// ListPrefixDocs is ListPrefix without decoding the documents: the same
// page, as the documents are stored. It lets a caller that only passes
// the documents on (the API's listing) skip decoding and encoding them.
func (s *Etcd) ListPrefixDocs(ctx context.Context, prefix, cursor string, limit int) ([]StoredDoc, string, error) {
	if prefix == "" {
		return s.listDocs(ctx, cursor, limit)
	}
	if limit < 1 || limit > 1000 {
		return nil, "", fmt.Errorf("%w: limit %d outside 1..1000", ErrInvalidJob, limit)
	}
	root := s.keys.JobsPrefix()
	first, after := 0, ""
	if cursor != "" {
		ps, _, ok := strings.Cut(cursor, "/")
		p, err := strconv.Atoi(ps)
		if !ok || err != nil || p < 0 || p >= s.partitions {
			return nil, "", fmt.Errorf("%w: cursor %q is not one this server made", ErrInvalidJob, cursor)
		}
		first, after = p, root+cursor+"\x00"
	}
	esc := EscapeID(prefix)
	var (
		keys []string // spec keys in order, up to limit+1
		rev  int64    // the revision every read is made at
	)
	withRev := func(opts ...clientv3.OpOption) []clientv3.OpOption {
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		return opts
	}
	// addSpecKeys appends the spec keys (not trigger keys) of partition p
	// among kvs' keys.
	addSpecKeys := func(p int, got []string) {
		pk := s.keys.PartitionJobsPrefix(p)
		for _, k := range got {
			if len(keys) > limit {
				return
			}
			if !strings.Contains(k[len(pk):], "/") {
				keys = append(keys, k)
			}
		}
	}
	for p := first; p < s.partitions && len(keys) <= limit; p += rangesPerTxn {
		n := min(rangesPerTxn, s.partitions-p)
		ops, ends := partitionRanges(p, n, first, s.keys.PartitionJobsPrefix, esc, after, withRev(clientv3.WithKeysOnly(), clientv3.WithLimit(int64(limit+1)))...)
		resp, err := s.client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, "", Classify(err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for i, r := range resp.Responses {
			rr := r.GetResponseRange()
			got := make([]string, len(rr.Kvs))
			for j, kv := range rr.Kvs {
				got[j] = string(kv.Key)
			}
			addSpecKeys(p+i, got)
			// Trigger keys took part of the range's limit: read on.
			for more := rr.More; more && len(keys) <= limit; {
				from := got[len(got)-1] + "\x00"
				gr, err := s.client.Get(ctx, from, withRev(clientv3.WithRange(ends[i]), clientv3.WithKeysOnly(), clientv3.WithLimit(int64(limit+1)))...)
				if err != nil {
					return nil, "", Classify(err)
				}
				got = got[:0]
				for _, kv := range gr.Kvs {
					got = append(got, string(kv.Key))
				}
				addSpecKeys(p+i, got)
				more = gr.More && len(got) > 0
			}
			if len(keys) > limit {
				break
			}
		}
	}
	page := keys[:min(len(keys), limit)]
	docs := make([]StoredDoc, 0, len(page))
	docKeys := make([]string, 0, len(page))
	pauses := map[string]*mvccpb.KeyValue{}
	bytes := 0 // docs' stored bytes: the page ends at MaxListPageBytes
	for start := 0; start < len(page); {
		n := min(rangesPerTxn, s.sizes.keys(MaxListPageBytes-bytes, len(page)-start))
		chunk := page[start : start+n]
		start += n
		ops := make([]clientv3.Op, 0, 2*len(chunk)) // each spec and its pause key
		for _, k := range chunk {
			ops = append(ops, clientv3.OpGet(k, clientv3.WithRev(rev)), clientv3.OpGet(s.pauseKeyOf(k), clientv3.WithRev(rev)))
		}
		resp, err := s.client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, "", Classify(err)
		}
		got, gotBytes := 0, 0
		for i := 0; i+1 < len(resp.Responses); i += 2 {
			for _, kv := range resp.Responses[i].GetResponseRange().Kvs {
				got, gotBytes = got+1, gotBytes+len(kv.Value)
				if bytes >= MaxListPageBytes {
					continue // read, but past the page's end
				}
				docs = append(docs, StoredDoc{Value: kv.Value, Revision: kv.ModRevision})
				docKeys = append(docKeys, string(kv.Key))
				bytes += len(kv.Value)
				for _, pk := range resp.Responses[i+1].GetResponseRange().Kvs {
					pauses[string(pk.Key)] = pk
				}
			}
		}
		s.sizes.learn(got, gotBytes)
		if bytes >= MaxListPageBytes && len(docs) < len(page) {
			// Full by bytes: the page ends at its last document.
			s.withPauses(docs, docKeys, pauses)
			return docs, strings.TrimPrefix(docKeys[len(docKeys)-1], root), nil
		}
	}
	s.withPauses(docs, docKeys, pauses)
	next := ""
	if len(keys) > limit {
		next = strings.TrimPrefix(page[len(page)-1], root)
	}
	return docs, next, nil
}

// ListPrefixWhere is ListPrefix keeping only the jobs keep accepts: up to
// limit (1..1000) of them, in ListPrefix's order, found among at most
// scan jobs read after the cursor (in pages of up to 1000). The cursor it
// returns continues after the last job kept, or after the last job read
// when the scan ran out first ("" at the end): a page may then hold fewer
// than limit jobs, or none, and the listing is not over until the cursor
// is "". A filter that keeps few jobs thus costs each request at most
// scan jobs read, however many there are.
func (s *Etcd) ListPrefixWhere(ctx context.Context, prefix, cursor string, limit, scan int, keep func(Job) bool) ([]Job, string, error) {
	if limit < 1 || limit > 1000 {
		return nil, "", fmt.Errorf("%w: limit %d outside 1..1000", ErrInvalidJob, limit)
	}
	scan = max(scan, 1)
	out := []Job{}
	for read := 0; ; {
		jobs, next, err := s.ListPrefix(ctx, prefix, cursor, min(1000, scan-read))
		if err != nil {
			return nil, "", err
		}
		for i, j := range jobs {
			if !keep(j) {
				continue
			}
			out = append(out, j)
			if len(out) == limit {
				if i == len(jobs)-1 && next == "" {
					return out, "", nil
				}
				return out, strings.TrimPrefix(s.keys.Spec(s.Partition(j.ID), j.ID), s.keys.JobsPrefix()), nil
			}
		}
		read += len(jobs)
		if next == "" || read >= scan {
			return out, next, nil
		}
		cursor = next
	}
}
