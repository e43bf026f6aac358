package standby_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/dispatch/standby"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// TestTakeFollowsTheWatch: a copy taken after writes made once it was
// read holds them, specs decoded (without their value) and other keys as
// written, at a revision at least the epoch asked; the copy then leaves
// the standby, and a second take finds none.
func TestTakeFollowsTheWatch(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	k := store.Keys{NS: ns}
	s, err := standby.New(exampleMember(client, ns), func() (standby.Heirs, <-chan struct{}) { return standby.Heirs{Of: map[int]bool{0: true}}, nil }, standby.Config{CatchUp: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { s.Run(ctx) })
	for deadline := time.Now().Add(10 * time.Second); !s.Held(0); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the standby did not read its copy within 10s")
		}
	}
	for i := range 3 {
		if _, err := client.Put(ctx, k.Spec(0, fmt.Sprintf("j%d", i)), fmt.Sprintf("spec %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.Put(ctx, k.Queue(0, "j0", time.Unix(0, 0)), "queued"); err != nil {
		t.Fatal(err)
	}
	last, err := client.Put(ctx, k.Spec(1, "other"), "another partition's")
	if err != nil {
		t.Fatal(err)
	}
	snap := s.Take(ctx, 0, last.Header.Revision)
	if snap == nil {
		t.Fatal("no copy to take")
	}
	if snap.Rev() < last.Header.Revision {
		t.Fatalf("copy at revision %d, before the epoch %d", snap.Rev(), last.Header.Revision)
	}
	var got []string
	for _, kv := range snap.KVs() {
		if d := snap.Decoded(kv); d != nil {
			got = append(got, fmt.Sprintf("%s decoded %q (value %q)", kv.Key, *d, kv.Value))
		} else {
			got = append(got, fmt.Sprintf("%s %q", kv.Key, kv.Value))
		}
	}
	want := []string{
		fmt.Sprintf("%s decoded %q (value %q)", k.Spec(0, "j0"), "spec 0", ""),
		fmt.Sprintf("%s decoded %q (value %q)", k.Spec(0, "j1"), "spec 1", ""),
		fmt.Sprintf("%s decoded %q (value %q)", k.Spec(0, "j2"), "spec 2", ""),
		fmt.Sprintf("%s %q", k.Queue(0, "j0", time.Unix(0, 0)), "queued"),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("copy:\n%q\nwant:\n%q", got, want)
	}
	if again := s.Take(ctx, 0, last.Header.Revision); again != nil {
		t.Fatal("a copy taken twice")
	}
}
