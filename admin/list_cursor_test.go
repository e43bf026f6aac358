package admin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/cursor"
	"github.com/jobfleet/jobfleet/store"
)

// listRoute is a listing of the API that pages with ?cursor, as one
// caller sends it.
type listRoute struct {
	name  string
	path  string // with its query, without limit and cursor
	token string
}

// nextCursor returns the next_cursor of the first page of l (limit 1).
func (e *secEnv) nextCursor(l listRoute) string {
	e.t.Helper()
	code, _, body := e.send(request{method: "GET", path: l.path + sep(l.path) + "limit=1"}, l.token)
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &page) != nil || page.NextCursor == "" {
		e.t.Fatalf("%s: first page %d %s, want one with a next cursor", l.name, code, body)
	}
	return page.NextCursor
}

func sep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}

// TestListCursorsRefuseWhatTheyDidNotIssue sends every listing of the API
// that takes a cursor (found from the route table: each GET route is
// asked with a cursor, and those that answer about it are the listings)
// cursors that are malformed, foreign (another fleet's, made by hand,
// changed) and of other listings (another route, other parameters,
// another credential's scope): each is a 400 naming the cursor, and
// changes nothing; the listing's own cursor pages on. A cursor stays good
// across compaction, and on another member of the fleet.
func TestListCursorsRefuseWhatTheyDidNotIssue(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	at := time.Date(2026, 4, 30, 12, 0, 0, 0, time.UTC)
	for i := range 6 {
		for _, p := range []string{"team/", "other/"} {
			id := fmt.Sprintf("%sj%d", p, i)
			e.ensureJob(id)
			if i%2 == 0 {
				if _, err := e.jobs.SetPaused(context.Background(), id, true); err != nil {
					t.Fatal(err)
				}
			}
			e.putFailing(id, at.Add(time.Duration(i)*time.Minute), []api.RunStatus{api.RunDead, api.RunFailed}[i%2], time.Minute)
		}
	}
	for i := range 3 {
		for _, p := range []string{"team/", "other/"} {
			if _, _, err := e.jobs.PutCalendar(context.Background(), api.Calendar{Name: fmt.Sprintf("%scal%d", p, i), Dates: []string{"2026-12-25"}}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := e.jobs.PutLimit(context.Background(), api.Limit{Key: fmt.Sprintf("%slim%d", p, i), MaxRunning: ptr(2)}); err != nil {
				t.Fatal(err)
			}
		}
		e.cred(api.CreateRequest{Role: api.RoleViewer})
	}
	adminTok := e.cred(api.CreateRequest{Role: api.RoleAdmin}).Secret
	viewer := e.cred(api.CreateRequest{Role: api.RoleViewer}).Secret
	scoped := e.cred(api.CreateRequest{Role: api.RoleViewer, Prefix: "team/"}).Secret

	routes := []listRoute{
		{"jobs", "/v1/jobs", viewer},
		{"jobs under a prefix", "/v1/jobs?prefix=team/", viewer},
		{"jobs under another prefix", "/v1/jobs?prefix=other/", viewer},
		{"paused jobs", "/v1/jobs?paused=true", viewer},
		{"running jobs", "/v1/jobs?paused=false", viewer},
		{"jobs of a scoped credential", "/v1/jobs", scoped},
		{"failing runs", "/v1/runs", viewer},
		{"dead runs", "/v1/runs?status=dead", viewer},
		{"failing runs of the last hour", "/v1/runs?since=1h", viewer},
		{"failing runs under a prefix", "/v1/runs?prefix=team/", viewer},
		{"failing runs of a scoped credential", "/v1/runs", scoped},
		{"credentials", "/v1/tokens", adminTok},
		{"calendars", "/v1/calendars", viewer},
		{"calendars under a prefix", "/v1/calendars?prefix=team/", viewer},
		{"calendars of a scoped credential", "/v1/calendars", scoped},
		{"limits", "/v1/limits", viewer},
		{"limits under a prefix", "/v1/limits?prefix=team/", viewer},
		{"limits of a scoped credential", "/v1/limits", scoped},
	}
	// Every listing that takes a cursor is here: every GET route of the
	// table (its wildcards filled with a job, run and calendar that
	// exist) asked with a cursor it did not issue, of the forms a
	// listing could take for its own (a bare name, a bare position, a
	// sealed cursor of another listing), either answers about the cursor,
	// and is one of the routes above, or ignores it: answers as without
	// one, with no next_cursor in its reply (a page that took the cursor
	// as a position would have one).
	listed := map[string]bool{}
	for _, l := range routes {
		listed[strings.SplitN(l.path, "?", 2)[0]] = true
	}
	runID := store.RunID("team/j1", at.Add(time.Minute))
	fill := strings.NewReplacer("{id}", "team/j1", "{run_id}", url.PathEscape(runID), "{name}", "team%2Fcal1", "{key}", "team%2Flim1")
	foreign := []string{"not-a-cursor", "team/cal1", "00001/team%2Fj1", e.nextCursor(listRoute{"jobs", "/v1/jobs", viewer})}
	for _, rt := range admin.Routes() {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		if method != "GET" || path == "/v1/cluster/partitions/watch" {
			continue
		}
		if path == "/{$}" {
			path = "/"
		}
		filled := fill.Replace(path)
		for _, c := range foreign {
			if path == "/v1/jobs" && c == foreign[3] {
				continue // its own
			}
			code, _, body := e.send(request{method: "GET", path: filled + "?cursor=" + url.QueryEscape(c)}, adminTok)
			takes := code == http.StatusBadRequest && strings.Contains(string(body), "cursor")
			var reply map[string]json.RawMessage
			paged := code == http.StatusOK && json.Unmarshal(body, &reply) == nil && reply["next_cursor"] != nil
			if takes != listed[path] || paged {
				t.Errorf("%s with cursor %q: %d %.200s; the test lists it as a cursor listing: %v", rt.Pattern, c, code, body, listed[path])
			}
		}
	}

	cursors := map[string]string{}
	for _, l := range routes {
		cursors[l.name] = e.nextCursor(l)
	}
	other, err := cursor.New([]byte("another fleet's cursor key, 32 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range routes {
		own := cursors[l.name]
		raw, _ := base64.RawURLEncoding.DecodeString(own)
		flipped := append([]byte(nil), raw...)
		flipped[len(flipped)/2] ^= 0x20
		bad := map[string]string{
			"nonsense":            "nonsense",
			"a bare position":     "00001/team%2Fj1",
			"truncated":           own[:len(own)/2],
			"a changed byte":      base64.RawURLEncoding.EncodeToString(flipped),
			"another fleet's":     other.Seal(cursor.Listing{Kind: "jobs", Params: []string{"", ""}}, "00001/team%2Fj1"),
			"an empty position":   base64.RawURLEncoding.EncodeToString(raw[:9]),
			"with trailing bytes": own + "AAAA",
		}
		for _, o := range routes {
			if o.name != l.name && cursors[o.name] != own {
				bad["the cursor of "+o.name] = cursors[o.name]
			}
		}
		for what, c := range bad {
			t.Run(l.name+" with "+what, func(t *testing.T) {
				before := e.state()
				code, _, body := e.send(request{method: "GET", path: l.path + sep(l.path) + "limit=1&cursor=" + url.QueryEscape(c)}, l.token)
				if code != http.StatusBadRequest || !strings.HasPrefix(errorMessage(t, body), "cursor: ") {
					t.Fatalf("%d %s, want 400 naming the cursor", code, body)
				}
				if after := e.state(); after != before {
					t.Fatalf("a refused listing changed the store:\n%s\nwas\n%s", after, before)
				}
			})
		}
		if code, _, body := e.send(request{method: "GET", path: l.path + sep(l.path) + "limit=1&cursor=" + url.QueryEscape(own)}, l.token); code != http.StatusOK {
			t.Errorf("%s with its own cursor: %d %s", l.name, code, body)
		}
	}

	// Compaction and another member: the cursors issued stay good.
	resp, err := e.client.Get(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Compact(context.Background(), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	second := httptest.NewServer(admin.Handler(e.member, admin.Config{Tokens: e.tokens, Clock: e.clock, Limits: admin.Limits{Rate: -1}}))
	defer second.Close()
	for _, base := range []string{e.srv.URL, second.URL} {
		for _, l := range routes {
			req, _ := http.NewRequest("GET", base+l.path+sep(l.path)+"limit=1&cursor="+url.QueryEscape(cursors[l.name]), nil)
			req.Header.Set("Authorization", "Bearer "+l.token)
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			if r.StatusCode != http.StatusOK {
				t.Errorf("%s on %s after compaction: %d", l.name, base, r.StatusCode)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }
