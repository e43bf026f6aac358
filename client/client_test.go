package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/internal/testkit/tlstest"
)

var etcd *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, &etcd, etcdtest.KeepAliveLeaks()...))
}

// fleet starts one member running the scheduler and serving the API, on
// the orchestrator's default lease TTL (5s): etcd's 2s minimum leaves a
// renew deadline that members miss on a loaded machine, and these tests
// are about the API, not about losing leases.
func fleet(t *testing.T) (*fleettest.Fleet, *fleettest.Member) {
	t.Helper()
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, Quiet: true, LeaseTTL: 5 * time.Second})
	m := f.Join("a")
	f.WaitSettled(30 * time.Second)
	return f, m
}

// newClient returns a client of url sending token, closed at the end.
func newClient(t *testing.T, url, token string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Server: url, Token: token, Timeout: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func httpJob(id string) api.Job {
	return api.Job{ID: id, Schedule: "@every 1h", Executor: api.Executor{Type: api.ExecutorHTTP, URL: "http://127.0.0.1:9/hook"}}
}

func TestJobs(t *testing.T) {
	f, m := fleet(t)
	c := newClient(t, m.URL, f.AdminToken)
	ctx := ctx(t)

	// An ID with a slash, a percent sign and a space is one path segment.
	id := "team/a 100%"
	created, err := c.CreateJob(ctx, httpJob(id))
	if err != nil {
		t.Fatal(err)
	}
	if created.ID != id || created.Revision == 0 {
		t.Fatalf("created %+v", created)
	}
	if _, err := c.CreateJob(ctx, httpJob(id)); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	got, err := c.GetJob(ctx, id)
	if err != nil || got.ID != id || got.Revision != created.Revision {
		t.Fatalf("get: %+v, %v", got, err)
	}

	// Replacing at a stale revision changes nothing; at the current one it
	// replaces.
	stale := got
	stale.Revision = created.Revision - 1
	stale.Schedule = "@every 2h"
	if _, _, err := c.PutJob(ctx, stale); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("put at a stale revision: %v, want ErrConflict", err)
	}
	got.Schedule = "@every 3h"
	replaced, isNew, err := c.PutJob(ctx, got)
	if err != nil || isNew || replaced.Schedule != "@every 3h" || replaced.Revision <= created.Revision {
		t.Fatalf("put: %+v new %v, %v", replaced, isNew, err)
	}
	if _, isNew, err := c.PutJob(ctx, httpJob("put-new")); err != nil || !isNew {
		t.Fatalf("put of a new job: new %v, %v", isNew, err)
	}
	// A document is sent as it is: the server, not a Go struct, refuses a
	// misspelt field.
	_, err = c.CreateJobJSON(ctx, []byte(`{"id":"typo","schedul":"@every 1h","executor":{"type":"http","url":"http://127.0.0.1:9/"}}`))
	var apiErr *client.Error
	if !errors.Is(err, client.ErrBadRequest) || !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "schedul") {
		t.Fatalf("misspelt field: %v, want a 400 naming it", err)
	}

	// Pages of 2 cover every job once.
	for i := range 3 {
		if _, err := c.CreateJob(ctx, httpJob("page-"+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	opts := client.ListOptions{Limit: 2}
	for pages := 0; ; pages++ {
		page, err := c.ListJobs(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) > 2 || pages > 5 {
			t.Fatalf("page %d has %d jobs", pages, len(page.Jobs))
		}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	all, err := c.AllJobs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var allIDs []string
	for _, j := range all {
		allIDs = append(allIDs, j.ID)
	}
	slices.Sort(ids)
	slices.Sort(allIDs)
	want := []string{"page-a", "page-b", "page-c", "put-new", id}
	if !slices.Equal(ids, want) || !slices.Equal(allIDs, want) {
		t.Fatalf("paged %q, all %q, want %q", ids, allIDs, want)
	}

	if j, err := c.PauseJob(ctx, id); err != nil || !j.Paused {
		t.Fatalf("pause: %+v, %v", j, err)
	}
	if j, err := c.ResumeJob(ctx, id); err != nil || j.Paused {
		t.Fatalf("resume: %+v, %v", j, err)
	}
	runID, err := c.TriggerJob(ctx, id)
	if err != nil || runID == "" {
		t.Fatalf("trigger: %q, %v", runID, err)
	}
	waitFor(t, func() bool {
		runs, err := c.ListRuns(ctx, id, 10)
		return err == nil && slices.ContainsFunc(runs, func(r api.Run) bool { return r.ID == runID })
	})
	if r, err := c.GetRun(ctx, runID); err != nil || r.ID != runID || r.JobID != id {
		t.Fatalf("get run: %+v, %v", r, err)
	}

	if err := c.DeleteJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetJob(ctx, id); !errors.Is(err, client.ErrNotFound) || client.StatusCode(err) != http.StatusNotFound {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if err := c.DeleteJob(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("delete again: %v, want ErrNotFound", err)
	}
}

func TestCredentialsAndTokens(t *testing.T) {
	f, m := fleet(t)
	ctx := ctx(t)
	if _, err := newClient(t, m.URL, "").GetJob(ctx, "x"); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("no token: %v, want ErrUnauthorized", err)
	}
	if _, err := newClient(t, m.URL, f.WorkerToken).CreateJob(ctx, httpJob("w")); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("worker creating a job: %v, want ErrForbidden", err)
	}

	c := newClient(t, m.URL, f.AdminToken)
	cr, err := c.CreateToken(ctx, api.CreateRequest{Role: api.RoleViewer, Description: "client test"})
	if err != nil || cr.Secret == "" || cr.Role != api.RoleViewer {
		t.Fatalf("create token: %+v, %v", cr, err)
	}
	list, err := c.ListTokens(ctx)
	if err != nil || !slices.ContainsFunc(list, func(tok api.Token) bool { return tok.ID == cr.ID }) {
		t.Fatalf("list tokens: %+v, %v", list, err)
	}
	// Page by page, one a page: the same credentials, in ID order.
	var paged []api.Token
	opts := client.ListOptions{Limit: 1}
	for range len(list) + 1 {
		page, err := c.ListTokensPage(ctx, opts)
		if err != nil || len(page.Tokens) > 1 {
			t.Fatalf("page after %q: %+v, %v", opts.Cursor, page, err)
		}
		paged = append(paged, page.Tokens...)
		if opts.Cursor = page.NextCursor; opts.Cursor == "" {
			break
		}
	}
	if !slices.EqualFunc(paged, list, func(a, b api.Token) bool { return a.ID == b.ID }) || len(list) < 2 {
		t.Fatalf("paged %v, want %v (at least two)", paged, list)
	}
	viewer := newClient(t, m.URL, cr.Secret)
	waitFor(t, func() bool { _, err := viewer.Members(ctx); return err == nil })
	if err := c.DeleteToken(ctx, cr.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := viewer.Members(ctx); return errors.Is(err, client.ErrUnauthorized) })
	if err := c.DeleteToken(ctx, cr.ID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("revoke again: %v, want ErrNotFound", err)
	}
}

func TestCluster(t *testing.T) {
	f, m := fleet(t)
	b := f.Join("b")
	f.WaitSettled(30 * time.Second)
	ctx := ctx(t)
	c := newClient(t, m.URL, f.AdminToken)
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := c.Members(ctx)
	if err != nil || len(v.Members) != 2 {
		t.Fatalf("members: %+v, %v", v, err)
	}
	tbl, err := c.Partitions(ctx)
	if err != nil || tbl.Partitions != 8 || len(tbl.Rows) != 8 {
		t.Fatalf("partitions: %+v, %v", tbl, err)
	}
	for i, r := range tbl.Rows {
		if r.Partition != i || r.Owner == "" || r.Owner != r.Target || r.Epoch == 0 {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	rep, err := c.Storage(ctx)
	if err != nil || rep.DBSize == 0 || rep.Revision == 0 {
		t.Fatalf("storage: %+v, %v", rep, err)
	}

	// Drain goes to the member the client talks to.
	if err := newClient(t, b.URL, f.AdminToken).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		v, err := c.Members(ctx)
		return err == nil && len(v.Members) == 1 && v.Members[0].ID == "a"
	})
}

func TestWorkerProtocol(t *testing.T) {
	f, m := fleet(t)
	ctx := ctx(t)
	adm := newClient(t, m.URL, f.AdminToken)
	w := newClient(t, m.URL, f.WorkerToken)
	job := httpJob("proto")
	job.Schedule = ""
	if _, err := adm.CreateJob(ctx, job); err != nil { // runs once, now
		t.Fatal(err)
	}
	var a api.AttemptGrant
	waitFor(t, func() bool {
		resp, err := w.Poll(ctx, api.PollRequest{Worker: "w1", Executors: []string{"http"}, Max: 1, Wait: api.Duration(time.Second)})
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if len(resp.Attempts) == 1 {
			a = resp.Attempts[0]
		}
		return len(resp.Attempts) == 1
	})
	if a.JobID != "proto" || a.Owner != "a" {
		t.Fatalf("attempt %+v", a)
	}
	hb, err := w.Heartbeat(ctx, api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt})
	if err != nil || hb.RunLease <= 0 {
		t.Fatalf("heartbeat: %+v, %v", hb, err)
	}
	// Another worker credential may not report the attempt.
	other := newClient(t, m.URL, f.Token(api.RoleWorker, ""))
	if _, err := other.Complete(ctx, api.CompleteRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt, Success: true}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("complete with another credential: %v, want ErrForbidden", err)
	}
	done, err := w.Complete(ctx, api.CompleteRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt, Success: true})
	if err != nil || done.Status != api.RunSucceeded {
		t.Fatalf("complete: %+v, %v", done, err)
	}
	if _, err := w.Heartbeat(ctx, api.HeartbeatRequest{Worker: "w1", RunID: a.RunID, Attempt: a.Attempt}); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("heartbeat after completion: %v, want ErrConflict", err)
	}
	if r, err := adm.GetRun(ctx, a.RunID); err != nil || r.Status != api.RunSucceeded {
		t.Fatalf("run: %+v, %v", r, err)
	}
	// Stopping: the worker ends its waiting poll, which answers at once
	// with nothing (ended again until it has arrived and waits).
	polled := make(chan error, 1)
	go func() {
		resp, err := w.Poll(ctx, api.PollRequest{Worker: "w1", Executors: []string{"http"}, Max: 1, Wait: api.Duration(api.MaxPollWait)})
		if err == nil && len(resp.Attempts) != 0 {
			err = fmt.Errorf("%d attempts, want none", len(resp.Attempts))
		}
		polled <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := w.EndPolls(ctx, api.EndPollsRequest{Worker: "w1"}); err != nil {
			t.Fatalf("end polls: %v", err)
		}
		select {
		case err := <-polled:
			if err != nil {
				t.Fatalf("the ended poll: %v", err)
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the poll did not answer within 10s of the end requests")
		}
	}
}

