package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// rangeCounter records the Count etcd reported for each range read, also
// those inside transactions: the keys of the whole range asked for, which
// etcd walks even when a limit returns fewer; and the requests that read
// (a range, or a transaction of ranges).
type rangeCounter struct {
	mu       sync.Mutex
	counts   []int64
	requests int
	bytes    int // the values' bytes of the largest reply since reset
}

func (rc *rangeCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		return err
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	switch r := reply.(type) {
	case *etcdserverpb.RangeResponse:
		rc.counts = append(rc.counts, r.Count)
		rc.requests++
		rc.bytes = max(rc.bytes, valueBytes(r))
	case *etcdserverpb.TxnResponse:
		n := 0
		for _, op := range r.Responses {
			if rr := op.GetResponseRange(); rr != nil {
				rc.counts = append(rc.counts, rr.Count)
				n += valueBytes(rr)
			}
		}
		rc.requests++
		rc.bytes = max(rc.bytes, n)
	}
	return nil
}

// valueBytes is the size of the values a range read returned.
func valueBytes(r *etcdserverpb.RangeResponse) int {
	n := 0
	for _, kv := range r.Kvs {
		n += len(kv.Value)
	}
	return n
}

// largestReply returns the values' bytes of the largest reply since the
// last reset.
func (rc *rangeCounter) largestReply() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.bytes
}

// reset returns the largest count and the requests since the last reset.
func (rc *rangeCounter) reset() (largest int64, requests int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	largest, requests = slices.Max(append(rc.counts, 0)), rc.requests
	rc.counts, rc.requests, rc.bytes = nil, 0, 0
	return largest, requests
}

