package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Get returns job id with its scheduling state, or ErrNotFound. Its
// Paused, UpdatedAt and Revision count its pause key (PauseKey.Apply).
func (s *Etcd) Get(ctx context.Context, id string) (Job, error) {
	p := s.Partition(id)
	resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(s.keys.Spec(p, id)), clientv3.OpGet(s.keys.State(p, id)), clientv3.OpGet(s.keys.Pause(p, id))).Commit()
	if err != nil {
		return Job{}, Classify(err)
	}
	cur, err := stored(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[2].GetResponseRange().Kvs)
	if err != nil {
		return Job{}, err
	}
	j := cur.job
	j.ApplyState(decodeState(resp.Responses[1].GetResponseRange().Kvs))
	return j, nil
}

// decodeState decodes the state key read as kvs: nil if absent or
// corrupt.
func decodeState(kvs []*mvccpb.KeyValue) *JobState {
	if len(kvs) != 1 {
		return nil
	}
	var state JobState
	if json.Unmarshal(kvs[0].Value, &state) != nil {
		return nil
	}
	return &state
}

// storedJob is a job as a writer reads it before writing: the job as
// readers see it (its pause key applied), and the revisions and size its
// write compares with.
type storedJob struct {
	job     Job
	specRev int64    // the spec's mod revision, 0 if there is none
	size    int      // the spec's bytes
	pause   PauseKey // the job's pause key, zero if it has none
}

// read returns job id of partition p as stored: ErrNotFound, with the
// pause key's revision still set, if there is no spec.
func (s *Etcd) read(ctx context.Context, p int, id string) (storedJob, error) {
	resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(s.keys.Spec(p, id)), clientv3.OpGet(s.keys.Pause(p, id))).Commit()
	if err != nil {
		return storedJob{}, Classify(err)
	}
	return stored(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
}