// TestErrorReplies checks the decoding of replies the real server gives
// only under load or on another member: 429 with Retry-After, 421 with
// the owner, and a body that is not a JSON error.
func TestErrorReplies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/jobs/slow/trigger":
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"job \"slow\" is triggered too often"}`))
		case api.PathComplete:
			w.WriteHeader(http.StatusMisdirectedRequest)
			w.Write([]byte(`{"error":"not the owner","owner":"b","owner_addr":"http://b:8080"}`))
		case "/v1/jobs/empty":
			w.WriteHeader(http.StatusOK) // a 200 without its document
		default:
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("upstream down\n"))
		}
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, "")
	ctx := ctx(t)
	var e *client.Error

	_, err := c.TriggerJob(ctx, "slow")
	if !errors.Is(err, client.ErrTooManyRequests) || !errors.As(err, &e) || e.RetryAfter != 7*time.Second {
		t.Fatalf("429: %v (%+v), want ErrTooManyRequests with Retry-After 7s", err, e)
	}
	if got := err.Error(); got != `429 Too Many Requests: job "slow" is triggered too often` {
		t.Errorf("message %q", got)
	}
	_, err = c.Complete(ctx, api.CompleteRequest{Worker: "w", RunID: "r", Attempt: 1})
	if !errors.Is(err, client.ErrNotOwner) || !errors.As(err, &e) || e.Owner != "b" || e.OwnerAddr != "http://b:8080" {
		t.Fatalf("421: %v (%+v)", err, e)
	}
	if errors.Is(err, client.ErrNotFound) {
		t.Error("a 421 matches ErrNotFound")
	}
	if _, err := c.GetJob(ctx, "empty"); err == nil || !strings.Contains(err.Error(), "bad reply") {
		t.Fatalf("200 without a document: %v, want a bad reply error", err)
	}
	err = c.Drain(ctx)
	if client.StatusCode(err) != http.StatusBadGateway || err.Error() != "502 Bad Gateway: upstream down" {
		t.Fatalf("502 with a text body: %v", err)
	}
}

func TestConfig(t *testing.T) {
	for _, bad := range []string{"", "ftp://h:1", "http://user@h:1", "http://h:1/?q=1", "http://", "http://h:0", "h:99999", "http://h:65536/", "https://[::1]:0"} {
		if _, err := client.New(client.Config{Server: bad}); err == nil {
			t.Errorf("server %q accepted", bad)
		}
	}
	c, err := client.New(client.Config{Server: "127.0.0.1:8080"})
	if err != nil || c.Server() != "http://127.0.0.1:8080" {
		t.Fatalf("bare HOST:PORT: %v, %v", c, err)
	}
	dir := t.TempDir()
	if _, err := client.New(client.Config{Server: "https://h:1", CertFile: filepath.Join(dir, "c.pem")}); err == nil {
		t.Error("CertFile without KeyFile accepted")
	}
	if _, err := client.New(client.Config{Server: "https://h:1", CAFile: filepath.Join(dir, "missing.pem")}); err == nil || !strings.Contains(err.Error(), "CAFile") {
		t.Errorf("missing CA file: %v", err)
	}
}

// TestTLS talks to an https server that verifies client certificates,
// with the CA, certificate and key given as files.
func TestTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "client test CA")
	dir := t.TempDir()
	caFile := ca.CertFile
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	ca.Client(t, "cli").Write(t, certFile, keyFile)

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 || r.Header.Get("Authorization") != "Bearer s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"status":"ready"}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "127.0.0.1").TLS(t)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	srv.StartTLS()
	defer srv.Close()

	c, err := client.New(client.Config{Server: srv.URL, Token: "s3cret", CAFile: caFile, CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ready(ctx(t)); err != nil {
		t.Fatalf("with CA, certificate and token: %v", err)
	}
	// Without the CA the server is not trusted.
	untrusting, err := client.New(client.Config{Server: srv.URL, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close()
	if err := untrusting.Ready(ctx(t)); err == nil || client.StatusCode(err) != 0 {
		t.Fatalf("without the CA: %v, want a TLS failure", err)
	}
}

// waitFor polls cond every 20ms for up to 20s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
	}
}
