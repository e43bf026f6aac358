package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/console"
	"github.com/jobfleet/jobfleet/internal/httpserver"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
)

// fakeCluster is an admin.Cluster whose partition state the test sets.
type fakeCluster struct {
	mu      sync.Mutex
	state   api.PartitionStreamSnapshot
	changed chan struct{}
	asked   []string      // placement IDs asked for
	late    []api.LateRun // what Late answers
}

func newFakeCluster(p int) *fakeCluster {
	rows := make([]api.PartitionStreamChange, p)
	for i := range rows {
		rows[i] = api.PartitionStreamChange{Partition: i, Owner: "m1", Epoch: int64(10 + i), Target: "m1"}
	}
	return &fakeCluster{
		state:   api.PartitionStreamSnapshot{Partitions: p, Revision: 1, Rows: rows, Members: json.RawMessage(`{"revision":1,"members":[{"id":"m1"}]}`)},
		changed: make(chan struct{}),
	}
}

func (f *fakeCluster) Placement(_ context.Context, id string) (api.Placement, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, id)
	return api.Placement{Job: id, Partitions: f.state.Partitions, Owner: "m1", Target: "m1", Reason: "owner is the ring's target"}, nil
}

func (f *fakeCluster) Overview() (api.Overview, error) {
	return api.Overview{Member: "m1", Partitions: f.state.Partitions, Members: []api.OverviewMember{}}, nil
}

func (f *fakeCluster) Activity(context.Context) (api.FleetActivity, error) {
	return api.FleetActivity{Member: "m1", Members: []api.MemberActivity{}}, nil
}

func (f *fakeCluster) Late(context.Context) (api.LateRuns, error) {
	return api.LateRuns{Runs: slices.Clone(f.late)}, nil
}

func (f *fakeCluster) PartitionState() (api.PartitionStreamSnapshot, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state, f.changed, nil
}

