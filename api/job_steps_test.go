package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// stepJob returns a valid job of four steps: extract, a sharded
// transform, load, and an "always" cleanup.
func stepJob() Job {
	sh := Executor{Type: ExecutorShell, Command: []string{"true"}}
	return Job{
		ID: "nightly-etl", Schedule: "0 2 * * *",
		Steps: []Step{
			{ID: "extract", Executor: Executor{Type: ExecutorHTTP, URL: "http://127.0.0.1:9000/extract"}},
			{ID: "transform", Needs: []string{"extract"}, Executor: sh, Shards: &Shards{Params: []json.RawMessage{[]byte(`"eu"`), []byte(`"us"`)}}},
			{ID: "load", Needs: []string{"transform"}, Executor: Executor{Type: "load-warehouse"}, Retry: RetryPolicy{MaxAttempts: 5}},
			{ID: "cleanup", Needs: []string{"load"}, When: StepAlways, Executor: sh},
		},
	}
}

func TestValidateSteps(t *testing.T) {
	many := func(n int) []Step {
		s := make([]Step, n)
		for i := range s {
			s[i] = Step{ID: fmt.Sprintf("s%d", i), Executor: Executor{Type: "h"}}
		}
		return s
	}
	tests := []struct {
		name      string
		edit      func(j *Job)
		field     string
		msgSubstr string
	}{
		{"valid", func(*Job) {}, "", ""},
		{"256 steps", func(j *Job) { j.Steps = many(256) }, "", ""},
		{"257 steps", func(j *Job) { j.Steps = many(257) }, "steps", "257 steps"},
		{"executor beside steps", func(j *Job) { j.Executor = Executor{Type: "h"} }, "executor", "not together"},
		{"shards beside steps", func(j *Job) { j.Shards = &Shards{Count: 2} }, "shards", "not together"},
		{"duplicate ID", func(j *Job) { j.Steps[2].ID = "extract" }, "steps[2].id", "steps[0] too"},
		{"empty ID", func(j *Job) { j.Steps[1].ID = "" }, "steps[1].id", "required"},
		{"bad ID", func(j *Job) { j.Steps[1].ID = "a b" }, "steps[1].id", "letters"},
		{"long ID", func(j *Job) { j.Steps[1].ID = strings.Repeat("a", 65) }, "steps[1].id", "65 bytes"},
		{"unknown need", func(j *Job) { j.Steps[2].Needs = []string{"nope"} }, "steps[2].needs[0]", `"nope"`},
		{"need twice", func(j *Job) { j.Steps[2].Needs = []string{"extract", "extract"} }, "steps[2].needs[1]", "twice"},
		{"self cycle", func(j *Job) { j.Steps[0].Needs = []string{"extract"} }, "steps", "extract → extract"},
		{"cycle", func(j *Job) { j.Steps[0].Needs = []string{"load"} }, "steps", "extract → load → transform → extract"},
		{"bad when", func(j *Job) { j.Steps[3].When = "sometimes" }, "steps[3].when", "unknown condition"},
		{"failure without needs", func(j *Job) { j.Steps[0].When = StepOnFailure }, "steps[0].when", "needs"},
		{"bad step executor", func(j *Job) { j.Steps[0].Executor.URL = "ftp://x" }, "steps[0].executor.url", ""},
		{"bad step retry", func(j *Job) { j.Steps[2].Retry.MaxAttempts = 101 }, "steps[2].retry.max_attempts", ""},
		{"bad step timeout", func(j *Job) { j.Steps[2].Timeout = Duration(time.Millisecond) }, "steps[2].timeout", ""},
		{"broadcast step", func(j *Job) { j.Steps[2].Placement = &PlacementPolicy{Broadcast: true} }, "steps[2].placement.broadcast", ""},
		{"bad step shards", func(j *Job) { j.Steps[1].Shards.MinSucceeded = 3 }, "steps[1].shards.min_succeeded", ""},
		{"too many items", func(j *Job) { j.Steps[1].Shards = &Shards{Count: MaxShards} }, "steps", "items in all"},
		{"too many attempts", func(j *Job) {
			j.Steps[1].Shards = &Shards{Count: 5000}
			j.Steps[1].Retry.MaxAttempts = 4
		}, "steps", "attempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := stepJob()
			tt.edit(&j)
			err := j.Validate(DefaultLimits())
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Msg, tt.msgSubstr) || !errors.Is(err, ErrInvalidJob) {
				t.Fatalf("Validate: %v, want a field error on %s containing %q", err, tt.field, tt.msgSubstr)
			}
		})
	}
}

func TestStepsDecodeAndNormalize(t *testing.T) {
	doc := `{"id":"p","steps":[{"id":"a","executor":{"type":"http","url":"http://127.0.0.1/x","method":"put"}},{"id":"b","needs":["a"],"executor":{"type":"h"}}]}`
	j, err := DecodeJob(strings.NewReader(doc), 0)
	if err != nil {
		t.Fatal(err)
	}
	j.Normalize()
	if err := j.Validate(DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	if got := j.Steps[0].Executor.Method; got != "PUT" {
		t.Errorf("method %q, want PUT", got)
	}
	if got := j.Steps[1].When; got != StepOnSuccess {
		t.Errorf("when %q, want success", got)
	}
	b, _ := json.Marshal(j)
	if strings.Contains(string(b), `"executor":{"type":""}`) {
		t.Errorf("a job of steps writes an empty executor: %s", b)
	}
	if _, err := DecodeJob(strings.NewReader(`{"id":"p","steps":[{"id":"a","executor":{"type":"h"},"needz":[]}]}`), 0); err == nil || !strings.Contains(err.Error(), "needz") {
		t.Errorf("unknown step field: %v, want an error naming it", err)
	}
}

func TestRunStepsStored(t *testing.T) {
	fired := time.Date(2026, 6, 1, 2, 0, 0, 0, time.UTC)
	r := Run{ID: "r", JobID: "j", Status: RunRunning, FiredAt: fired, Attempts: []Attempt{}, Round: 1,
		Steps: []RunStep{{ID: "a", First: 0, Items: 1, Status: RunSucceeded}, {ID: "b", Needs: []string{"a"}, First: 1, Items: 2, Sharded: true, Status: RunPending}},
		Items: []Item{
			{Index: 0, Status: RunSucceeded, Attempts: []Attempt{{Attempt: 1, Worker: "w", StartedAt: fired, FinishedAt: fired.Add(time.Second)}}, Result: json.RawMessage(`{"rows":3}`)},
			{Index: 1, Status: RunPending, Attempts: []Attempt{}},
			{Index: 2, Status: RunSucceeded, Attempts: []Attempt{{Attempt: 1, Worker: "w", StartedAt: fired}}, Result: json.RawMessage(`0`)},
		}}
	b, err := r.MarshalStored()
	if err != nil {
		t.Fatal(err)
	}
	var got Run
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Items[0].Result) != `{"rows":3}` || string(got.Items[2].Result) != `0` || got.Items[1].Result != nil {
		t.Errorf("results %s %s %s, want {\"rows\":3}, 0, none", got.Items[0].Result, got.Items[2].Result, got.Items[1].Result)
	}
	if got.Items[0].Step != "a" || got.Items[2].Step != "b" || got.Round != 1 {
		t.Errorf("steps %q %q round %d, want a, b, 1", got.Items[0].Step, got.Items[2].Step, got.Round)
	}
	if s := string(got.StepResult(1)); s != `[null,0]` {
		t.Errorf("StepResult(b) = %s, want [null,0]", s)
	}
	if s := string(got.StepResult(0)); s != `{"rows":3}` {
		t.Errorf("StepResult(a) = %s", s)
	}
}
