package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// The noisy tenant is one team's two low-privilege credentials, each
// scoped to noisyPrefix, flooding the fleet with writes while the nemesis
// runs, from several goroutines, as fast as they are answered (a 429 or an
// error costs a flooder a short pause):
//
//   - an operator alternates pauses, resumes and same-size replacements
//     of its job of about a megabyte (noisyJob);
//   - a worker registers with the largest registration the protocol
//     allows (64 executor names, 8 orchestrator URLs), toggling
//     "active" so that each is a change.
//
// Each flooder sends to one live orchestrator, the next on an error. The
// flood is bounded by the fleet's write budgets (--api-write-bytes), its
// high-water mark and its compaction. The checker (checkNoisy) verifies
// that etcd never refused a write for lack of space and that the flood
// got writes done; the other checks verify that the other tenants' jobs
// kept firing. The tenant's job is left out of the fire checks (and out
// of the recorded history: historyWatch skips it).
const (
	noisyPrefix = "noisy/"
	noisyJobID  = noisyPrefix + "big"
	// noisyFlooders is how many goroutines flood per credential.
	noisyFlooders = 2
	// noisySchedule never fires in a run (February 29th).
	noisySchedule = "0 0 29 2 *"
)

// NoisyStats is what the noisy tenant did: the answers of each flood by
// HTTP status ("0": no answer).
type NoisyStats struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// JobBytes and RegistrationBytes are the sizes of the job document
	// the operator rewrites and of the worker's registration.
	JobBytes          int `json:"job_bytes"`
	RegistrationBytes int `json:"registration_bytes"`
	// Operator and Worker count the answers to the operator's and to the
	// worker's requests, by status.
	Operator map[string]int `json:"operator"`
	Worker   map[string]int `json:"worker"`
	// NoSpace counts the answers saying that etcd is out of space.
	NoSpace int `json:"no_space"`
}

// noisyTenant runs the floods.
type noisyTenant struct {
	f   *fleet
	rec *recorder
	lg  *zap.Logger

	mu sync.Mutex // guards stats
	st NoisyStats
}

func newNoisyTenant(f *fleet, rec *recorder, lg *zap.Logger) *noisyTenant {
	return &noisyTenant{f: f, rec: rec, lg: lg, st: NoisyStats{Operator: map[string]int{}, Worker: map[string]int{}}}
}

// noisyJob returns the noisy tenant's job of about 940 KB (a large
// payload, body and headers), version n: every version has the same size.
func noisyJob(hook string, n int) api.Job {
	headers := map[string]api.HeaderValue{}
	for i := range 56 {
		headers[fmt.Sprintf("X-Pad-%02d", i)] = api.HeaderValue{Value: strings.Repeat("h", 8000)}
	}
	blob := func(c string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"n": n % 10, "pad": strings.Repeat(c, 240<<10)})
		return b
	}
	return api.Job{ID: noisyJobID, Schedule: noisySchedule, Executor: api.Executor{Type: api.ExecutorHTTP, URL: hook, Headers: headers, Body: blob("b")}, Payload: blob("p")}
}

// noisyRegistration returns the largest registration, active or not.
func noisyRegistration(active int) []byte {
	executors := make([]string, api.MaxRegisterExecutors)
	for i := range executors {
		name := fmt.Sprintf("noisy-%04d-", i)
		executors[i] = name + strings.Repeat("e", api.MaxExecutorBytes-len(name))
	}
	orchestrators := make([]string, api.MaxRegisterOrchestrators)
	for i := range orchestrators {
		u := fmt.Sprintf("http://noisy-%02d.invalid/", i)
		orchestrators[i] = u + strings.Repeat("o", api.MaxOrchestratorURLBytes-len(u))
	}
	b, _ := json.Marshal(api.RegisterRequest{Worker: "noisy-worker", Executors: executors, Concurrency: 8, Active: active, Orchestrators: orchestrators})
	return b
}

// run floods until ctx ends, then returns what it did.
func (n *noisyTenant) run(ctx context.Context) NoisyStats {
	docs := make([][]byte, 2)
	for i := range docs {
		docs[i], _ = json.Marshal(noisyJob(n.rec.URL(endpointFast), i))
	}
	regs := [][]byte{noisyRegistration(0), noisyRegistration(1)}
	n.mu.Lock()
	n.st.Start, n.st.JobBytes, n.st.RegistrationBytes = time.Now(), len(docs[0]), len(regs[0])
	n.mu.Unlock()
	path := "/v1/jobs/" + url.PathEscape(noisyJobID)
	var wg sync.WaitGroup
	for g := range noisyFlooders {
		wg.Go(func() {
			for i := g; ctx.Err() == nil; i++ {
				switch i % 3 {
				case 0:
					n.send(ctx, n.f.noisyOperator, http.MethodPost, path+"/pause", nil, n.st.Operator)
				case 1:
					n.send(ctx, n.f.noisyOperator, http.MethodPost, path+"/resume", nil, n.st.Operator)
				default:
					n.send(ctx, n.f.noisyOperator, http.MethodPut, path, docs[i%2], n.st.Operator)
				}
			}
		})
		wg.Go(func() {
			for i := g; ctx.Err() == nil; i++ {
				n.send(ctx, n.f.noisyWorker, http.MethodPost, api.PathRegister, regs[i%2], n.st.Worker)
			}
		})
	}
	wg.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.st.End = time.Now()
	n.lg.Info("noisy tenant done", zap.Any("operator", n.st.Operator), zap.Any("worker", n.st.Worker), zap.Int("no_space", n.st.NoSpace))
	return n.st
}

// send makes one request with credential tok to the first live
// orchestrator and counts its answer in by; after a 429 or an error it
// pauses a little.
func (n *noisyTenant) send(ctx context.Context, tok, method, path string, body []byte, by map[string]int) {
	orchs := n.f.apiOrchs()
	if len(orchs) == 0 {
		sleepCtx(ctx, 100*time.Millisecond)
		return
	}
	status, msg := 0, ""
	req, err := http.NewRequestWithContext(ctx, method, orchs[0].url()+path, bytes.NewReader(body))
	if err == nil {
		req.Header.Set("Authorization", "Bearer "+tok)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		var resp *http.Response
		if resp, err = n.f.noisyHTTP.Do(req); err == nil {
			status = resp.StatusCode
			if status >= 300 {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				msg = string(b)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	if ctx.Err() != nil {
		return // cut by the end of the flood: not an answer
	}
	n.mu.Lock()
	by[strconv.Itoa(status)]++
	if strings.Contains(msg, store.ErrNoSpace.Error()) {
		n.st.NoSpace++
	}
	n.mu.Unlock()
	if status == http.StatusTooManyRequests || err != nil {
		sleepCtx(ctx, 10*time.Millisecond)
	}
}
