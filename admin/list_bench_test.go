package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/admintest"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/shard"
	"github.com/jobfleet/jobfleet/store"
)

// BenchmarkListAllJobs lists every job through GET /v1/jobs, a page of
// 1 000 at a time, as an admin and as a viewer (whose jobs are redacted,
// so they are decoded since they have headers), each from a store that
// passes the stored documents through and from one that does not
// (-decoding), and as an admin whose client decodes only the IDs (-ids, as
// jobfleet bench scale does), and reports jobs per second and the CPU time per job of the whole
// process (server, embedded etcd and the client decoding the pages): on a
// loaded machine the CPU time is the figure to compare. Run with
//
//	go test -run '^$' -bench ListAllJobs -benchtime 3x ./admin
func BenchmarkListAllJobs(b *testing.B) {
	const n = 20_000
	client := etcd.Client(b)
	ns := etcdtest.Namespace(b)
	s := store.NewEtcd(client, ns, testPartitions, api.DefaultLimits(), nil)
	putJobs(b, client, s, n)
	tokens := staticAuth{adminToken: {ID: "test-admin", Role: api.RoleAdmin}, "viewer-token": {ID: "viewer", Role: api.RoleViewer}}
	server := func(js admin.JobStore) *httptest.Server {
		h := admin.Handler(admintest.Member{Jobs: js, Auth: tokens}, admin.Config{
			Gatherer: prometheus.NewRegistry(),
			Logger:   zap.NewNop(),
			Limits:   admin.Limits{Rate: -1},
		})
		srv := httptest.NewServer(h)
		b.Cleanup(srv.Close)
		return srv
	}
	// The store itself lets the listing pass stored documents through;
	// hidden behind the JobStore interface, it makes the listing decode
	// and encode every job, as it did before.
	stored, decoded := server(s), server(struct{ admin.JobStore }{s})
	for _, who := range []struct {
		name, token string
		srv         *httptest.Server
		idsOnly     bool
	}{
		{"admin", adminToken, stored, false}, {"admin-decoding", adminToken, decoded, false},
		{"viewer", "viewer-token", stored, false}, {"viewer-decoding", "viewer-token", decoded, false},
		{"admin-ids", adminToken, stored, true},
	} {
		srv := who.srv
		b.Run(who.name, func(b *testing.B) {
			start, cpu0 := time.Now(), cpuTime(b)
			listed := 0
			for range b.N {
				listed += listAll(b, srv, who.token, who.idsOnly)
			}
			if listed != n*b.N {
				b.Fatalf("listed %d jobs, want %d", listed, n*b.N)
			}
			b.ReportMetric(float64(listed)/time.Since(start).Seconds(), "jobs/s")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(listed), "cpu-µs/job")
		})
	}
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// listAll pages through GET /v1/jobs and returns how many jobs it saw.
// It decodes every job into a api.Job, or, if idsOnly, only the IDs,
// as the list phase of jobfleet bench scale does.
func listAll(b *testing.B, srv *httptest.Server, token string, idsOnly bool) int {
	b.Helper()
	seen, cursor := 0, ""
	for {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/jobs?limit=1000&cursor="+url.QueryEscape(cursor), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("list: %d %s %v", resp.StatusCode, data, err)
		}
		var (
			page api.JobList
			ids  struct {
				Jobs []struct {
					ID string `json:"id"`
				} `json:"jobs"`
				NextCursor string `json:"next_cursor"`
			}
			n    int
			next string
		)
		if idsOnly {
			err, n, next = json.Unmarshal(data, &ids), len(ids.Jobs), ids.NextCursor
		} else {
			err, n, next = json.Unmarshal(data, &page), len(page.Jobs), page.NextCursor
		}
		if err != nil {
			b.Fatal(err)
		}
		seen += n
		if next == "" {
			return seen
		}
		cursor = next
	}
}

// putJobs writes n jobs as the API stores them, 100 per transaction.
func putJobs(b *testing.B, client *clientv3.Client, s *store.Etcd, n int) {
	b.Helper()
	var ops []clientv3.Op
	flush := func() {
		if len(ops) == 0 {
			return
		}
		if _, err := client.Txn(context.Background()).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
		ops = ops[:0]
	}
	for i := range n {
		j := api.Job{
			ID: fmt.Sprintf("tenant-%03d/report-%07d", i%1000, i), Schedule: "*/5 * * * *", Timezone: "Europe/Berlin",
			Executor: api.Executor{Type: "http", URL: fmt.Sprintf("https://reports.example.com/hooks/%d", i), Method: "POST",
				Headers: map[string]api.HeaderValue{"X-Tenant": {Value: fmt.Sprintf("tenant-%03d", i%1000)}}},
			Payload:   json.RawMessage(fmt.Sprintf(`{"report":"daily-usage","tenant":%d}`, i%1000)),
			Partition: shard.Partition(fmt.Sprintf("tenant-%03d/report-%07d", i%1000, i), testPartitions),
			CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC(),
		}
		j.Normalize()
		val, err := json.Marshal(j)
		if err != nil {
			b.Fatal(err)
		}
		ops = append(ops, clientv3.OpPut(s.Keys().Spec(j.Partition, j.ID), string(val)))
		if len(ops) == 100 {
			flush()
		}
	}
	flush()
}
