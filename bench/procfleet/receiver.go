package procfleet

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// Execution is one request the Receiver saw: what the worker's headers
// say it is, when it arrived and when it was answered (or aborted).
type Execution struct {
	// Job, Run and Step are the request's job, run and step ("" in a
	// run not made of steps); Item its shard index (0 in a run without
	// items); ScheduledAt its run's scheduled time (zero if absent).
	Job, Run, Step string
	Item           int
	ScheduledAt    time.Time
	// Start is when the request arrived, End when it was answered or
	// aborted.
	Start, End time.Time
	// Aborted is set when the caller went away before the answer.
	Aborted bool
}

// Receiver is the endpoint the benchmark's jobs call: it answers each
// request 200 after its hold time and records it. Safe for concurrent
// use.
type Receiver struct {
	hold time.Duration

	mu       sync.Mutex // guards the fields below
	execs    []Execution
	last     map[execKey]int // the latest answered execution of a (run, step)
	answered map[string]int  // answered executions by job
	waiters  []waiter
}

type execKey struct{ run, step string }

// waiter is one Answered call's channel, closed once job has n answered
// executions.
type waiter struct {
	job string
	n   int
	ch  chan struct{}
}

// NewReceiver returns a Receiver answering after hold.
func NewReceiver(hold time.Duration) *Receiver {
	return &Receiver{hold: hold, last: map[execKey]int{}, answered: map[string]int{}}
}

// ServeHTTP answers after the hold time, or records the request aborted
// when its context ends first.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	e := Execution{Start: time.Now()}
	_, _ = io.Copy(io.Discard, req.Body)
	e.Job, _ = url.PathUnescape(req.Header.Get(worker.HeaderJobID))
	e.Run, _ = url.PathUnescape(req.Header.Get(worker.HeaderRunID))
	e.Step = req.Header.Get(worker.HeaderStep)
	e.Item, _ = strconv.Atoi(req.Header.Get(worker.HeaderShardIndex))
	e.ScheduledAt, _ = time.Parse(time.RFC3339Nano, req.Header.Get(worker.HeaderScheduledAt))
	t := time.NewTimer(r.hold)
	select {
	case <-t.C:
	case <-req.Context().Done():
		e.Aborted = true
	}
	t.Stop()
	e.End = time.Now()
	r.add(e)
	if !e.Aborted {
		w.WriteHeader(http.StatusOK)
	}
}

func (r *Receiver) add(e Execution) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execs = append(r.execs, e)
	if e.Aborted {
		return
	}
	r.last[execKey{e.Run, e.Step}] = len(r.execs) - 1
	r.answered[e.Job]++
	kept := r.waiters[:0]
	for _, wt := range r.waiters {
		if r.answered[wt.job] >= wt.n {
			close(wt.ch)
			continue
		}
		kept = append(kept, wt)
	}
	r.waiters = kept
}

// Executions returns a copy of the executions recorded of job ("": of
// every job), in the order they ended.
func (r *Receiver) Executions(job string) []Execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Execution
	for _, e := range r.execs {
		if job == "" || e.Job == job {
			out = append(out, e)
		}
	}
	return out
}

// Exec returns the latest answered execution of step of run (step ""
// for a run not made of steps), and whether there is one.
func (r *Receiver) Exec(run, step string) (Execution, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.last[execKey{run, step}]
	if !ok {
		return Execution{}, false
	}
	return r.execs[k], true
}

// Answered returns a channel closed once n executions of job were
// answered.
func (r *Receiver) Answered(job string, n int) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	if r.answered[job] >= n {
		close(ch)
		return ch
	}
	r.waiters = append(r.waiters, waiter{job: job, n: n, ch: ch})
	return ch
}
