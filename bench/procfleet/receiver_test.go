package procfleet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobfleet/jobfleet/dispatch/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The receiver records answered and aborted requests from the worker's
// headers, and Answered fires once a job has enough answers.
func TestReceiver(t *testing.T) {
	r := NewReceiver(20 * time.Millisecond)
	srv := httptest.NewServer(r)
	defer srv.Close()
	half := r.Answered("j", 2)
	send := func(ctx context.Context, run, step, item string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		if err != nil {
			return err
		}
		req.Header.Set(worker.HeaderJobID, "j")
		req.Header.Set(worker.HeaderRunID, run)
		req.Header.Set(worker.HeaderStep, step)
		req.Header.Set(worker.HeaderShardIndex, item)
		req.Header.Set(worker.HeaderScheduledAt, worker.FormatScheduledAt(time.Unix(100, 0)))
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := send(context.Background(), "r1", "s", "3"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	if err := send(ctx, "r2", "", "0"); err == nil {
		t.Fatal("a request cut after 5ms was answered")
	}
	cancel()
	select {
	case <-half:
		t.Fatal("Answered fired after one answer of two")
	default:
	}
	if err := send(context.Background(), "r2", "", "0"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-half:
	case <-time.After(5 * time.Second):
		t.Fatal("Answered did not fire after two answers")
	}
	// The aborted request is recorded when its handler sees the cut.
	deadline := time.Now().Add(5 * time.Second)
	for len(r.Executions("j")) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	aborted := 0
	for _, e := range r.Executions("") {
		if e.Aborted {
			aborted++
		}
		if !e.ScheduledAt.Equal(time.Unix(100, 0)) || e.End.Before(e.Start) {
			t.Errorf("execution %+v: want scheduled at 100 s and an end after its start", e)
		}
	}
	if got := len(r.Executions("j")); got != 3 || aborted != 1 {
		t.Errorf("%d executions, %d aborted; want 3 and 1", got, aborted)
	}
	if e, ok := r.Exec("r1", "s"); !ok || e.Item != 3 || e.End.Sub(e.Start) < 20*time.Millisecond {
		t.Errorf("Exec(r1, s) = %+v, %v; want item 3 answered after 20ms", e, ok)
	}
	if _, ok := r.Exec("r3", ""); ok {
		t.Error("Exec found a run never sent")
	}
}
