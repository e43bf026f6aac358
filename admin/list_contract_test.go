package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// listEnv is an API server over a store of many partitions filled with
// jobs written as the API stores them, for the listing's contract.
type listEnv struct {
	t      *testing.T
	client *clientv3.Client
	store  *store.Etcd
	srv    *httptest.Server
	// specs maps each job's spec key to its ID.
	specs map[string]string
}

// listTokens are the credentials of the listing tests: an admin, a viewer
// (replies redacted) and a viewer scoped to "team/".
var listTokens = staticAuth{
	adminToken:     {ID: "test-admin", Role: api.RoleAdmin},
	"viewer-token": {ID: "viewer", Role: api.RoleViewer},
	"team-token":   {ID: "team", Role: api.RoleViewer, Prefix: "team/"},
}

func newListEnv(t *testing.T, partitions int) *listEnv {
	t.Helper()
	client := etcd.Client(t)
	s := store.NewEtcd(client, etcdtest.Namespace(t), partitions, api.DefaultLimits(), nil)
	h := admin.Handler(admintest.Member{Jobs: s, Auth: listTokens}, admin.Config{
		Gatherer: prometheus.NewRegistry(),
		Logger:   zaptest.NewLogger(t),
		Limits:   admin.Limits{Rate: -1},
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &listEnv{t: t, client: client, store: s, srv: srv, specs: map[string]string{}}
}

// put writes jobs ids as the API stores them, some with headers (which a
// viewer's reply redacts) or payloads, and trigger keys (which sort
// among the specs) for every seventh.
func (e *listEnv) put(ids ...string) {
	e.t.Helper()
	var ops []clientv3.Op
	flush := func() {
		if len(ops) > 0 {
			if _, err := e.client.Txn(context.Background()).Then(ops...).Commit(); err != nil {
				e.t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i, id := range ids {
		p := e.store.Partition(id)
		j := api.Job{ID: id, Schedule: "*/5 * * * *", Partition: p, CreatedAt: now, UpdatedAt: now,
			Executor: api.Executor{Type: "http", URL: "https://example.com/hook", Method: "POST"}}
		if i%3 == 0 {
			j.Executor.Headers = map[string]api.HeaderValue{"Authorization": api.Literal("Bearer s3cret")}
		}
		if i%4 == 0 {
			j.Payload = json.RawMessage(fmt.Sprintf(`{"n":%d,"text":"<&> é"}`, i))
		}
		j.Normalize()
		val, err := json.Marshal(j)
		if err != nil {
			e.t.Fatal(err)
		}
		key := e.store.Keys().Spec(p, id)
		ops = append(ops, clientv3.OpPut(key, string(val)))
		if i%7 == 0 {
			ops = append(ops, clientv3.OpPut(e.store.Keys().Trigger(p, id, now), "{}"))
		}
		e.specs[key] = id
		if len(ops) >= 100 {
			flush()
		}
	}
	flush()
}

// remove deletes job id's spec.
func (e *listEnv) remove(id string) {
	e.t.Helper()
	key := e.store.Keys().Spec(e.store.Partition(id), id)
	if _, err := e.client.Delete(context.Background(), key); err != nil {
		e.t.Fatal(err)
	}
	delete(e.specs, key)
}

// want returns the IDs of the jobs whose ID starts with prefix, in the
// listing's order: the order of their spec keys (partition, then escaped
// ID).
func (e *listEnv) want(prefix string) []string {
	var keys []string
	for k, id := range e.specs {
		if strings.HasPrefix(id, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = e.specs[k]
	}
	return ids
}

// get sends GET path with token and returns the status and body.
func (e *listEnv) get(path, token string) (int, []byte) {
	e.t.Helper()
	return send(e.t, e.srv, token, "GET", path, nil)
}

// listPage is a page of GET /v1/jobs, its jobs kept as JSON objects.
type listPage struct {
	Jobs       []map[string]any `json:"jobs"`
	NextCursor *string          `json:"next_cursor"`
}

// list pages through GET /v1/jobs with query (without limit and cursor)
// and returns the pages; between pages it calls between (if not nil).
func (e *listEnv) list(token, query string, limit int, between func(page int)) []listPage {
	e.t.Helper()
	var pages []listPage
	cursor := ""
	for {
		if len(pages) > 10_000 {
			e.t.Fatalf("%s limit %d: the listing does not end", query, limit)
		}
		path := fmt.Sprintf("/v1/jobs?%slimit=%d&cursor=%s", query, limit, url.QueryEscape(cursor))
		code, body := e.get(path, token)
		if code != http.StatusOK {
			e.t.Fatalf("GET %s: %d %s", path, code, body)
		}
		var page listPage
		if err := json.Unmarshal(body, &page); err != nil {
			e.t.Fatalf("GET %s: %v: %s", path, err, body)
		}
		if page.NextCursor == nil || page.Jobs == nil {
			e.t.Fatalf("GET %s: no jobs or next_cursor: %s", path, body)
		}
		pages = append(pages, page)
		if *page.NextCursor == "" {
			return pages
		}
		cursor = *page.NextCursor
		if between != nil {
			between(len(pages))
		}
	}
}

// ids returns the IDs of pages' jobs in order.
func ids(pages []listPage) []string {
	var out []string
	for _, p := range pages {
		for _, j := range p.Jobs {
			id, _ := j["id"].(string)
			out = append(out, id)
		}
	}
	return out
}

// TestJobsListContract checks GET /v1/jobs against docs/api.md over
// thousands of jobs in many partitions (so that a page of 1 000 spans many
// of them), with IDs that need escaping and trigger keys among the specs:
// every job within the caller's prefix and ?prefix listed once, in key
// order (partition, then escaped ID), pages of exactly limit jobs but the
// last, next_cursor "" only on the last; each job as GET /v1/jobs/{id}
// shows it (revision included, header values redacted for viewers, no
// state); and the bounds of limit and cursor.
func TestJobsListContract(t *testing.T) {
	e := newListEnv(t, 256)
	var all []string
	for i := range 2400 {
		switch i % 4 {
		case 0, 1:
			all = append(all, fmt.Sprintf("team/job-%04d", i))
		case 2:
			all = append(all, fmt.Sprintf("teams/job-%04d", i))
		default:
			all = append(all, fmt.Sprintf("other/%04d", i))
		}
	}
	all = append(all, "team", "team/a b/c%2F", "team/é", "team/~", "other/\u2028", "x")
	e.put(all...)

	// The jobs as a single GET shows them, without state.
	single := map[string]map[string]map[string]any{}
	for _, token := range []string{adminToken, "viewer-token"} {
		single[token] = map[string]map[string]any{}
		for _, id := range all {
			if len(single[token]) > 200 && !strings.HasPrefix(id, "team/") {
				continue
			}
			code, body := e.get(jobPath(id), token)
			var doc map[string]any
			if code != http.StatusOK || json.Unmarshal(body, &doc) != nil {
				t.Fatalf("GET %s: %d %s", id, code, body)
			}
			delete(doc, "state")
			delete(doc, "status") // read with the state: a listing has neither unless ?state=true
			single[token][id] = doc
		}
	}

	tests := []struct {
		token, query, visible string // visible: the prefix of what is listed
		limits                []int
	}{
		{adminToken, "", "", []int{7, 1000}},
		{"viewer-token", "", "", []int{999}},
		{adminToken, "prefix=team/&", "team/", []int{1, 100, 1000}},
		{adminToken, "prefix=team&", "team", []int{1000}},
		{"team-token", "", "team/", []int{3, 1000}},
		{"team-token", "prefix=team/job-00&", "team/job-00", []int{1, 1000}},
		{"team-token", "prefix=te&", "team/", []int{1000}},
		{"team-token", "prefix=other/&", "\x00none", []int{1, 1000}},
	}
	for _, tt := range tests {
		want := e.want(tt.visible)
		for _, limit := range tt.limits {
			if limit == 1 && len(want) > 100 {
				continue
			}
			name := fmt.Sprintf("%s %s limit %d", tt.token, tt.query, limit)
			pages := e.list(tt.token, tt.query, limit, nil)
			if got := ids(pages); !slices.Equal(got, want) {
				t.Fatalf("%s: listed %d jobs, want %d in key order; first difference at %d", name, len(got), len(want), firstDiff(got, want))
			}
			for i, p := range pages {
				if len(p.Jobs) > limit || (i < len(pages)-1 && len(p.Jobs) != limit) {
					t.Fatalf("%s: page %d of %d holds %d jobs", name, i+1, len(pages), len(p.Jobs))
				}
			}
			redacted := tt.token != adminToken
			docs := single[adminToken]
			if redacted {
				docs = single["viewer-token"]
			}
			for _, p := range pages {
				for _, j := range p.Jobs {
					id := j["id"].(string)
					if want, ok := docs[id]; ok && !reflect.DeepEqual(j, want) {
						t.Fatalf("%s: job %q listed as\n%v\nwant (as GET shows it)\n%v", name, id, j, want)
					}
					if _, ok := j["state"]; ok {
						t.Fatalf("%s: job %q listed with a state", name, id)
					}
				}
			}
		}
	}

	for _, bad := range []string{"limit=0", "limit=1001", "limit=x", "cursor=" + strings.Repeat("1", 2000), "prefix=" + strings.Repeat("p", 201)} {
		if code, body := e.get("/v1/jobs?"+bad, adminToken); code != http.StatusBadRequest {
			t.Errorf("GET /v1/jobs?%s: %d %s, want 400", bad, code, body)
		}
	}
}

// TestJobsListWhileJobsChange lists all jobs a page at a time while jobs
// are created and deleted between the pages: every job present for the
// whole listing is listed exactly once, and the listing stays in key
// order.
func TestJobsListWhileJobsChange(t *testing.T) {
	e := newListEnv(t, 128)
	var ids0 []string
	for i := range 3000 {
		ids0 = append(ids0, fmt.Sprintf("stay/%05d", i))
	}
	e.put(ids0...)
	stay := e.want("stay/")
	churn := 0
	pages := e.list(adminToken, "", 250, func(page int) {
		for range 20 {
			e.put(fmt.Sprintf("churn/%05d", churn))
			if churn%2 == 1 {
				e.remove(fmt.Sprintf("churn/%05d", churn-1))
			}
			churn++
		}
	})
	var got []string
	for _, id := range ids(pages) {
		if strings.HasPrefix(id, "stay/") {
			got = append(got, id)
		}
	}
	if !slices.Equal(got, stay) {
		t.Fatalf("listed %d of the %d jobs present throughout, want each once in key order; first difference at %d", len(got), len(stay), firstDiff(got, stay))
	}
	keys := make([]string, 0, len(pages)*250)
	for _, id := range ids(pages) {
		keys = append(keys, e.store.Keys().Spec(e.store.Partition(id), id))
	}
	if !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
		t.Fatal("the listing is not in strictly increasing key order")
	}
}

// firstDiff is the first index at which a and b differ.
func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestJobsListLargePagesCompact checks that a page of 1 000 jobs comes as
// compact JSON (indenting it would add a quarter to what it costs server
// and client) while a page of the default 100 jobs is indented for
// reading.
func TestJobsListLargePagesCompact(t *testing.T) {
	e := newListEnv(t, 16)
	var ids []string
	for i := range 1000 {
		ids = append(ids, fmt.Sprintf("job-%04d", i))
	}
	e.put(ids...)
	for _, tt := range []struct {
		query    string
		indented bool
	}{{"", true}, {"?limit=1000", false}} {
		code, body := e.get("/v1/jobs"+tt.query, adminToken)
		if code != http.StatusOK || !json.Valid(body) {
			t.Fatalf("GET /v1/jobs%s: %d, valid JSON %v", tt.query, code, json.Valid(body))
		}
		if indented := strings.Contains(string(body), "\n  "); indented != tt.indented {
			t.Errorf("GET /v1/jobs%s: a reply of %d bytes, indented %v, want %v", tt.query, len(body), indented, tt.indented)
		}
	}
}
