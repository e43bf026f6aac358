package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// Endpoints of the recorder, the "http" executors' target. The path says
// how the recorder answers.
const (
	// endpointFast answers 200 at once.
	endpointFast = "fast"
	// endpointSlow answers 200 after slowFor, so that attempts are in
	// flight when a worker is killed.
	endpointSlow = "slow"
	// endpointFlaky answers 500 to some first and second attempts
	// (chosen by a hash of the seed, run and attempt), 200 otherwise.
	endpointFlaky = "flaky"
	// endpointBrief answers 200 after briefFor: long enough that the
	// attempts of jobs sharing a limit key overlap when the key lets
	// them, short enough that a few every-second jobs fit in two slots.
	endpointBrief = "brief"
)

// briefFor is how long the recorder takes to answer endpointBrief.
const briefFor = 150 * time.Millisecond

// Execution is one request a worker's http executor made to the recorder:
// one execution of one attempt.
type Execution struct {
	Job         string `json:"job"`
	Run         string `json:"run"`
	ScheduledAt string `json:"scheduled_at"`
	Attempt     int    `json:"attempt"`
	// Item is the item index of an item's attempt (the
	// Jobfleet-Shard-Index header), nil for a run of one item; Items the
	// run's item count (Jobfleet-Shard-Count).
	Item  *int `json:"item,omitempty"`
	Items int  `json:"items,omitempty"`
	// Step and Round are a step's attempt's step ID and run round (the
	// Jobfleet-Step and Jobfleet-Round headers); Item is then the run's
	// item (Jobfleet-Item), not the step's shard.
	Step     string    `json:"step,omitempty"`
	Round    int       `json:"round,omitempty"`
	Endpoint string    `json:"endpoint"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	// Status is the status the recorder answered; 0 if the request was
	// aborted (the worker went away) before the answer.
	Status int `json:"status"`
	// Aborted: the connection closed before the recorder answered, so the
	// worker cannot have seen a result.
	Aborted bool `json:"aborted,omitempty"`
}

// Succeeded reports whether the worker was answered 2xx.
func (e Execution) Succeeded() bool { return !e.Aborted && e.Status >= 200 && e.Status < 300 }

// recorder is the HTTP endpoint every job's executor posts to. It records
// every execution with the Jobfleet-* headers.
type recorder struct {
	seed    int64
	slowFor time.Duration
	srv     *http.Server
	ln      net.Listener
	done    chan struct{}

	mu    sync.Mutex // guards the fields below
	execs []Execution
	open  map[int]Execution // in-flight executions by sequence number
	seq   int
}

// startRecorder serves the recorder on ln (which it closes at the end).
func startRecorder(seed int64, slowFor time.Duration, ln net.Listener) (*recorder, error) {
	r := &recorder{seed: seed, slowFor: slowFor, ln: ln, done: make(chan struct{}), open: map[int]Execution{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /exec/{endpoint}", r.serve)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln) // ends with Close
	}()
	return r, nil
}

// URL returns the URL of endpoint.
func (r *recorder) URL(endpoint string) string {
	return "http://" + r.ln.Addr().String() + "/exec/" + endpoint
}

func (r *recorder) close() {
	r.srv.Close()
	<-r.done
}

func (r *recorder) serve(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	attempt, _ := strconv.Atoi(req.Header.Get(worker.HeaderAttempt))
	e := Execution{
		Job:         unescapeJobID(req.Header.Get(worker.HeaderJobID)),
		Run:         req.Header.Get(worker.HeaderRunID),
		ScheduledAt: req.Header.Get(worker.HeaderScheduledAt),
		Attempt:     attempt,
		Endpoint:    req.PathValue("endpoint"),
		Start:       time.Now(),
	}
	if v := req.Header.Get(worker.HeaderShardIndex); v != "" {
		if i, err := strconv.Atoi(v); err == nil {
			e.Item = &i
		}
		e.Items, _ = strconv.Atoi(req.Header.Get(worker.HeaderShardCount))
	}
	if e.Step = req.Header.Get(worker.HeaderStep); e.Step != "" {
		if i, err := strconv.Atoi(req.Header.Get(worker.HeaderItem)); err == nil {
			e.Item = &i
		}
		e.Round, _ = strconv.Atoi(req.Header.Get(worker.HeaderRound))
	}
	r.mu.Lock()
	r.seq++
	seq := r.seq
	r.open[seq] = e
	r.mu.Unlock()

	status := http.StatusOK
	switch e.Endpoint {
	case endpointSlow, endpointBrief:
		d := r.slowFor
		if e.Endpoint == endpointBrief {
			d = briefFor
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-req.Context().Done():
			e.Aborted = true
		}
		t.Stop()
	case endpointFlaky:
		key := e.Run
		if e.Item != nil {
			key += "#" + strconv.Itoa(*e.Item) // each item's attempts on their own
		}
		if r.flakyFails(key, e.Attempt) {
			status = http.StatusInternalServerError
		}
	}
	if !e.Aborted {
		e.Status = status
	}
	e.End = time.Now()
	r.mu.Lock()
	delete(r.open, seq)
	r.execs = append(r.execs, e)
	r.mu.Unlock()
	if !e.Aborted {
		w.WriteHeader(status)
	}
}

// flakyFails decides, from the seed, whether the flaky endpoint fails an
// attempt: about a quarter of first and second attempts.
func (r *recorder) flakyFails(run string, attempt int) bool {
	if attempt > 2 {
		return false
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", r.seed, run, attempt)
	return h.Sum64()%4 == 0
}

// openSlow returns the slow executions in flight that started before
// `before`, oldest first.
func (r *recorder) openSlow(before time.Time) []Execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Execution
	for _, e := range r.open {
		if e.Endpoint == endpointSlow && e.Start.Before(before) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Execution) int { return a.Start.Compare(b.Start) })
	return out
}

// executions returns every finished execution, and those still open as
// aborted (the harness calls it after the workers have stopped).
func (r *recorder) executions() []Execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.execs)
	for _, e := range r.open {
		e.Aborted = true
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Execution) int { return a.Start.Compare(b.Start) })
	return out
}

// writeJSONL writes the executions to path, one JSON document a line.
func writeJSONL[T any](path string, items []T) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			f.Close()
			return err
		}
	}
	return errors.Join(f.Close())
}

// unescapeJobID decodes the Jobfleet-Job-Id header (percent-encoded like
// run IDs); a malformed one is kept as it came.
func unescapeJobID(h string) string {
	if id, err := api.UnescapeID(h); err == nil {
		return id
	}
	return h
}
