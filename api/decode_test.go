package api

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestUnmarshalRefuses tries each class of input that encoding/json
// accepts silently, or refuses without naming where, on the documents
// the API reads.
func TestUnmarshalRefuses(t *testing.T) {
	type doc = func() any
	job := func() any { return new(Job) }
	tests := []struct {
		name     string
		into     doc
		data     string
		wantPath string
		wantMsg  string
	}{
		// Data after the first value.
		{"second batch after the first", func() any { return new(BatchRequest) }, `{"jobs":[]} {"jobs":[{"id":"x"}]}`, "", "unexpected data after the document at byte 12"},
		{"trailing garbage", func() any { return new(CreateRequest) }, `{"role":"viewer"}]`, "", "unexpected data after the document"},
		{"trailing data after a poll", func() any { return new(PollRequest) }, `{"worker":"w","max":1}{"worker":"w"}`, "", "unexpected data"},
		{"empty", func() any { return new(HeartbeatRequest) }, ``, "", "empty document"},
		{"null", func() any { return new(CompleteRequest) }, `null`, "", "the document is null, not a JSON object"},
		{"array", func() any { return new(PreviewRequest) }, `[]`, "", "the document is a JSON array, not a JSON object"},
		{"not JSON", func() any { return new(PreviewRequest) }, `hello`, "", "not valid JSON: invalid character 'h'"},
		{"gzip", func() any { return new(PreviewRequest) }, "\x1f\x8b\x08\x00", "", "starts as gzip data does; send it uncompressed"},

		// Duplicate keys at any depth.
		{"duplicate envelope key", func() any { return new(BatchRequest) }, `{"jobs":[],"mode":"create","mode":"apply"}`, "", `duplicate key "mode"`},
		{"duplicate token key", func() any { return new(CreateRequest) }, `{"role":"viewer","role":"admin"}`, "", `duplicate key "role"`},
		{"duplicate poll key", func() any { return new(PollRequest) }, `{"worker":"a","worker":"b"}`, "", `duplicate key "worker"`},
		{"duplicate preview key", func() any { return new(PreviewRequest) }, `{"timezone":"UTC","timezone":"Europe/Berlin"}`, "", `duplicate key "timezone"`},
		{"duplicate key inside a batch item", func() any { return new(BatchRequest) }, `{"jobs":[{"id":"a"},{"id":"b","id":"c"}]}`, "jobs[1]", `duplicate key "id"`},
		{"duplicate notify header", job, `{"notify":[{"url":"http://h/"},{"url":"http://h/","headers":{"X-A":"1","X-A":"2"}}]}`, "notify[1].headers", `duplicate key "X-A"`},
		{"duplicate executor header", job, `{"executor":{"type":"http","headers":{"X-A":"1","X-A":"2"}}}`, "executor.headers", `duplicate key "X-A"`},
		{"duplicate payload key", job, `{"payload":{"a":{"b":1,"b":2}}}`, "payload.a", `duplicate key "b"`},
		{"duplicate payload key in an array", job, `{"payload":[{"x":1},{"x":1,"x":1}]}`, "payload[1]", `duplicate key "x"`},
		{"duplicate key in a secret reference", job, `{"payload":{"token":{"secret_env":"A","secret_env":"B"}}}`, "payload.token", `duplicate key "secret_env"`},
		{"duplicate key in a header's secret reference", job, `{"executor":{"type":"http","headers":{"X":{"secret_env":"A","secret_env":"B"}}}}`, "executor.headers[X]", `duplicate key "secret_env"`},
		{"duplicate key spelled with an escape", job, `{"payload":{"a":1,"\u0061":2}}`, "payload", `duplicate key "a"`},
		{"duplicate body key", job, `{"executor":{"type":"http","body":{"k":1,"k":2}}}`, "executor.body", `duplicate key "k"`},

		// Unknown fields, named with their path.
		{"unknown notify field", job, `{"notify":[{"url":"http://h/"},{"url":"http://h/","header":{}}]}`, "notify[1].header", "unknown field"},
		{"wrong case notify field", job, `{"notify":[{"URL":"http://h/"}]}`, "notify[0].URL", `unknown field; did you mean "url"?`},
		{"unknown history field", job, `{"history":{"runs":3}}`, "history.runs", "unknown field"},
		{"unknown poll field", func() any { return new(PollRequest) }, `{"worker":"w","credential":"other"}`, "credential", "unknown field"},
		{"unknown register field", func() any { return new(RegisterRequest) }, `{"worker":"w","prefix":""}`, "prefix", "unknown field"},
		{"unknown token field", func() any { return new(CreateRequest) }, `{"role":"viewer","token":"chosen"}`, "token", "unknown field"},

		// Wrong kinds, named with their path.
		{"header value a number", job, `{"notify":[{"url":"http://h/","headers":{"X-A":1}}]}`, "notify[0].headers[X-A]", "want a string or a secret reference"},
		{"outcome a number", job, `{"notify":[{"on":[1]}]}`, "notify[0].on[0]", "cannot use JSON number as a string"},
		{"count a fraction", func() any { return new(PreviewRequest) }, `{"count":1.5}`, "count", "cannot use JSON number 1.5 as an integer"},
		{"attempt out of range", func() any { return new(HeartbeatRequest) }, `{"attempt":1e400}`, "attempt", "as an integer"},
		{"max a string", func() any { return new(PollRequest) }, `{"max":"1"}`, "max", "cannot use JSON string as an integer"},
		{"wait a number", func() any { return new(PollRequest) }, `{"wait":5}`, "wait", "invalid duration 5"},
		{"run_at not a time", func() any { return new(PreviewRequest) }, `{"run_at":"soon"}`, "run_at", `invalid time "soon"`},
		{"jobs not an array", func() any { return new(BatchRequest) }, `{"jobs":{}}`, "jobs", "cannot use JSON object as an array"},

		// Text.
		{"invalid UTF-8 in a header", job, "{\"notify\":[{\"headers\":{\"X\":\"\xff\"}}]}", "notify[0].headers[X]", "byte 0xFF is not valid UTF-8"},
		{"unpaired surrogate in a payload", job, `{"payload":{"k":["\ud800"]}}`, "payload.k[0]", `"\ud800" is an unpaired UTF-16 surrogate`},
		{"invalid UTF-8 in a key", func() any { return new(CreateRequest) }, "{\"ro\xffle\":\"viewer\"}", "ro\ufffdle (a key)", "byte 0xFF"},
		{"truncated", func() any { return new(CompleteRequest) }, `{"worker":"w","output":"`, "output", "the document ends before this value does"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Unmarshal([]byte(tt.data), tt.into())
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Unmarshal(%s): got %v (%T), want a *DecodeError", tt.data, err, err)
			}
			if !errors.Is(err, ErrInvalidDocument) {
				t.Errorf("errors.Is(%v, ErrInvalidDocument): got false, want true", err)
			}
			if de.Path != tt.wantPath {
				t.Errorf("Path: got %q, want %q (error %q)", de.Path, tt.wantPath, err)
			}
			if !strings.Contains(de.Msg, tt.wantMsg) {
				t.Errorf("Msg: got %q, want it to contain %q", de.Msg, tt.wantMsg)
			}
		})
	}
}

