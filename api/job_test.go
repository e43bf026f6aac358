package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/jobfleet/jobfleet/schedule"
)

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		name string
		d    Duration
		want string
	}{
		{name: "zero", d: 0, want: `"0s"`},
		{name: "second", d: Duration(time.Second), want: `"1s"`},
		{name: "minutes", d: Duration(5 * time.Minute), want: `"5m"`},
		{name: "minutes and seconds", d: Duration(90 * time.Second), want: `"1m30s"`},
		{name: "hour", d: Duration(time.Hour), want: `"1h"`},
		{name: "hour and minutes", d: Duration(90 * time.Minute), want: `"1h30m"`},
		{name: "hour and seconds", d: Duration(time.Hour + time.Second), want: `"1h0m1s"`},
		{name: "day", d: Duration(24 * time.Hour), want: `"24h"`},
		{name: "milliseconds", d: Duration(1500 * time.Millisecond), want: `"1.5s"`},
		{name: "sub-millisecond", d: Duration(250 * time.Microsecond), want: `"250µs"`},
		{name: "negative", d: Duration(-time.Minute), want: `"-1m"`},
		{name: "none", d: NoTimeout, want: `"none"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.d)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(b) != tt.want {
				t.Errorf("Marshal(%d): got %s, want %s", int64(tt.d), b, tt.want)
			}
			var back Duration
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("Unmarshal(%s): %v", b, err)
			}
			if back != tt.d {
				t.Errorf("round trip: got %v, want %v", back, tt.d)
			}
		})
	}
}

func TestDurationUnmarshal(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		start   Duration
		want    Duration
		wantErr bool
	}{
		{name: "seconds", in: `"30s"`, want: Duration(30 * time.Second)},
		{name: "go long form", in: `"1h0m0s"`, want: Duration(time.Hour)},
		{name: "compound", in: `"1h30m"`, want: Duration(90 * time.Minute)},
		{name: "null keeps value", in: `null`, start: Duration(time.Second), want: Duration(time.Second)},
		{name: "number", in: `30`, wantErr: true},
		{name: "unitless string", in: `"30"`, wantErr: true},
		{name: "garbage", in: `"soon"`, wantErr: true},
		{name: "bool", in: `true`, wantErr: true},
		{name: "object", in: `{}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.start
			err := json.Unmarshal([]byte(tt.in), &d)
			if tt.wantErr {
				var typeErr *json.UnmarshalTypeError
				if !errors.As(err, &typeErr) {
					t.Errorf("Unmarshal(%s): got error %v, want a *json.UnmarshalTypeError", tt.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.in, err)
			}
			if d != tt.want {
				t.Errorf("Unmarshal(%s): got %v, want %v", tt.in, d, tt.want)
			}
		})
	}
}

// designDoc is the README's job document, with one choice per policy.
const designDoc = `{
  "id": "nightly-report",
  "schedule": "0 2 * * *",
  "timezone": "Europe/Berlin",
  "executor": {"type": "http", "url": "http://127.0.0.1:9000/hook", "method": "POST"},
  "payload": {"any": "json"},
  "retry": {"max_attempts": 3, "initial_backoff": "1s", "max_backoff": "1m"},
  "timeout": "5m",
  "concurrency_policy": "forbid",
  "misfire_policy": "run_once",
  "paused": false
}`

func TestDecodeJobDesignDocument(t *testing.T) {
	j, err := DecodeJob(strings.NewReader(designDoc), 0)
	if err != nil {
		t.Fatalf("DecodeJob: %v", err)
	}
	want := Job{
		ID: "nightly-report", Schedule: "0 2 * * *", Timezone: "Europe/Berlin",
		Executor:          Executor{Type: ExecutorHTTP, URL: "http://127.0.0.1:9000/hook", Method: "POST"},
		Payload:           json.RawMessage(`{"any": "json"}`),
		Retry:             RetryPolicy{MaxAttempts: 3, InitialBackoff: Duration(time.Second), MaxBackoff: Duration(time.Minute)},
		Timeout:           Duration(5 * time.Minute),
		ConcurrencyPolicy: ConcurrencyForbid,
		MisfirePolicy:     MisfireRunOnce,
	}
	if got, w := cloneJob(t, j), cloneJob(t, want); got != w {
		t.Errorf("DecodeJob:\n got %s\nwant %s", got, w)
	}
	if err := j.Validate(DefaultLimits()); err != nil {
		t.Errorf("Validate: %v", err)
	}

	// Encoding the normalized job and decoding it again is lossless.
	j.Normalize()
	j.Partition, j.Revision = 17, 42
	j.CreatedAt = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	j.UpdatedAt = j.CreatedAt.Add(time.Hour)
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	back, err := DecodeJob(bytes.NewReader(b), 0)
	if err != nil {
		t.Fatalf("DecodeJob(Marshal(job)): %v\n%s", err, b)
	}
	if got, w := cloneJob(t, back), string(b); got != w {
		t.Errorf("round trip:\n got %s\nwant %s", got, w)
	}
}

