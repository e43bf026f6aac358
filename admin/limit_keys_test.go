package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

func limitPath(key string) string { return "/v1/limits/" + url.PathEscape(key) }

func TestLimitsCRUD(t *testing.T) {
	e := newJobsEnv(t)
	var l api.Limit
	e.doJSON("PUT", limitPath("billing-db"), `{"max_running": 5}`, http.StatusCreated, &l)
	if l.Key != "billing-db" || l.MaxRunning == nil || *l.MaxRunning != 5 || l.Rate != nil || l.Revision == 0 || l.UpdatedAt.IsZero() {
		t.Fatalf("created %+v", l)
	}
	e.doJSON("PUT", limitPath("billing-db"), `{"key": "billing-db", "max_running": 0, "rate": {"count": 100, "per": "1m"}}`, http.StatusOK, &l)
	if *l.MaxRunning != 0 || l.Rate == nil || l.Rate.Count != 100 || l.Rate.Per.Std().Minutes() != 1 {
		t.Fatalf("replaced %+v", l)
	}
	var got api.Limit
	e.doJSON("GET", limitPath("billing-db"), "", http.StatusOK, &got)
	if got.Revision != l.Revision || got.Rate.Count != 100 {
		t.Fatalf("got %+v, want %+v", got, l)
	}
	e.doJSON("PUT", limitPath("partner/api"), `{"rate": {"count": 10, "per": "1s"}}`, http.StatusCreated, nil)
	var list api.LimitList
	e.doJSON("GET", "/v1/limits", "", http.StatusOK, &list)
	if len(list.Limits) != 2 || list.Limits[0].Key != "billing-db" || list.Limits[1].Key != "partner/api" || list.NextCursor != "" {
		t.Fatalf("list %+v, want both in key order", list)
	}
	list = api.LimitList{}
	e.doJSON("GET", "/v1/limits?limit=1", "", http.StatusOK, &list)
	if len(list.Limits) != 1 || list.NextCursor == "" {
		t.Fatalf("first page %+v", list)
	}
	next := list.NextCursor
	if code, body := e.do("GET", "/v1/limits?limit=1&cursor=billing-db", nil); code != http.StatusBadRequest || !strings.HasPrefix(errorMessage(t, body), "cursor: ") {
		t.Fatalf("a cursor made by hand: %d %s, want 400 naming the cursor", code, body)
	}
	list = api.LimitList{}
	e.doJSON("GET", "/v1/limits?limit=1&cursor="+url.QueryEscape(next), "", http.StatusOK, &list)
	if len(list.Limits) != 1 || list.Limits[0].Key != "partner/api" || list.NextCursor != "" {
		t.Fatalf("second page %+v", list)
	}
	e.doJSON("DELETE", limitPath("billing-db"), "", http.StatusNoContent, nil)
	for _, m := range []string{"GET", "DELETE"} {
		code, body := e.do(m, limitPath("billing-db"), nil)
		if msg := errorMessage(t, body); code != http.StatusNotFound || !strings.Contains(msg, `limit "billing-db" not found`) {
			t.Errorf("%s after delete: %d %q", m, code, msg)
		}
	}
}

func TestLimitsRejectBadInput(t *testing.T) {
	e := newJobsEnv(t)
	e.doJSON("PUT", limitPath("kept"), `{"max_running": 2}`, http.StatusCreated, nil)
	e.expectRefused([]refusal{
		{limitPath("a"), `{}`, "max_running: missing", 400},
		{limitPath("a"), `{"max_running": -1}`, "max_running", 400},
		{limitPath("a"), `{"max_running": 100001}`, "max_running", 400},
		{limitPath("a"), `{"max_running": 1.5}`, "max_running", 400},
		{limitPath("a"), `{"max_running": "3"}`, "max_running", 400},
		{limitPath("a"), `{"max_running": 1, "max_running": 2}`, `duplicate key "max_running"`, 400},
		{limitPath("a"), `{"max_runing": 1}`, "max_runing", 400},
		{limitPath("a"), `{"rate": {"count": 0, "per": "1m"}}`, "rate.count", 400},
		{limitPath("a"), `{"rate": {"count": 1001, "per": "1m"}}`, "rate.count", 400},
		{limitPath("a"), `{"rate": {"count": 1, "per": "10ms"}}`, "rate.per", 400},
		{limitPath("a"), `{"rate": {"count": 1, "per": "48h"}}`, "rate.per", 400},
		{limitPath("a"), `{"rate": {"count": 1, "per": 60}}`, "rate.per", 400},
		{limitPath("a"), `{"rate": {"count": 1}}`, "rate.per", 400},
		{limitPath("a"), `{"rate": {"count": 1, "per": "1m", "burst": 2}}`, "rate.burst", 400},
		{limitPath("a"), `{"key": "b", "max_running": 1}`, "key", 400},
		{limitPath("kept"), `{"max_running": -3}`, "max_running", 400},
		{limitPath("a\u200bb"), `{"max_running": 1}`, "key", 400},
		{limitPath(strings.Repeat("k", api.MaxLimitKeyBytes+1)), `{"max_running": 1}`, "key", 400},
		{limitPath("a"), `{"max_running": 1} {}`, "limit", 400},
		{limitPath("a"), `[1]`, "limit", 400},
		{"/v1/limits?cursor=" + url.QueryEscape("not\u200ba cursor"), "", "cursor", 400},
		{"/v1/limits?limit=0", "", "limit", 400},
	})
}

