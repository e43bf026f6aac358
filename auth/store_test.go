package auth_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
)

// TestCreateCapHoldsUnderConcurrency races creates of one creator against
// its cap: exactly the cap succeed, the others are ErrTooMany, and other
// creators are not affected.
func TestCreateCapHoldsUnderConcurrency(t *testing.T) {
	client, ns := etcd.Client(t), etcdtest.Namespace(t)
	s := auth.NewStoreConfig(client, ns, nil, auth.StoreConfig{MaxPerCreator: 3})
	var (
		wg           sync.WaitGroup
		mu           sync.Mutex
		made, refuse int
		other        error
	)
	for range 12 {
		wg.Go(func() {
			_, _, err := s.Create(context.Background(), api.CreateRequest{Role: api.RoleViewer}, "team-admin")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				made++
			case errors.Is(err, auth.ErrTooMany):
				refuse++
			default:
				other = err
			}
		})
	}
	wg.Wait()
	if other != nil {
		t.Fatalf("create: %v", other)
	}
	if made != 3 || refuse != 9 {
		t.Fatalf("got %d made and %d refused, want 3 and 9", made, refuse)
	}
	if _, _, err := s.Create(context.Background(), api.CreateRequest{Role: api.RoleViewer}, "other-admin"); err != nil {
		t.Fatalf("another creator refused: %v", err)
	}
	// Issue replaces a fixed ID and is not counted.
	if _, _, err := s.Issue(context.Background(), "dev-admin", api.CreateRequest{Role: api.RoleAdmin}, "team-admin"); err != nil {
		t.Fatalf("Issue refused: %v", err)
	}
}

// TestExpiredCredentialsAreRemoved checks that Create and ListPage delete
// expired credentials (bounded by Sweep), that expired ones do not count
// against the cap, and that a credential issued again under an expired
// one's ID is kept.
func TestExpiredCredentialsAreRemoved(t *testing.T) {
	client, ns := etcd.Client(t), etcdtest.Namespace(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := auth.NewStoreConfig(client, ns, clock.Now, auth.StoreConfig{MaxPerCreator: 2, Sweep: 3})
	ctx := context.Background()
	for range 2 {
		if _, _, err := s.Create(ctx, api.CreateRequest{Role: api.RoleViewer, TTL: "1h"}, "a"); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, _, err := s.Create(ctx, api.CreateRequest{Role: api.RoleViewer, TTL: "1h"}, fmt.Sprint("b", clock.Now().UnixNano())); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Millisecond)
	}
	if _, _, err := s.Issue(ctx, "fixed", api.CreateRequest{Role: api.RoleViewer, TTL: "1h"}, ""); err != nil {
		t.Fatal(err)
	}
	count := func() int64 {
		resp, err := client.Get(ctx, auth.TokensPrefix(ns), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	if _, _, err := s.Create(ctx, api.CreateRequest{Role: api.RoleViewer}, "a"); !errors.Is(err, auth.ErrTooMany) {
		t.Fatalf("third create of a: %v, want ErrTooMany", err)
	}
	clock.Advance(2 * time.Hour) // all six expire
	if _, _, err := s.Issue(ctx, "fixed", api.CreateRequest{Role: api.RoleViewer}, ""); err != nil {
		t.Fatal(err) // issued again: no longer expired
	}
	// One create deletes at most Sweep (3) of the 5 expired ones, and no
	// longer counts a's expired credentials.
	if _, _, err := s.Create(ctx, api.CreateRequest{Role: api.RoleViewer}, "a"); err != nil {
		t.Fatalf("create after a's credentials expired: %v", err)
	}
	if got := count(); got != 1+5-3+1 {
		t.Fatalf("got %d credentials after one sweep, want 4 (fixed, 2 expired left, the new one)", got)
	}
	page, next, err := s.ListPage(ctx, "", 0)
	if err != nil || next != "" {
		t.Fatalf("ListPage: %v, next %q", err, next)
	}
	if got := count(); got != 2 || len(page) != 2 || !slices.ContainsFunc(page, func(tok api.Token) bool { return tok.ID == "fixed" }) {
		t.Fatalf("after listing: %d credentials stored, page %v; want the new one and fixed", got, page)
	}
}

// TestListPage checks paging: IDs in order, each once, the cursor
// continuing after the last, and bad cursors and limits refused.
func TestListPage(t *testing.T) {
	client, ns := etcd.Client(t), etcdtest.Namespace(t)
	s := auth.NewStore(client, ns, nil)
	ctx := context.Background()
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("c%d", i)
		if _, _, err := s.Issue(ctx, id, api.CreateRequest{Role: api.RoleViewer}, ""); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	var got []string
	cursor := ""
	for pages := 0; pages < 10; pages++ {
		page, next, err := s.ListPage(ctx, cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 3 {
			t.Fatalf("page of %d, want at most 3", len(page))
		}
		for _, tok := range page {
			got = append(got, tok.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages list %v, want %v", got, want)
	}
	all, err := s.List(ctx)
	if err != nil || len(all) != 7 {
		t.Fatalf("List: %d, %v", len(all), err)
	}
	for _, tt := range []struct {
		cursor string
		limit  int
	}{{"NOT AN ID", 1}, {"", -1}, {"", auth.MaxListLimit + 1}} {
		if _, _, err := s.ListPage(ctx, tt.cursor, tt.limit); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("ListPage(%q, %d): %v, want ErrInvalid", tt.cursor, tt.limit, err)
		}
	}
}