// client returns a client of a fresh etcd whose range reads rc counts; it
// is closed when the test ends.
func (rc *rangeCounter) client(t *testing.T) *clientv3.Client {
	t.Helper()
	srv := etcdtest.New(t)
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   srv.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(rc.intercept)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// TestListPagesReadBoundedRanges lists jobs page by page and checks the
// pages against the keys in etcd (every job once, in key order, whatever
// the page size, with trigger keys among the specs and partitions with no
// job), cursors that List did not make, and that no range read for a page
// covers many more keys than the page needs: etcd counts every key of a
// range, so a page read from one range to the end of the jobs would cost
// the store every job after the cursor.
func TestListPagesReadBoundedRanges(t *testing.T) {
	const partitions = 64
	rc := &rangeCounter{}
	client := rc.client(t)
	ctx := context.Background()

	type fill struct {
		name string
		ids  []string
	}
	many := make([]string, 1500)
	for i := range many {
		many[i] = fmt.Sprintf("job-%05d", i)
	}
	// Jobs in only two partitions: windows over empty partitions.
	var sparse []string
	for i := 0; len(sparse) < 150; i++ {
		id := fmt.Sprintf("sparse-%d", i)
		if p := shard.Partition(id, partitions); p == 5 || p == 40 {
			sparse = append(sparse, id)
		}
	}
	for _, fl := range []fill{{"empty", nil}, {"sparse", sparse}, {"many", many}} {
		t.Run(fl.name, func(t *testing.T) {
			ns := etcdtest.Namespace(t)
			s := store.NewEtcd(client, ns, partitions, api.DefaultLimits(), nil)
			keys := s.Keys()
			perPartition := map[int]int64{}
			var ops []clientv3.Op
			flush := func() {
				if len(ops) > 0 {
					if _, err := client.Txn(ctx).Then(ops...).Commit(); err != nil {
						t.Fatal(err)
					}
					ops = ops[:0]
				}
			}
			for i, id := range fl.ids {
				p := shard.Partition(id, partitions)
				val, err := json.Marshal(api.Job{ID: id, Partition: p, Executor: api.Executor{Type: "x"}})
				if err != nil {
					t.Fatal(err)
				}
				ops = append(ops, clientv3.OpPut(keys.Spec(p, id), string(val)))
				perPartition[p]++
				if i%5 == 0 { // trigger keys sort right after their job's spec
					for k := range 3 {
						ops = append(ops, clientv3.OpPut(keys.Trigger(p, id, time.Unix(int64(k), 0)), "{}"))
						perPartition[p]++
					}
				}
				if len(ops) >= 100 {
					flush()
				}
			}
			flush()
			// The expected order: spec keys in key order.
			resp, err := client.Get(ctx, keys.JobsPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil {
				t.Fatal(err)
			}
			var want []string // spec keys without the jobs prefix
			for _, kv := range resp.Kvs {
				if rest := strings.TrimPrefix(string(kv.Key), keys.JobsPrefix()); strings.Count(rest, "/") == 1 {
					want = append(want, rest)
				}
			}
			if len(want) != len(fl.ids) {
				t.Fatalf("%d spec keys in etcd, want %d", len(want), len(fl.ids))
			}
			var densest int64
			for _, n := range perPartition {
				densest = max(densest, n)
			}
			rc.reset()
			for _, limit := range []int{1, 7, 100, 1000} {
				if limit == 1 && len(want) > 200 {
					continue // a page per job: slow, and no different
				}
				var got []string
				cursor, pages := "", 0
				var largest int64
				for {
					jobs, next, err := s.List(ctx, cursor, limit)
					if err != nil {
						t.Fatalf("limit %d, page %d: %v", limit, pages+1, err)
					}
					pages++
					l, _ := rc.reset()
					largest = max(largest, l)
					if len(jobs) > limit || (next != "" && len(jobs) != limit) {
						t.Fatalf("limit %d, page %d: %d jobs and next cursor %q", limit, pages, len(jobs), next)
					}
					for _, j := range jobs {
						got = append(got, fmt.Sprintf("%05d/%s", j.Partition, api.EscapeID(j.ID)))
					}
					if next == "" {
						break
					}
					if next != got[len(got)-1] {
						t.Fatalf("limit %d, page %d: next cursor %q, want the last job's key %q", limit, pages, next, got[len(got)-1])
					}
					cursor = next
					if pages > len(want)+1 {
						t.Fatalf("limit %d: pagination does not end", limit)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("limit %d: listed %d jobs over %d pages, not the %d spec keys in key order", limit, len(got), pages, len(want))
				}
				// A window is sized for a page and a quarter at the density
				// seen, and the first is one partition.
				if bound := 4*int64(limit+1) + 2*densest; largest > bound {
					t.Errorf("limit %d: a range of %d keys was read for a page (want at most %d; %d jobs)", limit, largest, bound, len(want))
				}
			}
			// Cursors List did not make list the jobs after them in key
			// order, as a range from them would.
			for _, c := range []string{"00003", "00005/", "00005/zzz", "00040/sparse-", "00063/~", "zzz", "9/x", "-1/x", "00064/x", "0005/x"} {
				jobs, _, err := s.List(ctx, c, 1000)
				if err != nil {
					t.Fatalf("cursor %q: %v", c, err)
				}
				var after []string
				for _, k := range want {
					if k > c+"\x00" && len(after) < 1000 {
						after = append(after, k)
					}
				}
				var got []string
				for _, j := range jobs {
					got = append(got, fmt.Sprintf("%05d/%s", j.Partition, api.EscapeID(j.ID)))
				}
				if !slices.Equal(got, after) {
					t.Errorf("cursor %q: listed %d jobs, want the %d after it in key order", c, len(got), len(after))
				}
			}
		})
	}
}

// TestListPageIsMostlyOneRangeRead lists jobs spread evenly over the
// partitions and checks that after the first page, whose windows learn
// the jobs per partition, a page costs about one request (its first
// window, with the pause keys of the cursor's partition): the first
// window of each page is sized from the last full page, where growing
// windows (one partition, then two, then the rest) took three.
func TestListPageIsMostlyOneRangeRead(t *testing.T) {
	const partitions, n, limit = 64, 3000, 200
	rc := &rangeCounter{}
	client := rc.client(t)
	ctx := context.Background()
	s := store.NewEtcd(client, etcdtest.Namespace(t), partitions, api.DefaultLimits(), nil)
	var ops []clientv3.Op
	for i := range n {
		id := fmt.Sprintf("job-%05d", i)
		p := shard.Partition(id, partitions)
		ops = append(ops, clientv3.OpPut(s.Keys().Spec(p, id), fmt.Sprintf(`{"id":%q,"partition":%d}`, id, p)))
		if len(ops) == 100 || i == n-1 {
			if _, err := client.Txn(ctx).Then(ops...).Commit(); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	rc.reset()
	cursor, pages, ranges, listed := "", 0, 0, 0
	for {
		jobs, next, err := s.List(ctx, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		listed += len(jobs)
		_, r := rc.reset()
		if pages++; pages > 1 && next != "" {
			ranges += r
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if listed != n {
		t.Fatalf("listed %d jobs, want %d", listed, n)
	}
	if full := pages - 2; float64(ranges) > 1.25*float64(full) {
		t.Errorf("%d requests for %d full pages after the first, want about one each", ranges, full)
	}
}
