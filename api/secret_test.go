package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestHeaderValueJSONRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want HeaderValue
	}{
		{name: "literal", in: `"Bearer abc"`, want: Literal("Bearer abc")},
		{name: "empty literal", in: `""`, want: Literal("")},
		{name: "literal that looks like a reference", in: `"{\"secret_env\":\"X\"}"`, want: Literal(`{"secret_env":"X"}`)},
		{name: "reference", in: `{"secret_env":"HOOK_TOKEN"}`, want: SecretEnv("HOOK_TOKEN")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v HeaderValue
			if err := json.Unmarshal([]byte(tt.in), &v); err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.in, err)
			}
			if v != tt.want {
				t.Fatalf("Unmarshal(%s) = %#v, want %#v", tt.in, v, tt.want)
			}
			out, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(out) != tt.in {
				t.Errorf("Marshal = %s, want %s (exact round trip)", out, tt.in)
			}
		})
	}
}

func TestDecodeJobHeaderValues(t *testing.T) {
	doc := func(headers string) string {
		return `{"id":"a","executor":{"type":"http","url":"http://x/","headers":` + headers + `}}`
	}
	j, err := DecodeJob(strings.NewReader(doc(`{"Authorization":{"secret_env":"HOOK_TOKEN"},"X-Team":"ops"}`)), 0)
	if err != nil {
		t.Fatalf("DecodeJob: %v", err)
	}
	want := map[string]HeaderValue{"Authorization": SecretEnv("HOOK_TOKEN"), "X-Team": Literal("ops")}
	if fmt.Sprint(j.Executor.Headers) != fmt.Sprint(want) {
		t.Errorf("headers %v, want %v", j.Executor.Headers, want)
	}
	out, _ := json.Marshal(j.Executor.Headers)
	if got := string(out); got != `{"Authorization":{"secret_env":"HOOK_TOKEN"},"X-Team":"ops"}` {
		t.Errorf("headers marshal to %s", got)
	}

	for _, bad := range []struct{ name, headers string }{
		{"number", `{"X-A":1}`},
		{"null", `{"X-A":null}`},
		{"array", `{"X-A":["a"]}`},
		{"object of another shape", `{"X-A":{"value":"x"}}`},
		{"reference with more keys", `{"X-A":{"secret_env":"X","more":1}}`},
		{"reference not a string", `{"X-A":{"secret_env":5}}`},
	} {
		t.Run(bad.name, func(t *testing.T) {
			_, err := DecodeJob(strings.NewReader(doc(bad.headers)), 0)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "executor.headers[X-A]" || !strings.Contains(fe.Msg, "secret reference") {
				t.Errorf("DecodeJob: %v, want a *FieldError naming X-A and describing the allowed forms", err)
			}
		})
	}
}

func TestResolveSecretRefs(t *testing.T) {
	env := map[string]string{"TOKEN": `s3cr"et<&>é`, "EMPTY": ""}
	lookup := func(name string) (string, error) {
		v, ok := env[name]
		if !ok {
			return "", fmt.Errorf("variable %s is not set", name)
		}
		return v, nil
	}
	tests := []struct {
		name, in, want string
	}{
		{name: "no reference", in: `{"a": [1, 2.50, "\u00e9"], "b": {"secret_env": "TOKEN", "x": 1}}`, want: `{"a": [1, 2.50, "\u00e9"], "b": {"secret_env": "TOKEN", "x": 1}}`},
		{name: "top level", in: `{"secret_env":"TOKEN"}`, want: `"s3cr\"et<&>é"`},
		{name: "nested, rest byte for byte", in: `{"z":1.0,"auth":{"secret_env":"TOKEN"},"list":[{"secret_env":"EMPTY"}, "\u0041"],"a":true}`,
			want: `{"z":1.0,"auth":"s3cr\"et<&>é","list":["", "\u0041"],"a":true}`},
		{name: "spaces inside the reference", in: `[ { "secret_env" : "TOKEN" } ]`, want: `[ "s3cr\"et<&>é" ]`},
		{name: "secret_env beside other keys is not a reference", in: `{"x":{"secret_env":"TOKEN","k":1}}`, want: `{"x":{"secret_env":"TOKEN","k":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveSecretRefs("payload", json.RawMessage(tt.in), lookup)
			if err != nil {
				t.Fatalf("ResolveSecretRefs: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("result %s is not valid JSON", got)
			}
		})
	}

	t.Run("missing variable names it and the path", func(t *testing.T) {
		_, err := ResolveSecretRefs("payload", json.RawMessage(`{"a":[{"secret_env":"NOPE"}]}`), lookup)
		if err == nil || err.Error() != "payload.a[0]: variable NOPE is not set" {
			t.Errorf("err = %v, want the path and the lookup's error", err)
		}
	})
	t.Run("reference to a non-string", func(t *testing.T) {
		_, err := ResolveSecretRefs("payload", json.RawMessage(`{"a":{"secret_env":{"k":1}}}`), lookup)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "payload.a" {
			t.Errorf("err = %v, want a *FieldError for payload.a", err)
		}
	})
	t.Run("input unchanged", func(t *testing.T) {
		in := json.RawMessage(`{"k":{"secret_env":"TOKEN"}}`)
		if _, err := ResolveSecretRefs("payload", in, lookup); err != nil {
			t.Fatal(err)
		}
		if string(in) != `{"k":{"secret_env":"TOKEN"}}` {
			t.Errorf("input modified: %s", in)
		}
	})
}

func TestSecretRefs(t *testing.T) {
	names, err := SecretRefs("payload", json.RawMessage(`{"a":{"secret_env":"A"},"b":[{"secret_env":"B_2"}],"c":{"secret_env":"A","d":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names) != "[A B_2]" {
		t.Errorf("names %v, want [A B_2]", names)
	}
}

func TestRedacted(t *testing.T) {
	j := Job{ID: "a", Executor: Executor{Type: ExecutorHTTP, URL: "http://x/", Headers: map[string]HeaderValue{
		"Authorization": Literal("Bearer hunter2"),
		"X-Api-Key":     SecretEnv("API_KEY"),
	}}}
	r := j.Redacted()
	if got := r.Executor.Headers["Authorization"]; got != Literal(RedactedValue) {
		t.Errorf("literal header = %#v, want redacted", got)
	}
	if got := r.Executor.Headers["X-Api-Key"]; got != SecretEnv("API_KEY") {
		t.Errorf("reference = %#v, want kept", got)
	}
	if got := j.Executor.Headers["Authorization"]; got != Literal("Bearer hunter2") {
		t.Errorf("original modified: %#v", got)
	}
	b, _ := json.Marshal(r)
	if strings.Contains(string(b), "hunter2") {
		t.Errorf("redacted document %s holds the secret", b)
	}
	if got := (Job{ID: "b"}).Redacted(); got.Executor.Headers != nil {
		t.Errorf("job without headers got headers %v", got.Executor.Headers)
	}
}