func TestJobJSONFieldNames(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	j := Job{
		ID: "a", RunAt: &at, Executor: Executor{Type: ExecutorShell, Command: []string{"true"}},
		Partition: 3, CreatedAt: at, UpdatedAt: at, Revision: 9,
	}
	j.Normalize()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"a","timezone":"UTC","run_at":"2026-12-01T00:00:00Z",` +
		`"executor":{"type":"shell","command":["true"]},` +
		`"retry":{"max_attempts":1,"initial_backoff":"1s","max_backoff":"1m"},"timeout":"1h",` +
		`"concurrency_policy":"allow","misfire_policy":"run_once","paused":false,` +
		`"partition":3,"created_at":"2026-12-01T00:00:00Z","updated_at":"2026-12-01T00:00:00Z","revision":9}`
	if string(b) != want {
		t.Errorf("Marshal:\n got %s\nwant %s", b, want)
	}
}

func TestDecodeJobErrors(t *testing.T) {
	tests := []struct {
		name      string
		doc       string
		maxBytes  int64
		wantField string // "" means the error is not a *FieldError
		wantMsg   string
		wantErr   error
	}{
		{name: "empty", doc: "", wantMsg: "empty document"},
		{name: "blank", doc: " \n", wantMsg: "empty document"},
		{name: "null", doc: "null", wantMsg: "not a JSON object"},
		{name: "array", doc: "[]", wantMsg: "not a JSON object"},
		{name: "syntax", doc: `{"id": }`, wantField: "id", wantMsg: "not valid JSON: missing value"},
		{name: "truncated", doc: `{"id": "a"`, wantMsg: "the document ends before this value does"},
		{name: "truncated inside", doc: `{"id": "a", "executor": {"type": `, wantField: "executor.type", wantMsg: "the document ends before this value does"},
		{name: "trailing object", doc: `{"id":"a"} {"id":"b"}`, wantMsg: "unexpected data after the document at byte 11"},
		{name: "trailing garbage", doc: `{"id":"a"} x`, wantMsg: "unexpected data after the document at byte 11"},
		{name: "unknown field", doc: `{"id":"a","colour":"red"}`, wantField: "colour", wantMsg: "unknown field"},
		{name: "wrong case field", doc: `{"ID":"a"}`, wantField: "ID", wantMsg: `unknown field; did you mean "id"?`},
		{name: "duplicate field", doc: `{"id":"a","id":"b"}`, wantMsg: `duplicate key "id"`},
		{name: "duplicate field escaped", doc: `{"id":"a","\u0069d":"b"}`, wantMsg: `duplicate key "id"`},
		{name: "unknown executor field", doc: `{"id":"a","executor":{"type":"http","uri":"x"}}`, wantField: "executor.uri", wantMsg: "unknown field"},
		{name: "wrong case executor field", doc: `{"id":"a","executor":{"Type":"http"}}`, wantField: "executor.Type"},
		{name: "unknown retry field", doc: `{"id":"a","retry":{"attempts":3}}`, wantField: "retry.attempts"},
		{name: "unknown placement field", doc: `{"id":"a","placement":{"selecter":"pool=gpu"}}`, wantField: "placement.selecter", wantMsg: "unknown field"},
		{name: "placement retry_elsewhere not a boolean", doc: `{"id":"a","placement":{"retry_elsewhere":"yes"}}`, wantField: "placement.retry_elsewhere", wantMsg: "boolean"},
		{name: "duplicate retry field", doc: `{"id":"a","retry":{"max_attempts":3,"max_attempts":4}}`, wantField: "retry", wantMsg: `duplicate key "max_attempts"`},
		{name: "numeric duration", doc: `{"id":"a","timeout":300}`, wantField: "timeout", wantMsg: `invalid duration 300; want a string such as "30s"`},
		{name: "bad duration", doc: `{"id":"a","retry":{"initial_backoff":"1 second"}}`, wantField: "retry.initial_backoff", wantMsg: `invalid duration "1 second"`},
		{name: "id not a string", doc: `{"id":42}`, wantField: "id", wantMsg: "cannot use JSON number as a string"},
		{name: "paused not a bool", doc: `{"id":"a","paused":"yes"}`, wantField: "paused", wantMsg: "as a boolean"},
		{name: "command not strings", doc: `{"id":"a","executor":{"type":"shell","command":[1]}}`, wantField: "executor.command[0]", wantMsg: "cannot use JSON number as a string"},
		{name: "executor not an object", doc: `{"id":"a","executor":"http"}`, wantField: "executor", wantMsg: "as an object"},
		{name: "bad run_at", doc: `{"id":"a","run_at":"tomorrow"}`, wantField: "run_at", wantMsg: `invalid time "tomorrow"; want RFC 3339`},
		{name: "run_at without zone", doc: `{"id":"a","run_at":"2026-12-01T00:00:00"}`, wantField: "run_at"},
		{name: "run_at number", doc: `{"id":"a","run_at":1700000000}`, wantField: "run_at", wantMsg: "want an RFC 3339 time string"},
		{name: "created_at object", doc: `{"id":"a","created_at":{}}`, wantField: "created_at", wantMsg: "not a JSON object"},
		{name: "id with byte 0xff", doc: "{\"id\":\"job\xff\"}", wantField: "id", wantMsg: "byte 0xFF is not valid UTF-8"},
		{name: "id with unpaired surrogate", doc: `{"id":"job\udc00"}`, wantField: "id", wantMsg: `"\udc00" is an unpaired UTF-16 surrogate`},
		{name: "payload with byte 0xff", doc: "{\"id\":\"a\",\"payload\":{\"k\":[1,\"v\xff\"]}}", wantField: "payload.k[1]", wantMsg: "byte 0xFF"},
		{name: "schedule with latin-1", doc: "{\"id\":\"a\",\"schedule\":\"0 0 * * \xe9\"}", wantField: "schedule", wantMsg: "byte 0xE9"},
		{name: "header value with byte 0xff", doc: "{\"id\":\"a\",\"executor\":{\"type\":\"http\",\"headers\":{\"X-A\":\"\xff\"}}}", wantField: "executor.headers[X-A]", wantMsg: "byte 0xFF"},
		{name: "command word with byte 0xff", doc: "{\"id\":\"a\",\"executor\":{\"type\":\"shell\",\"command\":[\"echo\",\"\xff\"]}}", wantField: "executor.command[1]", wantMsg: "byte 0xFF"},
		{name: "key with byte 0xff", doc: "{\"id\":\"a\",\"pay\xffload\":1}", wantField: "pay\ufffdload (a key)", wantMsg: "byte 0xFF"},
		{name: "byte 0xff outside strings", doc: "{\"id\":\"a\"}\xff", wantMsg: "byte 0xFF is not valid UTF-8 at byte 10"},
		{name: "too large", doc: `{"id":"` + strings.Repeat("a", 100) + `"}`, maxBytes: 50, wantErr: ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeJob(strings.NewReader(tt.doc), tt.maxBytes)
			if err == nil {
				t.Fatalf("DecodeJob(%q): got nil error, want one", tt.doc)
			}
			if !errors.Is(err, ErrInvalidJob) {
				t.Errorf("errors.Is(%v, ErrInvalidJob): got false, want true", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("DecodeJob: got %v, want %v", err, tt.wantErr)
			}
			var fe *FieldError
			isField := errors.As(err, &fe)
			switch {
			case tt.wantField == "" && isField:
				t.Errorf("DecodeJob: got *FieldError %v, want a document error", err)
			case tt.wantField != "" && !isField:
				t.Errorf("DecodeJob: got %v (%T), want a *FieldError for %q", err, err, tt.wantField)
			case isField && fe.Field != tt.wantField:
				t.Errorf("Field: got %q, want %q (error %q)", fe.Field, tt.wantField, err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("DecodeJob: got %q, want it to contain %q", err, tt.wantMsg)
			}
		})
	}
}

func TestDecodeJobAccepts(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		maxBytes int64
		check    func(j Job) bool
	}{
		{name: "exactly at the size limit", doc: `{"id":"abc"}`, maxBytes: 12, check: func(j Job) bool { return j.ID == "abc" }},
		{name: "trailing white space", doc: "{\"id\":\"a\"} \n\t", check: func(j Job) bool { return j.ID == "a" }},
		{name: "free-form payload keys", doc: `{"id":"a","payload":{"ID":1,"id":2,"x":{"y":[{"z":null}]}}}`, check: func(j Job) bool { return len(j.Payload) > 0 }},
		{name: "free-form header names", doc: `{"id":"a","executor":{"type":"http","headers":{"X-A":"1","x-a":"2"}}}`, check: func(j Job) bool { return len(j.Executor.Headers) == 2 }},
		{name: "null fields", doc: `{"id":"a","run_at":null,"timeout":null,"retry":null,"payload":null}`, check: func(j Job) bool { return j.RunAt == nil && j.Timeout == 0 }},
		{name: "server-set fields", doc: `{"id":"a","partition":5,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-02T00:00:00Z","revision":7}`, check: func(j Job) bool { return j.Partition == 5 && j.Revision == 7 }},
		{name: "unicode id", doc: `{"id":"r\u00e9sum\u00e9 / 100%"}`, check: func(j Job) bool { return j.ID == "résumé / 100%" }},
		{name: "surrogate pair escape", doc: `{"id":"rocket \ud83d\ude80"}`, check: func(j Job) bool { return j.ID == "rocket 🚀" }},
		{name: "timeout none", doc: `{"id":"a","timeout":"none"}`, check: func(j Job) bool { return j.Timeout == NoTimeout }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := DecodeJob(strings.NewReader(tt.doc), tt.maxBytes)
			if err != nil {
				t.Fatalf("DecodeJob(%q): %v", tt.doc, err)
			}
			if !tt.check(j) {
				t.Errorf("DecodeJob(%q): got %+v, which fails the check", tt.doc, j)
			}
		})
	}
}

func TestDecodeJobReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := DecodeJob(iotest.ErrReader(boom), 0)
	if !errors.Is(err, boom) {
		t.Errorf("DecodeJob: got %v, want it to wrap %v", err, boom)
	}
	if errors.Is(err, ErrInvalidJob) {
		t.Errorf("DecodeJob: got %v matching ErrInvalidJob, want a read error only", err)
	}
	_, err = DecodeJob(io.MultiReader(strings.NewReader(`{"id":`), iotest.ErrReader(boom)), 0)
	if !errors.Is(err, boom) {
		t.Errorf("DecodeJob after partial read: got %v, want it to wrap %v", err, boom)
	}
}

