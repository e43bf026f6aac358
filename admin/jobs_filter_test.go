package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"
)

// TestJobsListPausedFilter: GET /v1/jobs?paused= lists, page by page with
// any page size, exactly the paused (or the active) jobs of the prefix.
func TestJobsListPausedFilter(t *testing.T) {
	e := newJobsEnv(t)
	var paused, active, teamPaused []string
	for i := range 30 {
		id := fmt.Sprintf("team/%02d", i)
		if i%2 == 1 {
			id = fmt.Sprintf("other/%02d", i)
		}
		e.doJSON("POST", "/v1/jobs", httpJob(id, ""), http.StatusCreated, nil)
		if i%3 == 0 {
			e.doJSON("POST", jobPath(id, "pause"), "", http.StatusOK, nil)
			paused = append(paused, id)
			if strings.HasPrefix(id, "team/") {
				teamPaused = append(teamPaused, id)
			}
		} else {
			active = append(active, id)
		}
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"paused=true", paused},
		{"paused=false", active},
		{"paused=true&prefix=team/", teamPaused},
		{"paused=true&prefix=none/", nil},
	}
	for _, tt := range tests {
		for _, limit := range []int{1, 4, 1000} {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 40 {
					t.Fatalf("%s limit %d: the listing does not end", tt.query, limit)
				}
				var page struct {
					Jobs       []api.Job `json:"jobs"`
					NextCursor string    `json:"next_cursor"`
				}
				e.doJSON("GET", fmt.Sprintf("/v1/jobs?%s&limit=%d&cursor=%s", tt.query, limit, url.QueryEscape(cursor)), "", http.StatusOK, &page)
				if len(page.Jobs) > limit {
					t.Fatalf("%s limit %d: a page of %d", tt.query, limit, len(page.Jobs))
				}
				got = append(got, jobIDs(page.Jobs)...)
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
			want := slices.Sorted(slices.Values(tt.want))
			if slices.Sort(got); !slices.Equal(got, want) {
				t.Errorf("%s limit %d: listed %q, want %q", tt.query, limit, got, want)
			}
		}
	}
	code, body := e.do("GET", "/v1/jobs?paused=yes", nil)
	if code != http.StatusBadRequest || errorMessage(t, body) != `paused: "yes" is not true or false` {
		t.Errorf("paused=yes: %d %s", code, body)
	}

	// A request reads at most its scan of jobs: with a scan of 4 and one
	// job in three kept, pages hold 1 or 2 jobs, and the cursor goes on.
	var got []string
	cursor, short := "", 0
	for pages := 0; ; pages++ {
		if pages > 40 {
			t.Fatal("the scanned listing does not end")
		}
		jobs, next, err := e.store.ListPrefixWhere(context.Background(), "", cursor, 10, 4, func(j api.Job) bool { return j.Paused })
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) < 10 && next != "" {
			short++
		}
		got = append(got, jobIDs(jobs)...)
		if next == "" {
			break
		}
		cursor = next
	}
	if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(paused))) || short == 0 {
		t.Errorf("scanned 4 at a time: listed %q (%d short pages), want %q", got, short, paused)
	}
}
