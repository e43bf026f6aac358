package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// TestPauseWritesASmallKey pauses and resumes a job of about a megabyte:
// each writes only the job's pause key, a few dozen bytes, and leaves the
// document's version in etcd as it was; every read shows the state set
// last, with a revision and update time that move on as an edit's do.
func TestPauseWritesASmallKey(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	s := store.NewEtcd(client, etcdtest.Namespace(t), 4, api.DefaultLimits(), nil)
	big := api.Job{ID: "team/big", Schedule: "@hourly", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"},
		Payload: []byte(`{"blob":"` + strings.Repeat("x", 250<<10) + `"}`)}
	created, err := s.Create(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Partition(big.ID)
	specKey, pauseKey := s.Keys().Spec(p, big.ID), s.Keys().Pause(p, big.ID)

	rev := created.Revision
	for i, paused := range []bool{true, false, true} {
		j, err := s.SetPaused(ctx, big.ID, paused)
		if err != nil {
			t.Fatal(err)
		}
		if j.Paused != paused || j.Revision <= rev || string(j.Payload) != string(big.Payload) {
			t.Fatalf("SetPaused(%v) #%d: paused %v revision %d (before %d), payload kept %v", paused, i, j.Paused, j.Revision, rev, string(j.Payload) == string(big.Payload))
		}
		rev = j.Revision
		spec, err := client.Get(ctx, specKey)
		if err != nil {
			t.Fatal(err)
		}
		if spec.Kvs[0].ModRevision != created.Revision {
			t.Fatalf("SetPaused(%v) rewrote the document: its mod revision is %d, was %d", paused, spec.Kvs[0].ModRevision, created.Revision)
		}
		pk, err := client.Get(ctx, pauseKey)
		if err != nil {
			t.Fatal(err)
		}
		if len(pk.Kvs) != 1 || len(pk.Kvs[0].Value) > 100 {
			t.Fatalf("pause key %s: %v, want one value of at most 100 bytes", pauseKey, pk.Kvs)
		}
		got, err := s.Get(ctx, big.ID)
		if err != nil {
			t.Fatal(err)
		}
		listed, _, err := s.List(ctx, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		scoped, _, err := s.ListPrefix(ctx, "team/", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		for what, r := range map[string][]api.Job{"Get": {got}, "List": listed, "ListPrefix": scoped} {
			if len(r) != 1 || r[0].Paused != paused || r[0].Revision != rev || !r[0].UpdatedAt.Equal(j.UpdatedAt) {
				t.Errorf("%s after SetPaused(%v): %d jobs, first paused %v revision %d updated %v; want paused, revision %d, updated %v",
					what, paused, len(r), r[0].Paused, r[0].Revision, r[0].UpdatedAt, rev, j.UpdatedAt)
			}
		}
	}
	again, err := s.SetPaused(ctx, big.ID, true)
	if err != nil || again.Revision != rev {
		t.Errorf("pausing a paused job: revision %d, %v; want unchanged %d", again.Revision, err, rev)
	}
}

// TestPauseAndEditsOrder checks that the job document and the pause key
// are one setting, the later write deciding: a put decides by its
// document and removes the key, a document read before a pause or resume
// is stale (alone and in a batch), and a delete removes the key.
func TestPauseAndEditsOrder(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	s := store.NewEtcd(client, etcdtest.Namespace(t), 4, api.DefaultLimits(), nil)
	job := api.Job{ID: "j", Schedule: "@hourly", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"}}
	read, err := s.Create(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	paused, err := s.SetPaused(ctx, "j", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(ctx, read); !errors.Is(err, api.ErrStaleRevision) {
		t.Errorf("put of a document read before a pause: %v, want a stale revision", err)
	}
	res, err := s.WriteBatch(ctx, []store.BatchItem{{Job: read}}, store.BatchApply)
	if err != nil || !errors.Is(res[0].Err, api.ErrStaleRevision) {
		t.Errorf("batch of a document read before a pause: %v %v, want a stale revision", res, err)
	}
	// A batch item naming the current revision writes, and its document
	// decides.
	res, err = s.WriteBatch(ctx, []store.BatchItem{{Job: paused}}, store.BatchApply)
	if err != nil || res[0].Err != nil {
		t.Fatalf("batch of the current document: %v %v", res, err)
	}
	if got, _ := s.Get(ctx, "j"); !got.Paused || got.Revision != res[0].Job.Revision {
		t.Errorf("after the batch of a paused document: paused %v revision %d, want paused at %d", got.Paused, got.Revision, res[0].Job.Revision)
	}
	// Resume, then put a document saying paused: the put, later, decides.
	cur, err := s.SetPaused(ctx, "j", false)
	if err != nil {
		t.Fatal(err)
	}
	cur.Paused = true
	put, _, err := s.Put(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "j"); !got.Paused || got.Revision != put.Revision {
		t.Errorf("after a put saying paused: paused %v revision %d, want paused at %d", got.Paused, got.Revision, put.Revision)
	}
	pauseKey := s.Keys().Pause(s.Partition("j"), "j")
	if resp, _ := client.Get(ctx, pauseKey); len(resp.Kvs) != 0 {
		t.Errorf("the put left the pause key %s", pauseKey)
	}
	if _, err := s.SetPaused(ctx, "j", false); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "j"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := client.Get(ctx, pauseKey); len(resp.Kvs) != 0 {
		t.Errorf("the delete left the pause key %s", pauseKey)
	}
	// Created again, the job is not paused by anything of the old one.
	if _, err := s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "j"); got.Paused {
		t.Error("a job created again is paused")
	}
}

// TestPauseKeysInListings pauses every third of many jobs spread over the
// partitions, with IDs that sort between a spec and others' keys, and
// lists them in pages of every size: each page shows each job's state.
func TestPauseKeysInListings(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	s := store.NewEtcd(client, etcdtest.Namespace(t), 8, api.DefaultLimits(), nil)
	want := map[string]bool{}
	for i := range 60 {
		id := strings.Repeat("a", 1+i%3) + "-" + string(rune('a'+i%26)) + time.Duration(i).String()
		if _, err := s.Create(ctx, api.Job{ID: id, Schedule: "@hourly", Executor: api.Executor{Type: "http", URL: "http://127.0.0.1:9/"}}); err != nil {
			t.Fatal(err)
		}
		want[id] = i%3 == 0
		if want[id] {
			if _, err := s.SetPaused(ctx, id, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, limit := range []int{1, 2, 7, 60} {
		for _, prefix := range []string{"", "a"} {
			got := map[string]bool{}
			for cursor := ""; ; {
				page, next, err := s.ListPrefix(ctx, prefix, cursor, limit)
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range page {
					got[j.ID] = j.Paused
				}
				if next == "" {
					break
				}
				cursor = next
			}
			if len(got) != len(want) {
				t.Fatalf("limit %d prefix %q: listed %d jobs, want %d", limit, prefix, len(got), len(want))
			}
			for id, p := range want {
				if got[id] != p {
					t.Errorf("limit %d prefix %q: job %q paused %v, want %v", limit, prefix, id, got[id], p)
				}
			}
		}
	}
	if resp, err := client.Get(ctx, s.Keys().JobsPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 80 {
		t.Errorf("%d keys under jobs/ (%v), want 60 specs and 20 pause keys", resp.Count, err)
	}
}
