package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/store"
)

// putFailing stores a failing-runs index entry of job id's run for
// scheduled time at, in status st since the env's clock minus ago.
func (e *secEnv) putFailing(id string, at time.Time, st api.RunStatus, ago time.Duration) api.FailingRun {
	e.t.Helper()
	p := e.jobs.Partition(id)
	f := api.FailingRun{RunID: store.RunID(id, at), JobID: id, Status: st, Attempt: 1, At: e.clock.Now().Add(-ago).UTC(), Error: "boom"}
	b, _ := json.Marshal(f)
	if _, err := e.client.Put(context.Background(), e.jobs.Keys().Failing(p, id, at), string(b)); err != nil {
		e.t.Fatal(err)
	}
	return f
}

type failingPage struct {
	Runs       []api.FailingRun `json:"runs"`
	NextCursor string           `json:"next_cursor"`
}

// listFailing pages through GET /v1/runs?query with limit, as token, and
// returns the run IDs listed, in order.
func (e *secEnv) listFailing(t *testing.T, token, query string, limit int) []string {
	t.Helper()
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("%s limit %d: listing does not end", query, limit)
		}
		code, _, body := e.send(request{method: "GET", path: fmt.Sprintf("/v1/runs?%s&limit=%d&cursor=%s", query, limit, url.QueryEscape(cursor))}, token)
		var page failingPage
		if code != http.StatusOK || json.Unmarshal(body, &page) != nil {
			t.Fatalf("%s limit %d: %d %s", query, limit, code, body)
		}
		if len(page.Runs) > limit || (page.NextCursor != "" && len(page.Runs) != limit) {
			t.Fatalf("%s limit %d: a page of %d, next %q", query, limit, len(page.Runs), page.NextCursor)
		}
		for _, r := range page.Runs {
			got = append(got, r.RunID)
		}
		if page.NextCursor == "" {
			return got
		}
		cursor = page.NextCursor
	}
}

// TestFailingRunsListing: GET /v1/runs lists the index's entries by
// status and age, page by page with any page size, each once, and a
// prefix-scoped viewer sees only its prefix's runs whatever it asks.
func TestFailingRunsListing(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	at := time.Date(2026, 4, 30, 0, 0, 0, 0, time.UTC)
	var team, teamDead, teamRecent, all []string
	for i := range 30 {
		for _, owner := range []string{"team/", "other/", "teams/"} {
			id := fmt.Sprintf("%s%02d", owner, i%12) // several runs per job
			st, ago := api.RunDead, time.Duration(i)*time.Hour
			if i%4 == 0 {
				st = api.RunFailed
			}
			if i%5 == 0 {
				ago = 25 * time.Hour // outside the window
			}
			f := e.putFailing(id, at.Add(time.Duration(i)*time.Minute), st, ago)
			if ago > 24*time.Hour {
				continue
			}
			all = append(all, f.RunID)
			if owner == "team/" {
				team = append(team, f.RunID)
				if st == api.RunDead {
					teamDead = append(teamDead, f.RunID)
				}
				if ago <= 2*time.Hour {
					teamRecent = append(teamRecent, f.RunID)
				}
			}
		}
	}
	// One job with many runs: its partition's range holds more than one
	// read takes.
	for i := range 70 {
		f := e.putFailing("team/many", at.Add(time.Duration(i)*time.Second), api.RunDead, time.Minute)
		all, team, teamDead, teamRecent = append(all, f.RunID), append(team, f.RunID), append(teamDead, f.RunID), append(teamRecent, f.RunID)
	}
	viewer := e.cred(api.CreateRequest{Role: api.RoleViewer})
	scoped := e.cred(api.CreateRequest{Role: api.RoleViewer, Prefix: "team/"})
	tests := []struct {
		name  string
		token string
		query string
		want  []string
	}{
		{"everything", viewer.Secret, "", all},
		{"asked prefix", viewer.Secret, "prefix=team/", team},
		{"scoped", scoped.Secret, "", team},
		{"scoped, asking for more", scoped.Secret, "prefix=te", team},
		{"scoped, asking for others", scoped.Secret, "prefix=other/", nil},
		{"scoped, asking for a disjoint prefix", scoped.Secret, "prefix=teams/", nil},
		{"dead only", scoped.Secret, "status=dead", teamDead},
		{"both, spaced and repeated", scoped.Secret, "status=dead,%20failed,dead", team},
		{"since", scoped.Secret, "since=2h", teamRecent},
	}
	for _, tt := range tests {
		for _, limit := range []int{1, 4, 50, 1000} {
			t.Run(fmt.Sprintf("%s limit %d", tt.name, limit), func(t *testing.T) {
				got := e.listFailing(t, tt.token, tt.query, limit)
				if dup := len(got) - len(slices.Compact(slices.Sorted(slices.Values(got)))); dup != 0 {
					t.Fatalf("%d runs listed twice", dup)
				}
				slices.Sort(got)
				want := slices.Sorted(slices.Values(tt.want))
				if !slices.Equal(got, want) {
					t.Fatalf("listed %d runs %q\nwant %d %q", len(got), got, len(want), want)
				}
			})
		}
	}
	// A cursor made for others' runs is refused to a scoped caller: it
	// is of another listing.
	_, _, body := e.send(request{method: "GET", path: "/v1/runs?prefix=other/&limit=1"}, viewer.Secret)
	var page failingPage
	if err := json.Unmarshal(body, &page); err != nil || page.NextCursor == "" {
		t.Fatalf("first page of other/: %s", body)
	}
	code, _, body := e.send(request{method: "GET", path: "/v1/runs?limit=1000&cursor=" + url.QueryEscape(page.NextCursor)}, scoped.Secret)
	if code != http.StatusBadRequest || !strings.Contains(errorMessage(t, body), "another listing") {
		t.Fatalf("a scoped viewer with a cursor of other/: %d %s, want 400", code, body)
	}
}

