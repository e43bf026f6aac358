package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/metrictest"
)

// bigJob is a job document of about n bytes.
func bigJob(id string, n int) string {
	return fmt.Sprintf(`{"id":%q,"schedule":"@hourly","executor":{"type":"http","url":"http://127.0.0.1:9/"},"payload":{"blob":%q}}`, id, strings.Repeat("x", n))
}

// TestWriteBudgets floods the API with one scoped operator's writes:
// rewrites of a large job until its bytes budget is spent, then pauses
// and resumes until its revisions budget is. Each is then refused with
// 429, Retry-After and a message naming the budget, and changes nothing;
// another team's operator writes on; a second later the first may write
// again. What was charged is counted by role and scope, never by
// credential, and told to Member.NoteWritten.
func TestWriteBudgets(t *testing.T) {
	var wrote atomic.Int64
	e := newSecEnv(t, secOptions{wrote: func(n int64) { wrote.Add(n) },
		limits: admin.Limits{Rate: -1, WriteBytes: 100 << 10, WriteBytesBurst: 200 << 10, WriteRevisions: 10, WriteRevisionsBurst: 20}})
	noisy := e.cred(api.CreateRequest{Role: api.RoleOperator, Prefix: "noisy/"})
	quiet := e.cred(api.CreateRequest{Role: api.RoleOperator, Prefix: "quiet/"})
	put := request{method: "PUT", path: "/v1/jobs/noisy%2Fbig", body: bigJob("noisy/big", 60<<10)}

	accepted := 0
	var code int
	var hdr http.Header
	var body []byte
	for range 10 {
		if code, hdr, body = e.send(put, noisy.Secret); code != http.StatusOK && code != http.StatusCreated {
			break
		}
		accepted++
	}
	if accepted != 3 || code != http.StatusTooManyRequests {
		t.Fatalf("%d rewrites of a 60 KiB job accepted on a 200 KiB burst, then %d %s; want 3, then 429", accepted, code, body)
	}
	if wait, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || wait < 1 {
		t.Errorf("Retry-After %q, want whole seconds", hdr.Get("Retry-After"))
	}
	if msg := errorMessage(t, body); !strings.Contains(msg, "write budget") || !strings.Contains(msg, noisy.ID) {
		t.Errorf("429 message %q does not name the write budget and the credential", msg)
	}
	before, err := e.jobs.Get(context.Background(), "noisy/big")
	if err != nil {
		t.Fatal(err)
	}
	if code, _, _ := e.send(put, noisy.Secret); code != http.StatusTooManyRequests {
		t.Fatalf("rewrite over the budget: %d, want 429", code)
	}
	if after, _ := e.jobs.Get(context.Background(), "noisy/big"); after.Revision != before.Revision {
		t.Errorf("a refused rewrite changed the job: revision %d, was %d", after.Revision, before.Revision)
	}
	if code, _, body := e.send(request{method: "POST", path: "/v1/jobs", body: bigJob("quiet/j", 10<<10)}, quiet.Secret); code != http.StatusCreated {
		t.Fatalf("another team's create while the noisy one is refused: %d %s", code, body)
	}

	// Pauses and resumes write small keys: the bytes budget has room
	// for them once it refilled a little, the revisions budget runs out.
	e.clock.Advance(3 * time.Second) // both budgets full again
	pauses := 0
	for i := range 40 {
		op := "pause"
		if i%2 == 1 {
			op = "resume"
		}
		if code, _, body = e.send(request{method: "POST", path: "/v1/jobs/noisy%2Fbig/" + op}, noisy.Secret); code != http.StatusOK {
			break
		}
		pauses++
	}
	if pauses != 20 || code != http.StatusTooManyRequests || !strings.Contains(errorMessage(t, body), "key versions") {
		t.Fatalf("%d pauses and resumes on a burst of 20 revisions, then %d %s; want 20, then 429 naming key versions", pauses, code, body)
	}
	e.clock.Advance(time.Second)
	if code, _, body := e.send(request{method: "POST", path: "/v1/jobs/noisy%2Fbig/pause"}, noisy.Secret); code != http.StatusOK {
		t.Fatalf("a second later: %d %s", code, body)
	}

	labels := []string{"role", "operator", "scope", "prefix"}
	spent := metrictest.Value(t, e.reg, "jobfleet_api_write_bytes_total", labels...)
	if min := float64(3 * 60 << 10); spent < min || float64(wrote.Load()) != spent {
		t.Errorf(`jobfleet_api_write_bytes_total{role="operator",scope="prefix"} = %v, Member.NoteWritten told %d; want both the same, over %v`, spent, wrote.Load(), min)
	}
	if revs := metrictest.Value(t, e.reg, "jobfleet_api_write_revisions_total", labels...); revs < 20 {
		t.Errorf(`jobfleet_api_write_revisions_total{role="operator",scope="prefix"} = %v, want the 20 pauses at least`, revs)
	}
	for reason, want := range map[string]float64{"write_bytes": 2, "write_revisions": 1} {
		if got := metrictest.Value(t, e.reg, "jobfleet_api_throttled_total", "reason", reason); got != want {
			t.Errorf("jobfleet_api_throttled_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), noisy.ID) {
					t.Errorf("metric %s has a series of credential %s", mf.GetName(), noisy.ID)
				}
			}
		}
	}
}