// TestUnmarshalAccepts checks that strictness refuses nothing
// encoding/json means: nulls, free-form payload keys in any case, surrogate
// pairs, `json:",string"` numbers, and white space around the document.
func TestUnmarshalAccepts(t *testing.T) {
	var j Job
	if err := Unmarshal([]byte(" {\"id\":\"a\",\"payload\":{\"ID\":1,\"id\":2,\"x\":[{\"y\":null}],\"r\":\"\\ud83d\\ude80\"},\"retry\":null,\"run_at\":null}\n"), &j); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if j.ID != "a" || string(j.Payload) != `{"ID":1,"id":2,"x":[{"y":null}],"r":"\ud83d\ude80"}` {
		t.Errorf("Unmarshal: got id %q payload %s", j.ID, j.Payload)
	}
	var m Member
	if err := Unmarshal([]byte(`{"id":"m","addr":"http://h:1","lease_id":"42","started_at":"2026-01-01T00:00:00Z"}`), &m); err != nil || m.LeaseID != 42 {
		t.Errorf("Unmarshal(member): got %+v, %v; want lease 42", m, err)
	}
	var req BatchRequest
	if err := Unmarshal([]byte(`{"jobs":[{"id":"a","id":"b"}]}`[:9]+`{"id":"a"}]}`), &req); err != nil || len(req.Jobs) != 1 {
		t.Errorf("Unmarshal(batch): got %+v, %v", req, err)
	}
}

