package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// TestListPagesAreBoundedByBytes lists a store that mixes small jobs with
// 60 jobs of 700 KiB (42 MB in all), with and without a prefix, at the
// largest page: every page holds less than MaxListPageBytes and one
// document, after a listing's first page no read of etcd returned more
// than four pages' bytes (reads are sized from the mean document size
// seen, which the first read does not know and a read of a different mix
// may miss), and every job is listed exactly once, in key order. Counted only by jobs, a
// page of 1 000 such documents would be most of a GiB.
func TestListPagesAreBoundedByBytes(t *testing.T) {
	const (
		partitions = 16
		bigBytes   = 700 << 10
	)
	rc := &rangeCounter{}
	client := rc.client(t)
	ctx := context.Background()
	ns := "bytes"
	s := store.NewEtcd(client, ns, partitions, api.DefaultLimits(), nil)
	keys := s.Keys()
	big := json.RawMessage(`"` + strings.Repeat("x", bigBytes) + `"`)
	var ids []string
	for i := range 600 {
		id := fmt.Sprintf("small/%03d", i)
		if i%10 == 0 { // 60 big jobs, among the small ones
			id = fmt.Sprintf("big/%03d", i)
		}
		ids = append(ids, id)
		j := api.Job{ID: id, Partition: shard.Partition(id, partitions), Executor: api.Executor{Type: "x"}}
		if strings.HasPrefix(id, "big/") {
			j.Payload = big
		}
		val, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Put(ctx, keys.Spec(j.Partition, id), string(val)); err != nil {
			t.Fatal(err)
		}
	}
	for _, prefix := range []string{"", "big/", "small/"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			want := map[string]bool{}
			for _, id := range ids {
				if strings.HasPrefix(id, prefix) {
					want[id] = true
				}
			}
			seen := map[string]bool{}
			cursor, pages := "", 0
			for {
				rc.reset()
				docs, next, err := s.ListPrefixDocs(ctx, prefix, cursor, 1000)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				bytes := 0
				for _, d := range docs {
					bytes += len(d.Value)
					j, err := d.Job()
					if err != nil {
						t.Fatal(err)
					}
					if seen[j.ID] {
						t.Fatalf("page %d lists %s again", pages, j.ID)
					}
					seen[j.ID] = true
				}
				if bytes >= store.MaxListPageBytes+api.DefaultMaxDocumentBytes {
					t.Fatalf("page %d holds %d documents of %d bytes: want less than %d", pages, len(docs), bytes, store.MaxListPageBytes+api.DefaultMaxDocumentBytes)
				}
				if r := rc.largestReply(); pages > 1 && r > 4*store.MaxListPageBytes {
					t.Fatalf("page %d read %d bytes from etcd in one reply: want at most %d", pages, r, 4*store.MaxListPageBytes)
				}
				if next == "" {
					break
				}
				if pages > 400 {
					t.Fatal("no end of listing after 400 pages")
				}
				cursor = next
			}
			if len(seen) != len(want) {
				t.Fatalf("listed %d jobs, want %d", len(seen), len(want))
			}
			for id := range want {
				if !seen[id] {
					t.Fatalf("%s not listed", id)
				}
			}
			if prefix != "small/" && pages < 60*bigBytes/store.MaxListPageBytes {
				t.Fatalf("%d pages for 60 documents of %d bytes: the pages were not bounded by bytes", pages, bigBytes)
			}
		})
	}
}

// TestRunsAreBoundedByBytes: a job's runs come newest first, limit of
// them or as many as end at MaxListPageBytes of documents, whichever is
// fewer, and they are the newest ones in order, whether the runs are
// small or near the run budget.
func TestRunsAreBoundedByBytes(t *testing.T) {
	client := (&rangeCounter{}).client(t)
	ctx := context.Background()
	s := store.NewEtcd(client, "runs", 8, api.DefaultLimits(), nil)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	put := func(id string, n, outputBytes int) {
		p := s.Partition(id)
		for i := range n {
			at := t0.Add(time.Duration(i) * time.Minute)
			r := api.Run{ID: store.RunID(id, at), JobID: id, ScheduledAt: at, Status: api.RunSucceeded,
				Attempts: []api.Attempt{{Output: strings.Repeat("o", outputBytes)}}}
			val, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.Put(ctx, s.Keys().Run(p, id, at), string(val)); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("small", 300, 10)
	put("large", 40, 200<<10)
	for _, tc := range []struct {
		id        string
		limit     int
		wantAtMin int // runs at least
	}{
		{"small", 1000, 300}, {"small", 7, 7}, {"large", 1000, store.MaxListPageBytes / (200 << 10)}, {"large", 3, 3},
	} {
		runs, err := s.Runs(ctx, tc.id, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		bytes := 0
		for i, r := range runs {
			want := t0.Add(time.Duration(299-i) * time.Minute)
			if tc.id == "large" {
				want = t0.Add(time.Duration(39-i) * time.Minute)
			}
			if !r.ScheduledAt.Equal(want) {
				t.Fatalf("%s limit %d: run %d is of %v, want %v (newest first)", tc.id, tc.limit, i, r.ScheduledAt, want)
			}
			val, _ := json.Marshal(r)
			bytes += len(val)
		}
		if len(runs) < tc.wantAtMin || len(runs) > tc.limit {
			t.Fatalf("%s limit %d: %d runs, want %d to %d", tc.id, tc.limit, len(runs), tc.wantAtMin, tc.limit)
		}
		if bytes >= store.MaxListPageBytes+store.DefaultMaxRunBytes {
			t.Fatalf("%s limit %d: %d runs of %d bytes, want less than %d", tc.id, tc.limit, len(runs), bytes, store.MaxListPageBytes+store.DefaultMaxRunBytes)
		}
	}
}