func TestPoliciesMatchSchedule(t *testing.T) {
	tests := []struct {
		name string
		got  MisfirePolicy
		want schedule.MisfirePolicy
	}{
		{name: "run once", got: MisfireRunOnce, want: schedule.RunOnce},
		{name: "skip", got: MisfireSkip, want: schedule.Skip},
		{name: "run all", got: MisfireRunAll, want: schedule.RunAll},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != string(tt.want) {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
			// The schedule package accepts every job policy.
			s, _ := schedule.Every(time.Minute)
			last := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			if _, err := schedule.Due(s, last, last.Add(time.Hour), schedule.Policy{Misfire: schedule.MisfirePolicy(tt.got)}); err != nil {
				t.Errorf("schedule.Due with %q: %v", tt.got, err)
			}
		})
	}
}

func TestRunStatusFinal(t *testing.T) {
	tests := []struct {
		status RunStatus
		want   bool
	}{
		{RunPending, false}, {RunRunning, false}, {RunFailed, false},
		{RunSucceeded, true}, {RunDead, true}, {RunSkipped, true},
		{"bogus", false},
	}
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			if got := tt.status.Final(); got != tt.want {
				t.Errorf("Final(): got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRunJSON(t *testing.T) {
	at := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)
	r := Run{
		ID: "r1", JobID: "j", Partition: 7, ScheduledAt: at, FiredAt: at.Add(3 * time.Millisecond),
		Status: RunRunning, Owner: "orch-1", Epoch: 12,
		Attempts: []Attempt{
			{Attempt: 1, Worker: "w1", StartedAt: at.Add(time.Second), FinishedAt: at.Add(2 * time.Second), Error: "exit status 1", Output: "oops"},
			{Attempt: 2, Worker: "w2", StartedAt: at.Add(3 * time.Second)},
		},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"run_id":"r1","job_id":"j","partition":7,"scheduled_at":"2026-05-01T02:00:00Z","fired_at":"2026-05-01T02:00:00.003Z",` +
		`"status":"running","attempts":[` +
		`{"attempt":1,"worker":"w1","started_at":"2026-05-01T02:00:01Z","finished_at":"2026-05-01T02:00:02Z","error":"exit status 1","output":"oops"},` +
		`{"attempt":2,"worker":"w2","started_at":"2026-05-01T02:00:03Z"}],` +
		`"owner":"orch-1","epoch":12}`
	if string(b) != want {
		t.Errorf("Marshal:\n got %s\nwant %s", b, want)
	}
	var back Run
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if b2, _ := json.Marshal(back); string(b2) != want {
		t.Errorf("round trip:\n got %s\nwant %s", b2, want)
	}
}

func TestParseScheduleAndInitialLast(t *testing.T) {
	created := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		job       Job
		wantFirst time.Time // the first fire Due reports from InitialLast
	}{
		{
			name:      "recurring",
			job:       Job{ID: "a", Schedule: "@hourly", CreatedAt: created},
			wantFirst: created.Add(time.Hour),
		},
		{
			name:      "recurring in a zone",
			job:       Job{ID: "a", Schedule: "0 2 * * *", Timezone: "Europe/Berlin", CreatedAt: created},
			wantFirst: time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC),
		},
		{
			name:      "one-off in the future",
			job:       Job{ID: "a", RunAt: timePtr(created.Add(time.Minute)), CreatedAt: created},
			wantFirst: created.Add(time.Minute),
		},
		{
			name:      "one-off at creation",
			job:       Job{ID: "a", RunAt: timePtr(created), CreatedAt: created},
			wantFirst: created,
		},
		{
			name:      "one-off in the past",
			job:       Job{ID: "a", RunAt: timePtr(created.Add(-time.Hour)), CreatedAt: created},
			wantFirst: created.Add(-time.Hour),
		},
		{
			name:      "neither runs at creation",
			job:       Job{ID: "a", CreatedAt: created},
			wantFirst: created,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tt.job.ParseSchedule()
			if err != nil {
				t.Fatalf("ParseSchedule: %v", err)
			}
			d, err := schedule.Due(s, tt.job.InitialLast(), tt.wantFirst, schedule.Policy{Misfire: schedule.RunAll})
			if err != nil {
				t.Fatalf("Due: %v", err)
			}
			if len(d.Fires) != 1 || !d.Fires[0].Equal(tt.wantFirst) {
				t.Errorf("first fires: got %v, want [%v]", d.Fires, tt.wantFirst)
			}
		})
	}

	bad := Job{ID: "a", Schedule: "nope"}
	if _, err := bad.ParseSchedule(); !errors.Is(err, schedule.ErrInvalidCron) {
		t.Errorf("ParseSchedule(%q): got %v, want %v", bad.Schedule, err, schedule.ErrInvalidCron)
	}
}

// FuzzDecodeJob checks that DecodeJob and Validate never panic, that their
// errors match ErrInvalidJob, and that an accepted document's strings are
// valid UTF-8 (nothing was silently replaced).
func FuzzDecodeJob(f *testing.F) {
	for _, seed := range []string{
		designDoc, `{"id":"a\xff"}`, `{"id":"a","payload":[[["\ud800"]]]}`, `{"id":"x"}`, `{}`, `[`,
		`{"id":"a","executor":{"type":"http","headers":{"X":"\xff"}}}`, `{"id":"a","timeout":"none"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		j, err := DecodeJob(strings.NewReader(doc), 0)
		if err != nil {
			if !errors.Is(err, ErrInvalidJob) {
				t.Fatalf("DecodeJob(%q): error %v does not match ErrInvalidJob", doc, err)
			}
			return
		}
		if !utf8.ValidString(j.ID) || !utf8.ValidString(j.Schedule) || !utf8.Valid(j.Payload) {
			t.Fatalf("DecodeJob(%q): accepted text that is not UTF-8: %+v", doc, j)
		}
		if err := j.Validate(DefaultLimits()); err != nil && !errors.Is(err, ErrInvalidJob) {
			t.Fatalf("Validate: error %v does not match ErrInvalidJob", err)
		}
	})
}
