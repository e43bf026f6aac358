package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// The noisy-tenant tests run a fleet on an etcd with a 64 MiB quota,
// filled to just below the high-water mark (80%), and let one
// low-privilege credential flood it from several goroutines for a bounded
// time, as fast as it is answered (a 429 costs the flooder only a short
// pause). etcd must never raise NOSPACE, and another team's job must fire
// every second on time throughout.
const (
	noisyQuota    = 64 << 20
	noisyFlood    = 10 * time.Second
	noisyFlooders = 4
)

// noisyFleet is the fleet of a noisy-tenant test.
type noisyFleet struct {
	f    *fleettest.Fleet
	srv  *etcdtest.Server
	base string
	rcv  *receiver
}

func newNoisyFleet(t *testing.T) *noisyFleet {
	t.Helper()
	srv := smallEtcd(t, noisyQuota)
	f := fleettest.New(t, srv, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	nf := &noisyFleet{f: f, srv: srv, base: f.URLs()[0], rcv: newReceiver(t)}
	startWorkers(t, 1, f.URLs(), f.WorkerToken, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	createEverySecond(t, f.AdminToken, nf.base, "victim/tick", nf.rcv.srv.URL, nil)
	waitFor(t, 10*time.Second, func() bool { return len(runsOf(t, f.AdminToken, nf.base, "victim/tick")) >= 2 })
	return nf
}

// fillBelowHighWater fills etcd with other data to just below the
// high-water mark, and checks that it is below. It writes what is missing
// to 75% of the quota in 128 KiB values of distinct keys (no history), in
// rounds of at most 12 MiB, each ended by a few small writes, a
// compaction and a defragmentation, so that the database is its live
// data when the flood starts. Both are for bbolt's sake, not the
// fleet's: etcd's key bucket is ordered by revision, and bbolt never
// splits a leaf of four entries or fewer, so every write after a large
// value rewrites the leaf holding the last few large values (up to 512
// KiB here) into new pages while reads still hold the old ones; the
// small writes move the tail of the bucket off the filler, and the
// rounds keep what that rewriting grows the file by below the quota.
func (nf *noisyFleet) fillBelowHighWater(t *testing.T) {
	t.Helper()
	c := nf.f.Client
	ctx := context.Background()
	size := func() int64 {
		st, err := c.Status(ctx, c.Endpoints()[0])
		if err != nil {
			t.Fatal(err)
		}
		return st.DbSize
	}
	const (
		chunk = 128 << 10
		round = 12 << 20
	)
	blob := strings.Repeat("j", chunk)
	target := int64(noisyQuota * 75 / 100)
	n := 0
	for r := 0; ; r++ {
		missing := min(target-size(), round)
		if missing < chunk {
			break
		}
		if r == 8 {
			t.Fatalf("etcd's database is %d bytes after %d rounds of filling, want %d", size(), r, target)
		}
		var rev int64
		for written := int64(0); written+chunk <= missing; written += chunk {
			resp, err := c.Put(ctx, fmt.Sprintf("/junk/%d", n), blob)
			if err != nil {
				t.Fatal(err)
			}
			n++
			rev = resp.Header.Revision
		}
		for i := range 8 {
			resp, err := c.Put(ctx, fmt.Sprintf("/junk/pad/%d/%d", r, i), "p")
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Defragment(ctx, c.Endpoints()[0]); err != nil {
			t.Fatal(err)
		}
	}
	// Should the filling still have raised NOSPACE, that is this
	// set-up's doing, not the flood's: it is disarmed now that the
	// database is its live data, and the flood starts with no alarm.
	al, err := c.AlarmList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range al.Alarms {
		if a.Alarm != etcdserverpb.AlarmType_NOSPACE {
			continue
		}
		t.Logf("filling etcd raised NOSPACE (database %.1f MiB now): disarmed before the flood", float64(size())/(1<<20))
		if _, err := c.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	if al, err := c.AlarmList(ctx); err != nil || len(al.Alarms) > 0 {
		t.Fatalf("etcd's alarms before the flood: %v (%v), want none", al, err)
	}
	mark := int64(noisyQuota * 8 / 10)
	if db := size(); db >= mark {
		t.Fatalf("etcd's database is %d bytes, at or above the high-water mark %d, before the flood", db, mark)
	} else {
		t.Logf("before the flood: etcd's database is %.1f MiB, the high-water mark %.1f MiB", float64(db)/(1<<20), float64(mark)/(1<<20))
	}
	// The member's storage monitor may have seen the database above the
	// mark while it was filled (before the defragmentation): a report
	// checks again now, so that the flood starts from what etcd holds,
	// not from a check up to an interval old.
	for _, id := range nf.f.Live() {
		rep, err := nf.f.Member(id).Orch.Storage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.AboveHighWater {
			t.Fatalf("member %s sees etcd's database above the high-water mark before the flood: %+v", id, rep)
		}
	}
}

// floodStats is what a flood saw.
type floodStats struct {
	mu       sync.Mutex
	statuses map[int]int
	errs     int
}

func (s *floodStats) add(code int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs++
		return
	}
	s.statuses[code]++
}

func (s *floodStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("statuses %v, transport errors %d", s.statuses, s.errs)
}

// floodChecked floods the fleet with do (flood) and checks the outcome:
// etcd raised no NOSPACE, some requests were answered with the status
// done (the flood did something), and the victim's job fired on time
// meanwhile (checkVictim). what names the flood in the log.
func (nf *noisyFleet) floodChecked(t *testing.T, what string, done int, do func(ctx context.Context, i int) (int, error)) {
	t.Helper()
	from := time.Now()
	stats, maxDB, noSpace, perSecond := nf.flood(t, do)
	to := time.Now()
	t.Logf("%s flood: %s; etcd's database at most %.1f MiB of %d MiB; %.0f KiB/s written into etcd", what, stats, float64(maxDB)/(1<<20), noisyQuota>>20, perSecond/1024)
	if noSpace {
		t.Fatal("etcd raised NOSPACE during the flood")
	}
	if stats.statuses[done] == 0 {
		t.Fatalf("the flood got nothing done (%s): the test did not flood", stats)
	}
	nf.checkVictim(t, from, to)
}

// flood calls do from noisyFlooders goroutines for noisyFlood, pausing
// 10ms after a 429; meanwhile it samples etcd's database size and alarms
// and sums the bytes of every key version written (a watch of every
// key). It returns the statuses, the largest database size, whether
// NOSPACE was raised, and the bytes written per second.
func (nf *noisyFleet) flood(t *testing.T, do func(ctx context.Context, i int) (int, error)) (stats *floodStats, maxDB int64, noSpace bool, perSecond float64) {
	t.Helper()
	stats = &floodStats{statuses: map[int]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), noisyFlood)
	defer cancel()
	client := nf.f.Client
	start, err := client.Get(context.Background(), "revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	var written atomic.Int64
	var wg sync.WaitGroup
	wctx, stopWatch := context.WithCancel(context.Background())
	wg.Go(func() {
		for wr := range client.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(start.Header.Revision+1)) {
			for _, ev := range wr.Events {
				written.Add(int64(len(ev.Kv.Key) + len(ev.Kv.Value)))
			}
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			if st, err := client.Status(ctx, client.Endpoints()[0]); err == nil {
				maxDB = max(maxDB, st.DbSize)
			}
			if al, err := client.AlarmList(ctx); err == nil {
				for _, a := range al.Alarms {
					noSpace = noSpace || a.Alarm == etcdserverpb.AlarmType_NOSPACE
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	began := time.Now()
	var flooders sync.WaitGroup
	for i := range noisyFlooders {
		flooders.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				code, err := do(ctx, i*1_000_000+n)
				if ctx.Err() != nil {
					return
				}
				stats.add(code, err)
				if code == http.StatusTooManyRequests || err != nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	flooders.Wait()
	took := time.Since(began)
	// The watch delivers what was written during the flood.
	end, err := client.Put(context.Background(), "/flood-end", "")
	if err == nil {
		waitFor(t, 10*time.Second, func() bool {
			r, err := client.Get(context.Background(), "revision-probe")
			return err == nil && r.Header.Revision >= end.Header.Revision
		})
	}
	time.Sleep(200 * time.Millisecond)
	stopWatch()
	wg.Wait()
	return stats, maxDB, noSpace, float64(written.Load()) / took.Seconds()
}

// checkVictim checks that the victim job fired every second of
// [from, to] within the fleet's misfire grace (2×TTL+2s: what counts as on
// time), and that etcd accepts writes again.
func (nf *noisyFleet) checkVictim(t *testing.T, from, to time.Time) {
	t.Helper()
	waitFor(t, 20*time.Second, func() bool {
		runs := runsOf(t, nf.f.AdminToken, nf.base, "victim/tick")
		return len(runs) > 0 && runs[0].ScheduledAt.After(to.Add(time.Second))
	})
	const grace = 6 * time.Second
	fired := map[int64]jfapi.Run{}
	for _, r := range runsOf(t, nf.f.AdminToken, nf.base, "victim/tick") {
		fired[r.ScheduledAt.Unix()] = r
	}
	missed, late := 0, 0
	for s := from.Truncate(time.Second).Add(time.Second); s.Before(to); s = s.Add(time.Second) {
		r, ok := fired[s.Unix()]
		switch {
		case !ok:
			missed++
			t.Errorf("the victim's fire of %s is missing", s.Format(time.RFC3339))
		case r.FiredAt.Sub(r.ScheduledAt) > grace:
			late++
			t.Errorf("the victim's fire of %s was %v late", s.Format(time.RFC3339), r.FiredAt.Sub(r.ScheduledAt))
		}
	}
	t.Logf("victim: %d fires of %v missed, %d late", missed, to.Sub(from).Round(time.Second), late)
}

// noisyJob is a job document of about 980 KB: a large payload, body and
// headers.
func noisyJob(id, hook string, n int) jfapi.Job {
	headers := map[string]jfapi.HeaderValue{}
	for i := range 56 {
		headers[fmt.Sprintf("X-Pad-%02d", i)] = jfapi.HeaderValue{Value: strings.Repeat("h", 8000)}
	}
	blob := func(c string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"n": n, "pad": strings.Repeat(c, 240<<10)})
		return b
	}
	return jfapi.Job{ID: id, Schedule: "@hourly", Executor: jfapi.Executor{Type: "http", URL: hook, Headers: headers, Body: blob("b")}, Payload: blob("p")}
}

// send makes one API request with credential tok.
func send(ctx context.Context, tok, method, u string, body []byte) (int, error) {
	var rd *bytes.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestNoisyOperatorCannotFillEtcd: an operator scoped to its team's
// prefix alternates pauses, resumes and same-size replacements of a
// job of about 980 KB, from four goroutines, on an etcd filled to just
// below its high-water mark. Pauses and resumes write a small key, the
// replacements are charged to the credential's write budget and refused
// above the mark, and the fleet compacts by history size: etcd never
// raises NOSPACE, and another team's every-second job fires on time.
func TestNoisyOperatorCannotFillEtcd(t *testing.T) {
	nf := newNoisyFleet(t)
	tok := nf.f.Token(jfapi.RoleOperator, "noisy/")
	big := noisyJob("noisy/big", nf.rcv.srv.URL, 0)
	if code := api(t, tok, "PUT", nf.base, "/v1/jobs/"+url.PathEscape(big.ID), big, nil); code != http.StatusCreated {
		t.Fatalf("create the noisy job: %d", code)
	}
	var stored jfapi.Job
	api(t, tok, "GET", nf.base, "/v1/jobs/"+url.PathEscape(big.ID), nil, &stored)
	doc, _ := json.Marshal(stored)
	t.Logf("the noisy job's document: %d bytes", len(doc))
	nf.fillBelowHighWater(t)

	docs := [2][]byte{}
	for i := range docs {
		docs[i], _ = json.Marshal(noisyJob(big.ID, nf.rcv.srv.URL, i)) // same size, different content
	}
	jobURL := nf.base + "/v1/jobs/" + url.PathEscape(big.ID)
	nf.floodChecked(t, "operator", http.StatusOK, func(ctx context.Context, n int) (int, error) {
		switch n % 3 {
		case 0:
			return send(ctx, tok, "POST", jobURL+"/pause", nil)
		case 1:
			return send(ctx, tok, "POST", jobURL+"/resume", nil)
		default:
			return send(ctx, tok, "PUT", jobURL, docs[n%2])
		}
	})
}

// TestNoisyWorkerCannotFillEtcd: a worker credential scoped to its team's
// prefix registers, from four goroutines, with the largest registration
// the protocol allows (64 executor names, 8 orchestrator URLs),
// toggling "active" so that each is a change, on an etcd filled to just
// below its high-water mark. Registrations are charged to the
// credential's write budget like any write, and the fleet compacts by
// history size: etcd never raises NOSPACE, and another team's
// every-second job fires on time.
func TestNoisyWorkerCannotFillEtcd(t *testing.T) {
	nf := newNoisyFleet(t)
	tok := nf.f.Token(jfapi.RoleWorker, "noisy/")
	nf.fillBelowHighWater(t)
	executors := make([]string, jfapi.MaxRegisterExecutors)
	for i := range executors {
		name := fmt.Sprintf("executor-%04d-", i)
		executors[i] = name + strings.Repeat("e", jfapi.MaxExecutorBytes-len(name))
	}
	orchestrators := make([]string, jfapi.MaxRegisterOrchestrators)
	for i := range orchestrators {
		u := fmt.Sprintf("http://orchestrator-%02d.example/", i)
		orchestrators[i] = u + strings.Repeat("o", jfapi.MaxOrchestratorURLBytes-len(u))
	}
	bodies := [2][]byte{}
	for active := range bodies {
		bodies[active], _ = json.Marshal(jfapi.RegisterRequest{Worker: "noisy-worker", Executors: executors, Concurrency: 8, Active: active, Orchestrators: orchestrators})
	}
	t.Logf("the registration: %d bytes", len(bodies[0]))
	nf.floodChecked(t, "worker", http.StatusOK, func(ctx context.Context, n int) (int, error) {
		return send(ctx, tok, "POST", nf.base+jfapi.PathRegister, bodies[n%2])
	})
}

// TestSixteenClientsCreateWithout429: sixteen clients of one credential
// create 5 000 jobs, one request each, as fast as they are answered:
// below the request-rate ceiling and the write budgets, none is refused
// with 429.
func TestSixteenClientsCreateWithout429(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 16, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.WaitSettled(15 * time.Second)
	base := f.URLs()[0]
	tok := f.Token(jfapi.RoleOperator, "")
	const jobs, clients = 5000, 16
	var next atomic.Int64
	stats := &floodStats{statuses: map[int]int{}}
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > jobs {
					return
				}
				doc, _ := json.Marshal(jfapi.Job{ID: fmt.Sprintf("load/%05d", i), Schedule: "@daily", Executor: jfapi.Executor{Type: "http", URL: "http://127.0.0.1:9/hook"}})
				stats.add(send(context.Background(), tok, "POST", base+"/v1/jobs", doc))
			}
		})
	}
	wg.Wait()
	if stats.statuses[http.StatusCreated] != jobs || stats.statuses[http.StatusTooManyRequests] != 0 {
		t.Fatalf("%d jobs created by %d clients: %s; want every one 201, none 429", jobs, clients, stats)
	}
}