// stored decodes what a read of a spec key and its pause key returned.
func stored(spec, pause []*mvccpb.KeyValue) (storedJob, error) {
	var cur storedJob
	applies := false
	if len(pause) == 1 {
		pk, err := DecodePause(pause[0].Value, pause[0].ModRevision)
		// A corrupt key decides nothing (the document does); writes still
		// compare its revision, and the next one replaces or removes it.
		applies = err == nil
		pk.Revision = pause[0].ModRevision
		cur.pause = pk
	}
	if len(spec) == 0 {
		return cur, ErrNotFound
	}
	j, err := DecodeStoredJob(spec[0].Value, spec[0].ModRevision)
	if err != nil {
		return cur, err
	}
	if applies {
		j = cur.pause.Apply(j)
	}
	cur.job, cur.specRev, cur.size = j, spec[0].ModRevision, len(spec[0].Value)
	return cur, nil
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
	docs, next, err := s.listDocs(ctx, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	jobs, err := decodeDocs(docs)
	return jobs, next, err
}

// StoredDoc is a job document as it is stored in etcd, not decoded: Value
// is the JSON of a Job without its Revision and State (the store never
// stores them), and Revision is the stored document's mod revision. Pause
// is the job's pause key if it applies to the document (PauseKey.Applies),
// else zero. Job decodes it.
type StoredDoc struct {
	Value    []byte
	Revision int64
	Pause    PauseKey
}

// Job returns the Job d stands for: DecodeStoredJob(d.Value, d.Revision)
// with d.Pause applied.
func (d StoredDoc) Job() (Job, error) {
	j, err := DecodeStoredJob(d.Value, d.Revision)
	if err != nil {
		return Job{}, err
	}
	return d.Pause.Apply(j), nil
}

// decodeDocs decodes docs with StoredDoc.Job, in order.
func decodeDocs(docs []StoredDoc) ([]Job, error) {
	jobs := make([]Job, 0, len(docs))
	for _, d := range docs {
		j, err := d.Job()
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// withPauses sets the Pause of each of docs, whose spec keys are keys, from
// pauses (the pause keys read, by key) where it applies.
func (s *Etcd) withPauses(docs []StoredDoc, keys []string, pauses map[string]*mvccpb.KeyValue) {
	if len(pauses) == 0 {
		return
	}
	for i, key := range keys {
		kv := pauses[s.pauseKeyOf(key)]
		if kv == nil {
			continue
		}
		if pk, err := DecodePause(kv.Value, kv.ModRevision); err == nil && pk.Applies(docs[i].Revision) {
			docs[i].Pause = pk
		}
	}
}

// pauseKeyOf returns the pause key of the job whose spec key is key.
func (s *Etcd) pauseKeyOf(key string) string {
	rest := strings.TrimPrefix(key, s.keys.JobsPrefix())
	ps, esc, _ := strings.Cut(rest, "/")
	return s.keys.JobsPrefix() + ps + "/" + pauseSegment + esc
}

// isPauseKey reports whether key, under the jobs prefix, is a pause key.
func (s *Etcd) isPauseKey(key string) bool {
	rest := strings.TrimPrefix(key, s.keys.JobsPrefix())
	_, tail, _ := strings.Cut(rest, "/")
	return strings.HasPrefix(tail, pauseSegment)
}

// listDocs is List without decoding the documents.
//
// etcd counts every key of the range it is asked for, even with a limit:
// one range from the cursor to the end of the jobs would cost the store
// every job after the cursor for each page, and listing N jobs would cost
// it about N²/(2 × limit) keys. The page is read instead in windows of
// whole partitions, each sized from the keys per partition seen so far,
// so that a page costs the store about the keys it returns; the first
// window is sized from the last full page's jobs per partition (the
// store's, shared by every listing), so that a page is usually one read.
// Each read fetches about as many keys as the page's remaining bytes hold
// at the mean document size seen so far (docSizes), and the page ends at
// MaxListPageBytes, so that neither etcd nor the reply carries limit
// documents of the largest size.
func (s *Etcd) listDocs(ctx context.Context, cursor string, limit int) ([]StoredDoc, string, error) {
	if limit < 1 || limit > 1000 {
		return nil, "", fmt.Errorf("%w: limit %d outside 1..1000", ErrInvalidJob, limit)
	}
	if len(cursor) > MaxCursorBytes {
		return nil, "", fieldErr("cursor", "%d bytes long; no cursor is longer than %d", len(cursor), MaxCursorBytes)
	}
	prefix := s.keys.JobsPrefix()
	from, p, span := prefix, 0, 1
	if cursor != "" {
		from = prefix + cursor + "\x00"
		if p = s.cursorPartition(cursor); p < 0 {
			// Not a cursor this store made: one window to the end.
			p, span = 0, s.partitions
		}
	}
	first := p
	if d := s.density(); d > 0 && span == 1 {
		// The first window: the cursor's partition and as many more as the
		// jobs per partition of the last full page need for a page and a
		// quarter, so that a page is usually one range read instead of
		// three (one partition, then two, then the rest).
		span = nextSpan(1, limit+1, int(d), 1000, s.partitions)
		if cursor != "" {
			span = min(span+1, s.partitions)
		}
	}
	docs := make([]StoredDoc, 0, limit)
	specKeys := make([]string, 0, limit) // docs' spec keys
	// The pause keys of a partition sort before its specs ('!' before any
	// escaped ID): the windows read them with the specs, from each
	// partition's start; those of the cursor's partition lie before the
	// cursor and are read in the same request as the first window.
	pauses := map[string]*mvccpb.KeyValue{}
	pausesOf := -1 // the partition whose pause keys the first window reads apart
	if cursor != "" && s.cursorPartition(cursor) >= 0 {
		pausesOf = p
	}
	last := "" // the spec key of docs' last document
	bytes := 0 // docs' stored bytes: the page ends at MaxListPageBytes
	// seen counts the spec keys of the windows read from their first
	// partition's start and covered their partitions: the density the
	// next window is sized from. The cursor's window, read from the
	// cursor, would make the jobs look sparser than they are.
	seen, covered, whole := 0, 0, cursor == ""
	for p < s.partitions {
		hi := min(s.partitions, p+span)
		end := clientv3.GetPrefixRangeEnd(prefix)
		if hi < s.partitions {
			end = s.keys.PartitionJobsPrefix(hi)
		}
		resp, err := s.window(ctx, from, end, s.sizes.keys(MaxListPageBytes-bytes, limit+1-len(docs)), pausesOf, pauses)
		if err != nil {
			return nil, "", Classify(err)
		}
		pausesOf = -1
		specs, specBytes := 0, 0
		for _, kv := range resp.Kvs {
			rest := strings.TrimPrefix(string(kv.Key), prefix)
			if strings.Count(rest, "/") != 1 { // a trigger or pause key
				if s.isPauseKey(string(kv.Key)) {
					pauses[string(kv.Key)] = kv
				}
				continue
			}
			if len(docs) == limit || bytes >= MaxListPageBytes {
				s.sizes.learn(specs, specBytes)
				next := strings.TrimPrefix(last, prefix)
				s.learnDensity(first, s.cursorPartition(next), len(docs))
				s.withPauses(docs, specKeys, pauses)
				return docs, next, nil
			}
			docs = append(docs, StoredDoc{Value: kv.Value, Revision: kv.ModRevision})
			specKeys = append(specKeys, string(kv.Key))
			last = string(kv.Key)
			specs++
			specBytes += len(kv.Value)
			bytes += len(kv.Value)
		}
		s.sizes.learn(specs, specBytes)
		if whole {
			seen += specs
		}
		if resp.More {
			from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
			continue
		}
		if whole {
			covered += hi - p
		}
		p, whole = hi, true
		if p < s.partitions {
			from = s.keys.PartitionJobsPrefix(p)
		}
		span = nextSpan(span, limit+1-len(docs), seen, covered, s.partitions)
	}
	s.withPauses(docs, specKeys, pauses)
	return docs, "", nil
}

// window reads up to limit keys from from to end; if pausesOf is a
// partition, it also reads that partition's pause keys into pauses, in
// the same request.
func (s *Etcd) window(ctx context.Context, from, end string, limit, pausesOf int, pauses map[string]*mvccpb.KeyValue) (*clientv3.GetResponse, error) {
	get := clientv3.OpGet(from, clientv3.WithRange(end), clientv3.WithLimit(int64(limit)))
	if pausesOf < 0 {
		resp, err := s.client.Do(ctx, get)
		return resp.Get(), err
	}
	resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(s.keys.PausePrefix(pausesOf), clientv3.WithPrefix()), get).Commit()
	if err != nil {
		return nil, err
	}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		pauses[string(kv.Key)] = kv
	}
	return (*clientv3.GetResponse)(resp.Responses[1].GetResponseRange()), nil
}

// density returns the spec keys per partition, in thousandths, that the
// last full listing page saw (0: none yet).
func (s *Etcd) density() int64 {
	if s.listDensity == nil {
		return 0
	}
	return s.listDensity.Load()
}

// learnDensity records the density of a full page of n jobs read from
// partition from to partition to (its last job's): n over the partitions
// it spanned, counting the first and the last as half each, since the
// page started and ended within them (on average in their middle).
func (s *Etcd) learnDensity(from, to, n int) {
	if s.listDensity == nil || to < from {
		return
	}
	s.listDensity.Store(max(1, int64(n)*1_000_000/int64(max(500, (to-from)*1000))))
}

// nextSpan is the number of partitions of listDocs' next window: enough,
// at the seen keys per covered partitions, for need more keys and a
// quarter more; twice the last span when no key was seen yet; between 1
// and partitions.
func nextSpan(last, need, seen, covered, partitions int) int {
	span := 2 * last
	if seen > 0 {
		span = (need*covered*5 + 4*seen - 1) / (4 * seen)
	}
	return max(1, min(span, partitions))
}

// cursorPartition is the partition of a cursor List made (the partition's
// key segment, then "/"), or -1 for any other string.
func (s *Etcd) cursorPartition(cursor string) int {
	ps, _, ok := strings.Cut(cursor, "/")
	if !ok {
		return -1
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 0 || p >= s.partitions || s.keys.PartitionJobsPrefix(p) != s.keys.JobsPrefix()+ps+"/" {
		return -1
	}
	return p
}

// Runs returns up to limit (1..1000) of job id's runs, newest first, and
// no more than fit in MaxListPageBytes: the runs end with the first whose
// document reaches that size (a run document is at most its budget,
// 256 KiB by default, so 1 000 of them could be 256 MiB). They are read
// in pieces sized from the mean run document size seen so far.
func (s *Etcd) Runs(ctx context.Context, id string, limit int) ([]Run, error) {
	if limit < 1 || limit > 1000 {
		return nil, fmt.Errorf("%w: limit %d outside 1..1000", ErrInvalidJob, limit)
	}
	prefix := s.keys.RunPrefix(s.Partition(id), id)
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	runs := make([]Run, 0, min(limit, 100))
	var rev int64 // every piece is read at the first one's revision
	for bytes := 0; len(runs) < limit && bytes < MaxListPageBytes; {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend),
			clientv3.WithLimit(int64(s.runSizes.keys(MaxListPageBytes-bytes, limit-len(runs))))}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.client.Get(ctx, from, opts...)
		if err != nil {
			return nil, Classify(err)
		}
		rev = resp.Header.Revision
		got := 0
		for _, kv := range resp.Kvs {
			got += len(kv.Value)
			if bytes >= MaxListPageBytes {
				continue // read, but past the reply's end
			}
			var r Run
			if err := json.Unmarshal(kv.Value, &r); err != nil {
				return nil, fmt.Errorf("stored run %s is corrupt: %w", kv.Key, err)
			}
			runs = append(runs, r)
			bytes += len(kv.Value)
		}
		s.runSizes.learn(len(resp.Kvs), got)
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		// Newest first: the next piece lies below the oldest run read.
		end = string(resp.Kvs[len(resp.Kvs)-1].Key)
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

// States returns the scheduling states of jobs (as listed: each with its
// Partition), in order, nil for a job whose owner has not taken it in; at
// most 64 reads per request.
func (s *Etcd) States(ctx context.Context, jobs []Job) ([]*JobState, error) {
	out := make([]*JobState, 0, len(jobs))
	for i := 0; i < len(jobs); i += 64 {
		chunk := jobs[i:min(i+64, len(jobs))]
		ops := make([]clientv3.Op, len(chunk))
		for k, j := range chunk {
			ops[k] = clientv3.OpGet(s.keys.State(j.Partition, j.ID))
		}
		resp, err := s.client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, Classify(err)
		}
		for _, r := range resp.Responses {
			out = append(out, decodeState(r.GetResponseRange().Kvs))
		}
	}
	return out, nil
}