// TestFailingRunsScanBound: a page reads at most its scan of entries;
// a filter that keeps few of them gives short pages whose cursors go on,
// and the listing still finds each selected entry once.
func TestFailingRunsScanBound(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	at := time.Date(2026, 4, 30, 0, 0, 0, 0, time.UTC)
	var failed []string
	for i := range 40 {
		st := api.RunDead
		if i%7 == 0 {
			st = api.RunFailed
		}
		f := e.putFailing(fmt.Sprintf("job-%02d", i), at, st, time.Minute)
		if st == api.RunFailed {
			failed = append(failed, f.RunID)
		}
	}
	var got []string
	cursor, short := "", 0
	for pages := 0; ; pages++ {
		if pages > 40 {
			t.Fatal("the listing does not end")
		}
		runs, next, err := e.jobs.ListFailing(context.Background(), store.FailingQuery{Statuses: []api.RunStatus{api.RunFailed}, Cursor: cursor, Limit: 3, Scan: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) < 3 && next != "" {
			short++
		}
		for _, r := range runs {
			got = append(got, r.RunID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(failed)); !slices.Equal(got, want) || short == 0 {
		t.Fatalf("listed %q (%d short pages), want %q", got, short, want)
	}
}

func TestFailingRunsBadParameters(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	viewer := e.cred(api.CreateRequest{Role: api.RoleViewer})
	tests := []struct{ query, want string }{
		{"status=succeeded", `status: "succeeded" is not "dead" or "failed"`},
		{"status=", `status: "" is not "dead" or "failed"`},
		{"status=dead,,failed", `status: "" is not`},
		{"since=25h", `since: "25h" is not a duration from 1ms to 24h0m0s`},
		{"since=-1h", `since: "-1h" is not a duration`},
		{"since=0s", `since: "0s" is not a duration`},
		{"since=yesterday", `since: "yesterday" is not a duration`},
		{"limit=0", `limit: "0" is not an integer from 1 to 1000`},
		{"limit=1001", `limit: "1001" is not an integer`},
		{"cursor=nonsense", `cursor: "nonsense" is not a cursor of this listing: it is malformed`},
		{"cursor=99999/x/y", `cursor: "99999/x/y" is not a cursor of this listing: it is malformed`},
		{"cursor=" + strings.Repeat("c", 2000), "cursor: 2000 bytes long"},
		{"prefix=" + strings.Repeat("p", api.MaxIDBytes+1), fmt.Sprintf("prefix: %d bytes long", api.MaxIDBytes+1)},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			code, _, body := e.send(request{method: "GET", path: "/v1/runs?" + tt.query}, viewer.Secret)
			if code != http.StatusBadRequest || !strings.Contains(errorMessage(t, body), tt.want) {
				t.Fatalf("got %d %s, want 400 with %q", code, body, tt.want)
			}
		})
	}
}