// TestWorkerProtocolBudgets: a worker credential's registrations, with
// the largest body a registration may have, are charged to its budgets
// and refused beyond them like any other write, while another worker
// credential registers on; heartbeats write nothing to etcd and are
// never refused by a budget.
func TestWorkerProtocolBudgets(t *testing.T) {
	e := newSecEnv(t, secOptions{limits: admin.Limits{Rate: -1, WriteBytes: 100 << 10, WriteBytesBurst: 400 << 10}})
	rogue := e.cred(api.CreateRequest{Role: api.RoleWorker, Prefix: "noisy/"})
	other := e.cred(api.CreateRequest{Role: api.RoleWorker})
	executors := make([]string, 1000)
	for i := range executors {
		executors[i] = fmt.Sprintf("%q", fmt.Sprintf("executor-%04d-%s", i, strings.Repeat("e", 100)))
	}
	body := func(active int) string {
		return fmt.Sprintf(`{"worker":"w","executors":[%s],"concurrency":8,"active":%d}`, strings.Join(executors, ","), active)
	}
	register := func(tok string, active int) int {
		code, _, _ := e.send(request{method: "POST", path: api.PathRegister, body: body(active)}, tok)
		return code
	}
	accepted := 0
	for i := range 10 {
		if register(rogue.Secret, i%2) != http.StatusOK {
			break
		}
		accepted++
	}
	if size := len(body(0)); accepted != 400<<10/size {
		t.Fatalf("%d registrations of %d bytes accepted on a 400 KiB burst, want %d", accepted, size, 400<<10/size)
	}
	if code := register(rogue.Secret, 0); code != http.StatusTooManyRequests {
		t.Errorf("registration over the budget: %d, want 429", code)
	}
	if code := register(other.Secret, 0); code != http.StatusOK {
		t.Errorf("another worker credential's registration: %d, want 200", code)
	}
	hb := request{method: "POST", path: api.PathHeartbeat, body: `{"worker":"w","run_id":"noisy%2Fa@2026-05-01T00:00:00.000Z","attempt":1}`}
	for range 5 {
		if code, _, body := e.send(hb, rogue.Secret); code != http.StatusOK {
			t.Fatalf("heartbeat over the budget: %d %s, want 200", code, body)
		}
	}
	if got := metrictest.Value(t, e.reg, "jobfleet_api_write_bytes_total", "role", "worker", "scope", "prefix"); got < float64(accepted*len(body(0))) {
		t.Errorf("bytes charged to the scoped worker: %v, want its %d registrations' at least", got, accepted)
	}
}

// TestLargeRunWritesCharged: a completion whose write stored a large run
// document (a run of items rewrites its whole document) is charged what
// it stored, not the route's estimate, so that a worker credential
// finishing the items of a large run spends its bytes budget like any
// other writer.
func TestLargeRunWritesCharged(t *testing.T) {
	e := newSecEnv(t, secOptions{limits: admin.Limits{Rate: -1, WriteBytes: 100 << 10, WriteBytesBurst: 400 << 10}})
	e.proto.written = 100 << 10
	w := e.cred(api.CreateRequest{Role: api.RoleWorker})
	done := request{method: "POST", path: api.PathComplete, body: `{"worker":"w","run_id":"a@2026-05-01T00:00:00.000Z","attempt":1,"item":3,"success":true}`}
	accepted := 0
	for range 10 {
		if code, _, _ := e.send(done, w.Secret); code != http.StatusOK {
			break
		}
		accepted++
	}
	if accepted < 3 || accepted > 5 {
		t.Fatalf("%d completions that each stored 100 KiB accepted on a 400 KiB burst, want about 4", accepted)
	}
	if got := metrictest.Value(t, e.reg, "jobfleet_api_write_bytes_total", "role", "worker", "scope", "all"); got < float64(accepted*100<<10) {
		t.Errorf("bytes charged %v, want the %d run documents' %d at least", got, accepted, accepted*100<<10)
	}
}

