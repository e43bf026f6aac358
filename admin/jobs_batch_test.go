package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/store"
)

// billingToken is an operator limited to jobs under "billing/".
const billingToken = "test-billing-operator"

func init() {
	testAuth[billingToken] = auth.Principal{ID: "billing-operator", Role: api.RoleOperator, Prefix: "billing/"}
}

// batchBody returns the body of a batch of docs.
func batchBody(mode string, docs ...string) string {
	return `{"mode": ` + quote(mode) + `, "jobs": [` + strings.Join(docs, ", ") + `]}`
}

// doAs is jobsEnv.do with another token; body is sent as JSON even if
// empty.
func (e *jobsEnv) doAs(token, method, path, body string) (int, []byte) {
	e.t.Helper()
	return send(e.t, e.srv, token, method, path, []byte(body))
}

// statuses returns the items' status codes.
func statuses(r api.BatchReply) []int {
	out := []int{}
	for _, res := range r.Results {
		out = append(out, res.Status)
	}
	return out
}

func TestJobsBatch(t *testing.T) {
	e := newJobsEnv(t)
	e.doJSON("POST", "/v1/jobs", httpJob("existing", `"schedule": "@hourly"`), http.StatusCreated, nil)
	var existing api.Job
	e.doJSON("GET", jobPath("existing"), "", http.StatusOK, &existing)

	many := make([]string, api.MaxBatchJobs+1)
	for i := range many {
		many[i] = httpJob(fmt.Sprintf("many-%d", i), "")
	}
	big := `"payload": {"x": "` + strings.Repeat("a", 200<<10) + `"}`
	large := make([]string, 8)
	for i := range large {
		large[i] = httpJob(fmt.Sprintf("large-%d", i), big)
	}

	for _, tc := range []struct {
		name     string
		token    string
		body     string
		code     int
		statuses []int  // nil: the reply is {"error": ...} only
		inError  string // in the failing item's error (or the reply's)
		written  []string
	}{
		{name: "create", body: batchBody("create", httpJob("a", ""), httpJob("b", `"schedule": "@daily"`)),
			code: 200, statuses: []int{201, 201}, written: []string{"a", "b"}},
		{name: "mode defaults to create", body: `{"jobs": [` + httpJob("c", "") + `]}`,
			code: 200, statuses: []int{201}, written: []string{"c"}},
		{name: "create over an existing ID", body: batchBody("create", httpJob("d", ""), httpJob("existing", "")),
			code: 409, statuses: []int{424, 409}, inError: "already exists"},
		{name: "invalid item names its field", body: batchBody("create", httpJob("e", ""), httpJob("f", `"schedule": "61 * * * *"`)),
			code: 400, statuses: []int{424, 400}, inError: "schedule"},
		{name: "unknown field", body: batchBody("create", httpJob("g", `"scheduel": "@daily"`)),
			code: 400, statuses: []int{400}, inError: "scheduel"},
		{name: "duplicate ID in a batch", body: batchBody("create", httpJob("h", ""), httpJob("h", "")),
			code: 400, statuses: []int{424, 400}, inError: "item 0"},
		{name: "invalid and existing: 400 first", body: batchBody("create", httpJob("existing", ""), httpJob("i", `"timezone": "Mars/Olympus"`)),
			code: 400, statuses: []int{424, 400}},
		{name: "out of the credential's prefix", token: billingToken, body: batchBody("create", httpJob("billing/j", ""), httpJob("k", "")),
			code: 403, inError: "billing/"},
		{name: "within the credential's prefix", token: billingToken, body: batchBody("create", httpJob("billing/l", "")),
			code: 200, statuses: []int{201}, written: []string{"billing/l"}},
		{name: "apply replaces and creates", body: batchBody("apply", httpJob("existing", `"schedule": "@daily"`), httpJob("m", "")),
			code: 200, statuses: []int{200, 201}, written: []string{"existing", "m"}},
		{name: "apply with a stale revision", body: batchBody("apply", httpJob("existing", fmt.Sprintf(`"revision": %d`, existing.Revision)), httpJob("n", "")),
			code: 409, statuses: []int{409, 424}, inError: "stale revision"},
		{name: "negative revision", body: batchBody("apply", httpJob("existing", `"revision": -3`)),
			code: 400, statuses: []int{400}, inError: "revision: -3 is negative"},
		{name: "bad mode", body: batchBody("upsert", httpJob("o", "")), code: 400, inError: "mode"},
		{name: "empty", body: batchBody("create"), code: 400, inError: "jobs"},
		{name: "too many", body: batchBody("create", many...), code: 400, inError: "at most 128"},
		{name: "too large stored", body: batchBody("create", large...), code: 413, inError: "fewer jobs"},
		{name: "not an object", body: `[1, 2]`, code: 400, inError: "jobs"},
		{name: "a second batch after the first", body: batchBody("create", httpJob("p", "")) + " " + batchBody("create", httpJob("q", "")),
			code: 400, inError: "unexpected data after the document"},
		{name: "mode given twice", body: `{"mode": "create", "jobs": [` + httpJob("r", "") + `], "mode": "apply"}`,
			code: 400, inError: `duplicate key "mode"`},
		{name: "jobs given twice", body: `{"jobs": [` + httpJob("s", "") + `], "jobs": [` + httpJob("t", "") + `]}`,
			code: 400, inError: `duplicate key "jobs"`},
		{name: "key given twice inside an item", body: batchBody("create", httpJob("u", ""), httpJob("v", `"payload": {"k": 1, "k": 2}`)),
			code: 400, inError: `jobs[1].payload: duplicate key "k"`},
		{name: "unknown envelope field", body: `{"jobs": [` + httpJob("w", "") + `], "Mode": "apply"}`,
			code: 400, inError: `Mode: unknown field; did you mean "mode"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := tc.token
			if token == "" {
				token = adminToken
			}
			before := e.keys()
			code, data := e.doAs(token, "POST", "/v1/jobs:batch", tc.body)
			if code != tc.code {
				t.Fatalf("got status %d, want %d; body %s", code, tc.code, data)
			}
			if tc.statuses == nil {
				if msg := errorMessage(t, data); !strings.Contains(msg, tc.inError) {
					t.Errorf("got error %q, want it to contain %q", msg, tc.inError)
				}
			} else {
				var reply api.BatchReply
				if err := json.Unmarshal(data, &reply); err != nil {
					t.Fatalf("decode %s: %v", data, err)
				}
				if got := statuses(reply); fmt.Sprint(got) != fmt.Sprint(tc.statuses) {
					t.Fatalf("got item statuses %v, want %v; body %s", got, tc.statuses, data)
				}
				if (code == 200) != (reply.Error == "") {
					t.Errorf("status %d with error %q", code, reply.Error)
				}
				for _, res := range reply.Results {
					if res.Status >= 400 && res.Status != 424 && !strings.Contains(res.Error, tc.inError) {
						t.Errorf("item %q: got error %q, want it to contain %q", res.ID, res.Error, tc.inError)
					}
					if res.Status < 300 && res.Revision == 0 {
						t.Errorf("item %q: no revision", res.ID)
					}
				}
			}
			if len(tc.written) == 0 {
				if after := e.keys(); after != before {
					t.Errorf("a failed batch changed the store: %d keys before, %d after", before, after)
				}
			}
			for _, id := range tc.written {
				var j api.Job
				e.doJSON("GET", jobPath(id), "", http.StatusOK, &j)
				if j.ID != id || j.Partition != e.store.Partition(id) {
					t.Errorf("stored %+v, want job %q in partition %d", j, id, e.store.Partition(id))
				}
			}
		})
	}

	t.Run("apply keeps the creation time", func(t *testing.T) {
		var j api.Job
		e.doJSON("GET", jobPath("existing"), "", http.StatusOK, &j)
		if !j.CreatedAt.Equal(existing.CreatedAt) || j.Schedule != "@daily" {
			t.Errorf("got created_at %v schedule %q, want %v and @daily", j.CreatedAt, j.Schedule, existing.CreatedAt)
		}
	})
}

// TestJobsBatchHighWater: a batch that creates jobs is refused whole with
// 507 while the store is above its high-water mark.
func TestJobsBatchHighWater(t *testing.T) {
	client := etcd.Client(t)
	ns := etcdtest.Namespace(t)
	s := store.NewEtcd(client, ns, testPartitions, api.DefaultLimits(), nil).WithGuard(func() error { return store.ErrHighWater })
	e := newEnvWith(t, client, ns, s, s, nil)
	code, data := e.do("POST", "/v1/jobs:batch", []byte(batchBody("create", httpJob("a", ""))))
	if code != http.StatusInsufficientStorage {
		t.Fatalf("got %d %s, want 507", code, data)
	}
	if n := e.keys(); n != 0 {
		t.Fatalf("got %d keys, want none", n)
	}
}

func TestJobsListPrefix(t *testing.T) {
	e := newJobsEnv(t)
	var docs []string
	for _, id := range []string{"a/1", "a/2", "ab", "b/1", "billing/x", "billing/y"} {
		docs = append(docs, httpJob(id, ""))
	}
	e.doJSON("POST", "/v1/jobs:batch", batchBody("create", docs...), http.StatusOK, nil)
	for _, tc := range []struct {
		token, query string
		want         []string
	}{
		{adminToken, "?prefix=a/", []string{"a/1", "a/2"}},
		{adminToken, "?prefix=a", []string{"a/1", "a/2", "ab"}},
		{adminToken, "?prefix=zzz", []string{}},
		{billingToken, "?prefix=billing/x", []string{"billing/x"}},
		{billingToken, "?prefix=bil", []string{"billing/x", "billing/y"}},
		{billingToken, "?prefix=a/", []string{}},
		{billingToken, "", []string{"billing/x", "billing/y"}},
	} {
		code, data := e.doAs(tc.token, "GET", "/v1/jobs"+tc.query+"&limit=1", "")
		if tc.query == "" {
			code, data = e.doAs(tc.token, "GET", "/v1/jobs?limit=1", "")
		}
		var got []string
		for {
			if code != http.StatusOK {
				t.Fatalf("%s: got %d %s", tc.query, code, data)
			}
			var page api.JobList
			if err := json.Unmarshal(data, &page); err != nil {
				t.Fatal(err)
			}
			got = append(got, jobIDs(page.Jobs)...)
			if page.NextCursor == "" {
				break
			}
			q := "?limit=1&cursor=" + url.QueryEscape(page.NextCursor)
			if tc.query != "" {
				q += "&" + tc.query[1:]
			}
			code, data = e.doAs(tc.token, "GET", "/v1/jobs"+q, "")
		}
		slices.Sort(got)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("list %s as %s: got %q, want %q", tc.query, tc.token, got, tc.want)
		}
	}
	code, data := e.do("GET", "/v1/jobs?prefix="+strings.Repeat("x", api.MaxIDBytes+1), nil)
	if msg := errorMessage(t, data); code != http.StatusBadRequest || !strings.HasPrefix(msg, "prefix:") {
		t.Errorf("a prefix longer than any ID: got %d %q", code, msg)
	}
}

// TestJobsBatchRaces: batches with overlapping IDs sent at once each
// write whole or not at all, and every ID is created once, by one batch.
func TestJobsBatchRaces(t *testing.T) {
	e := newJobsEnv(t)
	const senders, ids = 8, 40
	type outcome struct {
		ids     []string
		written bool
	}
	outcomes := make(chan outcome, senders*4)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 4 {
				// Each batch takes 10 IDs from a window that overlaps the
				// other senders'.
				var docs, names []string
				for i := range 10 {
					id := fmt.Sprintf("race/%02d", (s*7+round*13+i*3)%ids)
					if slices.Contains(names, id) {
						continue
					}
					names = append(names, id)
					docs = append(docs, httpJob(id, ""))
				}
				code, data := e.doAs(adminToken, "POST", "/v1/jobs:batch", batchBody("create", docs...))
				var reply api.BatchReply
				if err := json.Unmarshal(data, &reply); err != nil || len(reply.Results) != len(docs) {
					t.Errorf("batch: %d %s", code, data)
					return
				}
				ok := 0
				for _, r := range reply.Results {
					if r.Status == http.StatusCreated {
						ok++
					}
				}
				if ok != 0 && ok != len(docs) {
					t.Errorf("a batch was written in part: %s", data)
				}
				outcomes <- outcome{ids: names, written: code == http.StatusOK}
			}
		}()
	}
	wg.Wait()
	close(outcomes)
	creator := map[string]int{}
	for o := range outcomes {
		if !o.written {
			continue
		}
		for _, id := range o.ids {
			creator[id]++
		}
	}
	var stored api.JobList
	e.doJSON("GET", "/v1/jobs?prefix=race/&limit=1000", "", http.StatusOK, &stored)
	if len(stored.Jobs) != len(creator) {
		t.Errorf("%d jobs stored, %d created by successful batches", len(stored.Jobs), len(creator))
	}
	for id, n := range creator {
		if n != 1 {
			t.Errorf("job %s created by %d batches", id, n)
		}
	}
}
