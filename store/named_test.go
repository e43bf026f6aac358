package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// TestNamedDocumentCountIsCapped fills the fleet to one below its most
// calendars (api.MaxCalendars) and limits (api.MaxLimits), then stores
// through the store: the last one fits, the next new one is refused with
// the kind's error and writes nothing, a replacement of a stored one is
// still accepted, and a deletion makes room for a new one.
func TestNamedDocumentCountIsCapped(t *testing.T) {
	client := etcdtest.New(t).Client(t)
	ctx := context.Background()
	cases := []struct {
		kind   string
		most   int
		full   error
		prefix func(store.Keys) string
		key    func(store.Keys, string) string
		put    func(s *store.Etcd, name string) (created bool, err error)
		delete func(s *store.Etcd, name string) error
	}{
		{
			kind: "calendar", most: api.MaxCalendars, full: store.ErrCalendarLimit,
			prefix: store.Keys.CalendarPrefix, key: store.Keys.Calendar,
			put: func(s *store.Etcd, name string) (bool, error) {
				_, created, err := s.PutCalendar(ctx, api.Calendar{Name: name, Dates: []string{"2026-12-25"}})
				return created, err
			},
			delete: func(s *store.Etcd, name string) error { return s.DeleteCalendar(ctx, name) },
		},
		{
			kind: "limit", most: api.MaxLimits, full: store.ErrLimitCount,
			prefix: store.Keys.LimitDefPrefix, key: store.Keys.LimitDef,
			put: func(s *store.Etcd, name string) (bool, error) {
				two := 2
				_, created, err := s.PutLimit(ctx, api.Limit{Key: name, MaxRunning: &two})
				return created, err
			},
			delete: func(s *store.Etcd, name string) error { return s.DeleteLimit(ctx, name) },
		},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			s := store.NewEtcd(client, etcdtest.Namespace(t), 4, api.DefaultLimits(), nil)
			k := s.Keys()
			count := func() int64 {
				t.Helper()
				resp, err := client.Get(ctx, c.prefix(k), clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				return resp.Count
			}
			// The first most−1 straight into etcd, 100 a transaction: the
			// cap counts keys, whatever they hold.
			for i := 0; i < c.most-1; i += 100 {
				var ops []clientv3.Op
				for j := i; j < min(i+100, c.most-1); j++ {
					ops = append(ops, clientv3.OpPut(c.key(k, fmt.Sprintf("filler-%05d", j)), "{}"))
				}
				if _, err := client.Txn(ctx).Then(ops...).Commit(); err != nil {
					t.Fatal(err)
				}
			}
			if created, err := c.put(s, "last"); err != nil || !created {
				t.Fatalf("the %s that makes %d: created %v, %v; want created", c.kind, c.most, created, err)
			}
			_, err := c.put(s, "one-too-many")
			if !errors.Is(err, c.full) {
				t.Fatalf("a new %s beyond %d: %v, want %v", c.kind, c.most, err, c.full)
			}
			if got := count(); got != int64(c.most) {
				t.Fatalf("%d %ss stored after the refusal, want %d", got, c.kind, c.most)
			}
			if resp, err := client.Get(ctx, c.key(k, "one-too-many"), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
				t.Fatalf("the refused %s was written: %v, %v", c.kind, resp, err)
			}
			if created, err := c.put(s, "last"); err != nil || created {
				t.Fatalf("replacing a stored %s at the cap: created %v, %v; want replaced", c.kind, created, err)
			}
			if err := c.delete(s, "last"); err != nil {
				t.Fatal(err)
			}
			if created, err := c.put(s, "one-too-many"); err != nil || !created {
				t.Fatalf("a new %s after a deletion: created %v, %v; want created", c.kind, created, err)
			}
		})
	}
}
