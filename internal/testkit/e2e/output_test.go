package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jfapi "github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/shard"
)

// sseEvent is one event of an event stream.
type sseEvent struct{ name, data string }

// readEvents sends the events of the stream in body to ch until it ends,
// then closes ch.
func readEvents(body *bufio.Scanner, ch chan<- sseEvent) {
	defer close(ch)
	var ev sseEvent
	for body.Scan() {
		line := body.Text()
		switch {
		case line == "":
			if ev.name != "" {
				ch <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// TestLiveOutputFollowedWhileItRuns: a shell job prints a line every
// 200 ms on a real worker; a viewer follows its output through the member
// that does not own the run's partition (which forwards to the owner)
// and sees lines arrive while the attempt still runs, in order, then the
// stream's end once it has ended. Pushes from a credential that did not
// take the attempt are refused and held nowhere; the output the run keeps
// is the completion's, as ever.
func TestLiveOutputFollowedWhileItRuns(t *testing.T) {
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 4, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.Join("m2")
	f.WaitSettled(15 * time.Second)
	urls := f.URLs()
	runWorker(t, worker.Config{ID: "w-live", Orchestrators: worker.StaticOrchestrators(urls...), Token: f.WorkerToken, AllowShell: true})

	const id, lines = "team/live", 12
	job := jfapi.Job{ID: id, RunAt: ptrTime(time.Now().Add(24 * time.Hour)), Executor: jfapi.Executor{Type: jfapi.ExecutorShell,
		Command: []string{"sh", "-c", fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo line $i; if [ $i -eq 3 ]; then printf 'red \033[31mx\033[0m \377\n'; fi; i=$((i+1)); sleep 0.2; done`, lines)}}}
	if code := api(t, f.AdminToken, "POST", urls[0], "/v1/jobs", job, nil); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	var tr jfapi.Triggered
	if code := api(t, f.AdminToken, "POST", urls[0], "/v1/jobs/"+url.PathEscape(id)+"/trigger", nil, &tr); code != http.StatusAccepted {
		t.Fatalf("trigger: %d", code)
	}
	viewer := f.Token(jfapi.RoleViewer, "team/")
	runPath := "/v1/runs/" + url.PathEscape(tr.RunID)
	status := func() jfapi.RunStatus {
		var r jfapi.Run
		api(t, viewer, "GET", urls[0], runPath, nil, &r)
		return r.Status
	}
	waitFor(t, 15*time.Second, func() bool { return status() == jfapi.RunRunning })

	p := shard.Partition(id, f.Partitions())
	owners, _, err := f.Owners(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	other := f.Member("m1").URL
	if owners[p].Member == "m1" {
		other = f.Member("m2").URL
	}

	// Another worker credential cannot push into the attempt, nor a
	// viewer.
	intruder := f.Token(jfapi.RoleWorker, "")
	push := jfapi.OutputPush{Worker: "w-live", RunID: tr.RunID, Attempt: 1, Offset: 0, Data: "forged\n"}
	if code := api(t, intruder, "POST", other, jfapi.PathOutput, push, nil); code != http.StatusForbidden {
		t.Fatalf("push under another worker credential: %d, want 403", code)
	}
	if code := api(t, viewer, "POST", other, jfapi.PathOutput, push, nil); code != http.StatusForbidden {
		t.Fatalf("push as a viewer: %d, want 403", code)
	}

	req, _ := http.NewRequest("GET", other+runPath+"/output?follow=1", nil)
	req.Header.Set("Authorization", "Bearer "+viewer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("follow: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := make(chan sseEvent)
	go readEvents(bufio.NewScanner(resp.Body), events)
	var got strings.Builder
	seenWhileRunning, ended := false, false
	timeout := time.After(time.Minute)
	for !ended {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended without an end event; read %q", got.String())
			}
			switch ev.name {
			case jfapi.EventOutput:
				var oe jfapi.OutputEvent
				if err := json.Unmarshal([]byte(ev.data), &oe); err != nil {
					t.Fatalf("output event %q: %v", ev.data, err)
				}
				if oe.Skipped != 0 || oe.Offset != int64(got.Len()) {
					t.Fatalf("output event at offset %d skipping %d after %d bytes read", oe.Offset, oe.Skipped, got.Len())
				}
				got.WriteString(oe.Data)
				if !seenWhileRunning && strings.Contains(got.String(), "line 1\n") && !strings.Contains(got.String(), fmt.Sprintf("line %d\n", lines)) {
					seenWhileRunning = status() == jfapi.RunRunning
				}
			case jfapi.EventEnd:
				ended = true
			}
		case <-timeout:
			t.Fatalf("no end of the stream within a minute; read %q", got.String())
		}
	}
	if _, ok := <-events; ok {
		t.Fatal("events after the end event")
	}
	if !seenWhileRunning {
		t.Fatalf("no line seen while the attempt ran; read %q", got.String())
	}
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
		if i == 3 {
			// Live as stored: ESC escaped, the invalid byte U+FFFD.
			want.WriteString(`red \x1b[31mx\x1b[0m ` + "\uFFFD\n")
		}
	}
	if got.String() != want.String() {
		t.Fatalf("followed output %q, want %q", got.String(), want.String())
	}

	// The run keeps the completion's output; the live output is still
	// held, from either member.
	waitFor(t, 15*time.Second, func() bool { return status() == jfapi.RunSucceeded })
	var r jfapi.Run
	api(t, viewer, "GET", urls[0], runPath, nil, &r)
	if len(r.Attempts) != 1 || r.Attempts[0].Output != want.String() {
		t.Fatalf("stored attempts %+v, want one with the whole output", r.Attempts)
	}
	for _, base := range urls {
		var out jfapi.RunOutput
		if code := api(t, viewer, "GET", base, runPath+"/output", nil, &out); code != http.StatusOK || out.Output != want.String() || out.Running || out.Attempt != 1 {
			t.Fatalf("GET output from %s: %d %+v", base, code, out)
		}
	}
	// Outside the viewer's prefix: refused before the run is looked up.
	if code := api(t, f.Token(jfapi.RoleViewer, "other/"), "GET", other, runPath+"/output", nil, nil); code != http.StatusForbidden {
		t.Fatalf("GET output outside the prefix: %d, want 403", code)
	}
}