func TestWriteBytesFor(t *testing.T) {
	const defaultRoom = (2 << 30) / 5 // etcd's default quota, 80%: 409.6 MiB of room
	for _, tt := range []struct {
		room      int64
		perSecond float64
		burst     int
	}{
		{defaultRoom, defaultRoom / 16, defaultRoom / 4},
		{(64 << 20) / 5, (64 << 20) / 5 / 16, (64 << 20) / 5 / 4}, // a 64 MiB quota: 0.8 MiB/s, bursts of 3.2 MiB
		{1 << 20, 256 << 10, 1 << 20},                             // the floors
		{64 << 30, 64 << 20, 256 << 20},                           // the ceilings
	} {
		if perSecond, burst := admin.WriteBytesFor(tt.room); perSecond != tt.perSecond || burst != tt.burst {
			t.Errorf("WriteBytesFor(%d) = %v/s, burst %d; want %v/s, burst %d", tt.room, perSecond, burst, tt.perSecond, tt.burst)
		}
	}
}

// TestWriteBudgetFollowsTheRoom: a bytes budget left at 0 is sized from
// the room above the high-water mark as the member knows it now, and
// follows it when it changes (the quota is learned at the first check).
func TestWriteBudgetFollowsTheRoom(t *testing.T) {
	var room atomic.Int64
	room.Store(4 << 20) // WriteBytesFor: 256 KiB/s, bursts of 1 MiB
	e := newSecEnv(t, secOptions{limits: admin.Limits{Rate: -1}, room: room.Load})
	op := e.cred(api.CreateRequest{Role: api.RoleOperator})
	put := request{method: "PUT", path: "/v1/jobs/j", body: bigJob("j", 240<<10)}
	for i := range 4 {
		if code, _, body := e.send(put, op.Secret); code >= 300 {
			t.Fatalf("write %d of 240 KiB on a 1 MiB burst: %d %s", i+1, code, body)
		}
	}
	if code, _, body := e.send(put, op.Secret); code != http.StatusTooManyRequests || !strings.Contains(errorMessage(t, body), "256 KiB a second (bursts of 1.0 MiB)") {
		t.Fatalf("fifth write: %d %s, want 429 naming the budget sized from the room", code, body)
	}
	room.Store(64 << 20) // 4 MiB/s, bursts of 16 MiB, from the next request on
	e.send(put, op.Secret)
	e.clock.Advance(time.Second)
	for i := range 10 {
		if code, _, body := e.send(put, op.Secret); code >= 300 {
			t.Fatalf("write %d a second after the room grew: %d %s", i+1, code, body)
		}
	}
}

// TestTriggerPayloadCharged: a trigger's payload is stored in its request
// and in each version of its run, so a trigger with a large payload is
// charged four times the payload, and one without is charged the route's
// small fixed cost: a scoped operator cannot trigger many runs of 64 KiB
// payloads at the price of small ones.
func TestTriggerPayloadCharged(t *testing.T) {
	e := newSecEnv(t, secOptions{limits: admin.Limits{Rate: -1}})
	op := e.cred(api.CreateRequest{Role: api.RoleOperator})
	charged := func() float64 {
		return metrictest.Value(t, e.reg, "jobfleet_api_write_bytes_total", "role", "operator", "scope", "all")
	}
	before := charged()
	e.send(request{method: "POST", path: "/v1/jobs/a/trigger"}, op.Secret)
	small := charged() - before
	pad := strings.Repeat("p", 60<<10)
	body := `{"payload":{"pad":"` + pad + `"}}`
	before = charged()
	e.send(request{method: "POST", path: "/v1/jobs/a/trigger", body: body}, op.Secret)
	large := charged() - before
	if small <= 0 || small > 4<<10 {
		t.Errorf("a trigger without a payload was charged %v bytes, want the route's few KiB", small)
	}
	if want := small + float64(4*len(body)); large != want {
		t.Errorf("a trigger with a %d-byte body was charged %v bytes, want %v (four copies and the fixed cost)", len(body), large, want)
	}
}