// set replaces the state with change applied to a copy of its rows.
func (f *fakeCluster) set(change func(rows []api.PartitionStreamChange), members string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rows := append([]api.PartitionStreamChange(nil), f.state.Rows...)
	change(rows)
	f.state.Rows = rows
	if members != "" {
		f.state.Members = json.RawMessage(members)
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// event is one server-sent event.
type event struct {
	name, data string
	comment    bool
}

// readEvent reads the next event or comment from r.
func readEvent(t *testing.T, r *bufio.Reader) event {
	t.Helper()
	var ev event
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v (after %q)", err, line)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.name != "" || ev.comment {
				return ev
			}
		case strings.HasPrefix(line, ":"):
			ev.comment = true
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func streamServer(t *testing.T, c admin.Cluster, clock clockwork.Clock, limits admin.Limits) *httptest.Server {
	t.Helper()
	limits.Rate = -1
	srv := httptest.NewServer(admin.Handler(&fakeMember{Member: admintest.Member{Auth: testAuth, Cluster: c}}, admin.Config{Gatherer: prometheus.NewRegistry(), Clock: clock, Limits: limits}))
	t.Cleanup(srv.Close)
	return srv
}

func openStream(t *testing.T, ctx context.Context, srv *httptest.Server) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/cluster/partitions/watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(asAdmin(req))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

func TestPartitionStream(t *testing.T) {
	c := newFakeCluster(4)
	clock := clockwork.NewFakeClock()
	srv := streamServer(t, c, clock, admin.Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, r := openStream(t, ctx, srv)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("got %d %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	ev := readEvent(t, r)
	var snap api.PartitionStreamSnapshot
	if err := json.Unmarshal([]byte(ev.data), &snap); ev.name != "snapshot" || err != nil {
		t.Fatalf("first event %q (%v), want snapshot", ev.name, err)
	}
	if len(snap.Rows) != 4 || snap.Rows[3].Epoch != 13 || !strings.Contains(string(snap.Members), `"m1"`) {
		t.Fatalf("snapshot %+v, want 4 rows and the members", snap)
	}

	// Partition 2 moves: one change event for it, none for the others.
	c.set(func(rows []api.PartitionStreamChange) { rows[2].Owner, rows[2].Epoch = "m2", 99 }, "")
	ev = readEvent(t, r)
	var ch api.PartitionStreamChange
	if err := json.Unmarshal([]byte(ev.data), &ch); ev.name != "change" || err != nil || ch.Partition != 2 || ch.Owner != "m2" || ch.Epoch != 99 {
		t.Fatalf("got %s %s, want a change of partition 2 to m2 at epoch 99", ev.name, ev.data)
	}

	// A member joins and targets move: members first, then the changes.
	c.set(func(rows []api.PartitionStreamChange) { rows[0].Target, rows[1].Target = "m3", "m3" }, `{"revision":2,"members":[{"id":"m1"},{"id":"m3"}]}`)
	ev = readEvent(t, r)
	if ev.name != "members" || !strings.Contains(ev.data, `"m3"`) {
		t.Fatalf("got %s %s, want members with m3", ev.name, ev.data)
	}
	for _, want := range []int{0, 1} {
		ev = readEvent(t, r)
		if err := json.Unmarshal([]byte(ev.data), &ch); ev.name != "change" || err != nil || ch.Partition != want || ch.Target != "m3" {
			t.Fatalf("got %s %s, want partition %d targeted at m3", ev.name, ev.data, want)
		}
	}

	// Nothing changes for StreamPing: a comment keeps the stream alive.
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(admin.StreamPing)
	if ev = readEvent(t, r); !ev.comment {
		t.Fatalf("got %+v, want a ping comment", ev)
	}
}

// TestPartitionStreamsAreCappedPerCredential: one credential cannot take
// every stream slot of a member; another still gets one.
func TestPartitionStreamsAreCappedPerCredential(t *testing.T) {
	const greedy, other = "greedy-viewer-token", "other-viewer-token"
	a := staticAuth{greedy: {ID: "greedy", Role: api.RoleViewer}, other: {ID: "other", Role: api.RoleViewer}}
	srv := httptest.NewServer(admin.Handler(&fakeMember{Member: admintest.Member{Auth: a, Cluster: newFakeCluster(2)}}, admin.Config{Gatherer: prometheus.NewRegistry(), Clock: clockwork.NewFakeClock(),
		Limits: admin.Limits{Rate: -1, MaxStreams: 4, MaxStreamsPerCredential: 2}}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(token string) (*http.Response, *bufio.Reader) {
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/cluster/partitions/watch", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, bufio.NewReader(resp.Body)
	}
	for i := range 2 {
		resp, r := open(greedy)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("greedy's stream %d, within its cap: %d", i+1, resp.StatusCode)
		}
		readEvent(t, r) // the snapshot: the stream holds its slot
	}
	resp, _ := open(greedy)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("greedy's third stream: %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), "--max-streams-per-credential") {
		t.Errorf("greedy's third stream: %s; want the reply to name --max-streams-per-credential", body)
	}
	for i := range 2 {
		resp, r := open(other)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("another credential's stream %d, with slots left: %d", i+1, resp.StatusCode)
		}
		readEvent(t, r)
	}
}

func TestPartitionStreamsAreCapped(t *testing.T) {
	srv := streamServer(t, newFakeCluster(2), clockwork.NewFakeClock(), admin.Limits{MaxStreams: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		resp, r := openStream(t, ctx, srv)
		if resp.StatusCode != 200 {
			t.Fatalf("stream within the cap: %d", resp.StatusCode)
		}
		readEvent(t, r) // the snapshot: the stream holds its slot
	}
	resp, _ := openStream(t, ctx, srv)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third stream: %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// A client that goes frees its slot.
	ctx2, cancel2 := context.WithCancel(context.Background())
	srv2 := streamServer(t, newFakeCluster(2), clockwork.NewFakeClock(), admin.Limits{MaxStreams: 1})
	_, r := openStream(t, ctx2, srv2)
	readEvent(t, r)
	cancel2()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, _ := openStream(t, ctx, srv2)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot of a closed stream was not freed: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPlacementValidatesTheID(t *testing.T) {
	c := newFakeCluster(1)
	srv := streamServer(t, c, clockwork.NewFakeClock(), admin.Limits{})
	for _, tt := range []struct {
		query string
		code  int
	}{
		{"job=billing%2Finvoice", 200},
		{"", 400},
		{"job=%20lead", 400},
		{"job=a%00b", 400},
		{"job=" + strings.Repeat("x", 201), 400},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/cluster/placement?"+tt.query, nil)
		resp, err := srv.Client().Do(asAdmin(req))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code {
			t.Errorf("?%s: got %d (%s), want %d", tt.query, resp.StatusCode, body, tt.code)
		}
		if tt.code == 400 && !strings.Contains(string(body), "job") {
			t.Errorf("?%s: the error %s does not name the parameter", tt.query, body)
		}
	}
	if len(c.asked) != 1 || c.asked[0] != "billing/invoice" {
		t.Errorf("the cluster was asked for %q, want only billing/invoice", c.asked)
	}
}

// TestLateRunsStayInTheCredentialsScope: a scoped viewer sees the late
// runs of its prefix's jobs only, an admin every one.
func TestLateRunsStayInTheCredentialsScope(t *testing.T) {
	c := newFakeCluster(2)
	c.late = []api.LateRun{{RunID: "team/a@1", JobID: "team/a", Reason: "no worker"}, {RunID: "other/b@1", JobID: "other/b", Reason: "no worker"}}
	auths := staticAuth{"v": {ID: "team-viewer", Role: api.RoleViewer, Prefix: "team/"}, "a": {ID: "root", Role: api.RoleAdmin}}
	srv := httptest.NewServer(admin.Handler(&fakeMember{Member: admintest.Member{Auth: auths, Cluster: c}}, admin.Config{Gatherer: prometheus.NewRegistry()}))
	defer srv.Close()
	for token, want := range map[string][]string{"v": {"team/a"}, "a": {"team/a", "other/b"}} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/runs/late", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got api.LateRuns
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("token %s: %d, %v", token, resp.StatusCode, err)
		}
		var ids []string
		for _, r := range got.Runs {
			ids = append(ids, r.JobID)
		}
		if !slices.Equal(ids, want) {
			t.Errorf("token %s sees late runs of %v, want %v", token, ids, want)
		}
	}
}

func TestWhoami(t *testing.T) {
	auths := staticAuth{"v": {ID: "team-viewer", Role: api.RoleViewer, Prefix: "team/"}}
	srv := httptest.NewServer(admin.Handler(&fakeMember{Member: admintest.Member{Auth: auths}}, admin.Config{Gatherer: prometheus.NewRegistry()}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer v")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got api.Whoami
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if want := (api.Whoami{Credential: "team-viewer", Role: "viewer", Prefix: "team/"}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestListPrefixStaysInTheCredentialsScope(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	for _, id := range []string{"team/a1", "team/a2", "team/b1", "other/a1"} {
		e.ensureJob(id)
	}
	scoped := e.cred(api.CreateRequest{Role: api.RoleViewer, Prefix: "team/"})
	all := e.cred(api.CreateRequest{Role: api.RoleViewer})
	for _, tt := range []struct {
		token, prefix string
		code          int
		want          string
	}{
		{all.Secret, "team/a", 200, "team/a1 team/a2"},
		{all.Secret, "", 200, "other/a1 team/a1 team/a2 team/b1"},
		{scoped.Secret, "", 200, "team/a1 team/a2 team/b1"},
		{scoped.Secret, "te", 200, "team/a1 team/a2 team/b1"},
		{scoped.Secret, "team/b", 200, "team/b1"},
		{scoped.Secret, "other/", 200, ""},
	} {
		code, _, body := e.send(request{method: "GET", path: "/v1/jobs?prefix=" + url.QueryEscape(tt.prefix)}, tt.token)
		if code != tt.code {
			t.Errorf("prefix %q: got %d (%s), want %d", tt.prefix, code, body, tt.code)
			continue
		}
		if code != 200 {
			continue
		}
		var list api.JobList
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, j := range list.Jobs {
			ids = append(ids, j.ID)
		}
		if got := sortedJoin(ids); got != tt.want {
			t.Errorf("prefix %q: listed %q, want %q", tt.prefix, got, tt.want)
		}
	}
}

func sortedJoin(ids []string) string {
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			if ids[j] < ids[i] {
				ids[i], ids[j] = ids[j], ids[i]
			}
		}
	}
	return strings.Join(ids, " ")
}

func TestConsoleIsServedWithItsSecurityHeaders(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	for _, path := range []string{"/ui/", "/ui/index.html"} {
		code, hdr, body := e.send(request{method: "GET", path: path}, "")
		if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
			t.Fatalf("%s: got %d %q, want the page", path, code, hdr.Get("Content-Type"))
		}
		for k, want := range map[string]string{
			"Content-Security-Policy": console.ContentSecurityPolicy,
			"X-Frame-Options":         "DENY",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
		} {
			if got := hdr.Get(k); got != want {
				t.Errorf("%s: %s is %q, want %q", path, k, got, want)
			}
		}
		for _, bad := range []string{"<script>", "style=", "onclick", "Bearer "} {
			if strings.Contains(string(body), bad) {
				t.Errorf("%s: the page holds %q (inline script or style, or a credential)", path, bad)
			}
		}
		// The page's script and style load, with the same headers.
		for _, ref := range []string{`src="`, `href="`} {
			i := strings.Index(string(body), ref)
			rest := string(body)[i+len(ref):]
			asset := rest[:strings.IndexByte(rest, '"')]
			if !strings.HasPrefix(asset, "app.") && !strings.HasPrefix(asset, "style.") {
				continue
			}
			code, hdr, _ := e.send(request{method: "GET", path: "/ui/" + asset}, "")
			if code != 200 || hdr.Get("Content-Security-Policy") != console.ContentSecurityPolicy || hdr.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("/ui/%s: got %d, headers %v", asset, code, hdr)
			}
		}
	}
	// Redirects to the page, the mux's included, carry the headers too.
	noFollow := &http.Client{Transport: e.srv.Client().Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/", "/ui", "/ui/./index.html", "/ui//index.html"} {
		resp, err := noFollow.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 300 || resp.StatusCode > 399 || resp.Header.Get("Location") == "" {
			t.Errorf("%s: got %d (Location %q), want a redirect", path, resp.StatusCode, resp.Header.Get("Location"))
		}
		for k, want := range map[string]string{
			"Content-Security-Policy": console.ContentSecurityPolicy,
			"X-Frame-Options":         "DENY",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
		} {
			if got := resp.Header.Get(k); got != want {
				t.Errorf("%s: the redirect's %s is %q, want %q", path, k, got, want)
			}
		}
	}
	if code, _, _ := e.send(request{method: "GET", path: "/ui/../v1/jobs"}, ""); code == 200 {
		t.Errorf("a path out of /ui/ answered 200 without a credential")
	}
	if code, _, _ := e.send(request{method: "GET", path: "/ui/secret.txt"}, ""); code != 404 {
		t.Errorf("an unknown console file: got %d, want 404", code)
	}
	if code, _, _ := e.send(request{method: "POST", path: "/ui/", body: "{}"}, ""); code != http.StatusMethodNotAllowed && code != http.StatusUnauthorized {
		t.Errorf("POST /ui/: got %d, want 405 or 401", code)
	}
	_ = fmt.Sprint()
}

// TestPartitionStreamOutlivesTheWriteTimeout: the server's write timeout
// bounds whole replies; a stream pushes it ahead at every write, so it
// goes on past it.
func TestPartitionStreamOutlivesTheWriteTimeout(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	c := newFakeCluster(2)
	clock := clockwork.NewFakeClock()
	cfg := httpserver.DefaultConfig()
	cfg.WriteTimeout = writeTimeout
	srv, err := httpserver.Start("127.0.0.1:0", admin.Handler(&fakeMember{Member: admintest.Member{Auth: testAuth, Cluster: c}}, admin.Config{Gatherer: prometheus.NewRegistry(), Clock: clock, Limits: admin.Limits{Rate: -1}}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+srv.Addr()+"/v1/cluster/partitions/watch", nil)
	resp, err := http.DefaultClient.Do(asAdmin(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if ev := readEvent(t, r); ev.name != "snapshot" {
		t.Fatalf("got %+v, want the snapshot", ev)
	}
	for i := range 3 {
		time.Sleep(writeTimeout) // real time: the timeout is the socket's
		c.set(func(rows []api.PartitionStreamChange) { rows[0].Epoch = int64(100 + i) }, "")
		if ev := readEvent(t, r); ev.name != "change" {
			t.Fatalf("after %v: got %+v, want a change", time.Duration(i+1)*writeTimeout, ev)
		}
	}
}

// TestConsoleOpensFromALinkButTheAPIDoesNot: a link from another site to
// the console is followed (its files hold no data); the API requests of
// any page of another site are refused.
func TestConsoleOpensFromALinkButTheAPIDoesNot(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	tok := e.cred(api.CreateRequest{Role: api.RoleViewer}).Secret
	cross := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
	if code, _, _ := e.send(request{method: "GET", path: "/ui/", header: cross}, ""); code != http.StatusOK {
		t.Errorf("a cross-site navigation to /ui/: %d, want 200", code)
	}
	for _, r := range []request{
		{method: "GET", path: "/v1/whoami", header: cross},
		{method: "GET", path: "/v1/jobs", header: map[string]string{"Origin": "https://evil.example"}},
		{method: "POST", path: "/ui/", header: map[string]string{"Origin": "https://evil.example"}},
	} {
		if code, _, _ := e.send(r, tok); code != http.StatusForbidden {
			t.Errorf("%s %s from another site: %d, want 403", r.method, r.path, code)
		}
	}
}