// TestLimitsAreScoped: a credential limited to a prefix reads, lists and
// writes only the limit keys under it, as job IDs.
func TestLimitsAreScoped(t *testing.T) {
	e := newJobsEnv(t)
	e.doJSON("PUT", limitPath("billing/db"), `{"max_running": 2}`, http.StatusCreated, nil)
	e.doJSON("PUT", limitPath("ops/db"), `{"max_running": 2}`, http.StatusCreated, nil)
	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"PUT", limitPath("ops/db"), `{"max_running": 9}`, http.StatusForbidden},
		{"GET", limitPath("ops/db"), "", http.StatusForbidden},
		{"DELETE", limitPath("ops/db"), "", http.StatusForbidden},
		{"PUT", limitPath("shared-db"), `{"max_running": 9}`, http.StatusForbidden},
		{"PUT", limitPath("billing/db"), `{"max_running": 3}`, http.StatusOK},
		{"GET", limitPath("billing/db"), "", http.StatusOK},
	} {
		if code, body := e.doAs(billingToken, tc.method, tc.path, tc.body); code != tc.want {
			t.Errorf("billing operator %s %s: %d %s, want %d", tc.method, tc.path, code, body, tc.want)
		}
	}
	code, body := e.doAs(billingToken, "GET", "/v1/limits", "")
	var list api.LimitList
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Limits) != 1 || list.Limits[0].Key != "billing/db" {
		t.Errorf("billing operator's listing: %d %s, want billing/db only", code, body)
	}
}

// limitsMember is a member whose limit table applies a write only when
// the test lets it: WaitLimits sends the revision it waits for, then
// blocks until applied is closed.
type limitsMember struct {
	admintest.Member
	waited  chan int64
	applied chan struct{}
}

func (m limitsMember) WaitLimits(ctx context.Context, rev int64) error {
	m.waited <- rev
	select {
	case <-m.applied:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A PUT of a limit is answered once this member's limit table has read
// it (at the stored revision), so that a job created on it next is
// bounded by the limit.
func TestLimitPutAnsweredOnceInEffect(t *testing.T) {
	client := etcd.Client(t)
	s := store.NewEtcd(client, etcdtest.Namespace(t), testPartitions, api.DefaultLimits(), nil)
	m := limitsMember{Member: admintest.Member{Jobs: s, Auth: testAuth}, waited: make(chan int64, 1), applied: make(chan struct{})}
	srv := httptest.NewServer(admin.Handler(m, admin.Config{Gatherer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t), Limits: admin.Limits{Rate: -1}}))
	t.Cleanup(srv.Close)
	type reply struct {
		code int
		body []byte
	}
	done := make(chan reply, 1)
	go func() {
		code, body := send(t, srv, adminToken, "PUT", limitPath("billing-db"), []byte(`{"max_running": 1}`))
		done <- reply{code, body}
	}()
	var rev int64
	select {
	case rev = <-m.waited:
	case r := <-done:
		t.Fatalf("PUT answered %d %s without waiting for the member's limit table", r.code, r.body)
	}
	select {
	case r := <-done:
		t.Fatalf("PUT answered %d %s before the member's limit table read it", r.code, r.body)
	case <-time.After(100 * time.Millisecond):
	}
	close(m.applied)
	r := <-done
	var l api.Limit
	if err := json.Unmarshal(r.body, &l); err != nil || r.code != http.StatusCreated {
		t.Fatalf("PUT: %d %s (%v)", r.code, r.body, err)
	}
	if l.Revision != rev || rev == 0 {
		t.Fatalf("waited for revision %d, stored at %d", rev, l.Revision)
	}
}