// TestCheckJSON checks the text rules without a type: any value, but one.
func TestCheckJSON(t *testing.T) {
	for _, ok := range []string{`1`, `"s"`, `[{"a":1},{"a":1}]`, `{"A":1,"a":1}`, " {} \n"} {
		if err := CheckJSON([]byte(ok)); err != nil {
			t.Errorf("CheckJSON(%s): %v", ok, err)
		}
	}
	for bad, path := range map[string]string{`{"a":1,"a":1}`: "", `{"a":{"b":[{"c":1,"c":2}]}}`: "a.b[0]", `1 2`: "", `{"a":"\udc00"}`: "a"} {
		var de *DecodeError
		if err := CheckJSON([]byte(bad)); !errors.As(err, &de) || de.Path != path {
			t.Errorf("CheckJSON(%s): got %v, want a *DecodeError at %q", bad, err, path)
		}
	}
}

// TestDecodeJobGivenZeros checks that a zero given explicitly, where
// leaving the field out means a default, is refused rather than turned
// into the default ("timeout": "0s" used to mean one hour).
func TestDecodeJobGivenZeros(t *testing.T) {
	for field, doc := range map[string]string{
		"timeout":               `{"id":"a","timeout":"0s"}`,
		"retry.max_attempts":    `{"id":"a","retry":{"max_attempts":0}}`,
		"retry.initial_backoff": `{"id":"a","retry":{"initial_backoff":"0ms"}}`,
		"retry.max_backoff":     `{"id":"a","retry":{"max_backoff":"0s"}}`,
		"history.max_runs":      `{"id":"a","history":{"max_runs":0}}`,
		"history.max_age":       `{"id":"a","history":{"max_age":"0h"}}`,
	} {
		_, err := DecodeJob(strings.NewReader(doc), 0)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != field || !strings.Contains(fe.Msg, "leave the field out for the default") {
			t.Errorf("DecodeJob(%s): got %v, want a *FieldError for %s", doc, err, field)
		}
	}
	// Left out, or null: the default.
	for _, doc := range []string{`{"id":"a"}`, `{"id":"a","timeout":null,"retry":{"max_attempts":null},"history":{}}`} {
		if _, err := DecodeJob(strings.NewReader(doc), 0); err != nil {
			t.Errorf("DecodeJob(%s): %v", doc, err)
		}
	}
}

// BenchmarkDecodeJob decodes the design document's job, with a small
// payload and headers: the cost of strict decoding per job.
func BenchmarkDecodeJob(b *testing.B) {
	doc := []byte(`{"id":"team/nightly-report","schedule":"0 2 * * *","timezone":"Europe/Berlin",` +
		`"executor":{"type":"http","url":"http://127.0.0.1:9000/hook","method":"POST","headers":{"X-A":"1","Authorization":{"secret_env":"TOKEN"}}},` +
		`"payload":{"report":"daily","recipients":["a@example.com","b@example.com"],"options":{"format":"pdf","pages":12}},` +
		`"retry":{"max_attempts":3,"initial_backoff":"1s","max_backoff":"1m"},"timeout":"5m","concurrency_policy":"forbid"}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := DecodeJob(bytes.NewReader(doc), 0); err != nil {
			b.Fatal(err)
		}
	}
}
