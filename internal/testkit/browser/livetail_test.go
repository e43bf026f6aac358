package browser_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// TestConsoleLiveTail: the run page of a running shell job shows its
// output as the command writes it, while the run is still running, and
// says when the attempt has ended.
func TestConsoleLiveTail(t *testing.T) {
	exe := browser(t)
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(30 * time.Second)
	urls := f.URLs()
	w, err := worker.New(worker.Config{ID: "tail-worker", Orchestrators: worker.StaticOrchestrators(urls...), Token: f.WorkerToken, AllowShell: true,
		PollWait: time.Second, ShutdownTimeout: 5 * time.Second, RetryInitial: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	defer func() { stop(); <-done }()

	const id, lines = "team/tail", 20
	later := time.Now().Add(24 * time.Hour)
	job := api.Job{ID: id, RunAt: &later, Executor: api.Executor{Type: api.ExecutorShell,
		Command: []string{"sh", "-c", fmt.Sprintf("i=1; while [ $i -le %d ]; do echo tail line $i; i=$((i+1)); sleep 0.2; done", lines)}}}
	if code := call(t, f.AdminToken, "POST", urls[0]+"/v1/jobs", job, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}

	p, closeBrowser := openBrowser(t, exe, urls[1], 900)
	defer closeBrowser()
	p.signIn(f.Token(api.RoleViewer, "team/"))

	var tr api.Triggered
	if code := call(t, f.AdminToken, "POST", urls[0]+"/v1/jobs/"+url.PathEscape(id)+"/trigger", nil, &tr); code != http.StatusAccepted {
		t.Fatalf("trigger: %d", code)
	}
	p.open("#/run/" + url.PathEscape(tr.RunID))
	p.waitJS("a line in the live tail while the run runs", fmt.Sprintf(`(() => {
		const live = document.getElementById('run-live'), st = document.getElementById('run-status');
		return !!live && !live.hidden && live.textContent.includes('tail line 2\n') && !live.textContent.includes('tail line %d\n') && !!st && st.textContent === 'running';
	})()`, lines), 20*time.Second)
	p.waitJS("the tail's end", fmt.Sprintf(`(() => {
		const live = document.getElementById('run-live'), note = document.getElementById('run-live-note');
		return live.textContent.includes('tail line %d\n') && note.textContent.includes('has ended');
	})()`, lines), 30*time.Second)
}
