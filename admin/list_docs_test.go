package admin

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// TestJobListBodyMatchesDecoding checks that the listing's pass-through of
// stored documents gives, for writers and for viewers, the same JSON value
// as decoding each document and encoding the api.JobList, over random jobs
// with headers (literal and secret), payloads holding keys named like
// server-set or redacted fields and characters that JSON escapes; and that
// stored documents altered to hide headers or server-set fields behind
// case, escapes or folding never pass through.
func TestJobListBodyMatchesDecoding(t *testing.T) {
	text := rapid.SampledFrom([]string{"", "a", "state", "Headers", "revision", "<&>", `q"uote`, `back\slash`, "é", "ſtate", "\u2028", "日本", "x y"})
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 6).Draw(t, "jobs")
		docs := make([]store.StoredDoc, n)
		for i := range docs {
			j := api.Job{
				ID:        "job-" + text.Draw(t, "id"),
				Schedule:  rapid.SampledFrom([]string{"", "*/5 * * * *", "@every 1m"}).Draw(t, "schedule"),
				Executor:  api.Executor{Type: "http", URL: "https://example.com/" + text.Draw(t, "path"), Method: "POST"},
				Paused:    rapid.Bool().Draw(t, "paused"),
				Partition: rapid.IntRange(0, 255).Draw(t, "partition"),
				CreatedAt: time.UnixMilli(rapid.Int64Range(0, 1<<42).Draw(t, "created")).UTC(),
			}
			if rapid.Bool().Draw(t, "runAt") {
				at := time.UnixMilli(rapid.Int64Range(0, 1<<42).Draw(t, "at")).UTC()
				j.RunAt = &at
			}
			for range rapid.IntRange(0, 3).Draw(t, "headers") {
				v := api.Literal(text.Draw(t, "value"))
				if rapid.Bool().Draw(t, "secret") {
					v = api.SecretEnv("TOKEN_" + strings.ToUpper(rapid.StringMatching(`[a-z]{1,4}`).Draw(t, "env")))
				}
				if j.Executor.Headers == nil {
					j.Executor.Headers = map[string]api.HeaderValue{}
				}
				j.Executor.Headers["X-"+rapid.StringMatching(`[A-Za-z]{1,6}`).Draw(t, "header")] = v
			}
			if rapid.Bool().Draw(t, "payload") {
				p := map[string]string{}
				for range rapid.IntRange(0, 3).Draw(t, "keys") {
					p[text.Draw(t, "key")] = text.Draw(t, "pvalue")
				}
				j.Payload, _ = json.Marshal(p)
			}
			j.Timeout = api.Duration(time.Duration(rapid.IntRange(0, 3600).Draw(t, "timeout")) * time.Second)
			val, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			doc := string(val)
			if j.Executor.Headers != nil {
				hidden := []string{`"Headers"`, `"\u0068eaders"`, `"HEADERſ"`, "\"header\u017f\""}
				for _, h := range hidden {
					if alt := strings.Replace(doc, `"headers"`, h, 1); passThrough([]byte(alt), true) {
						t.Fatalf("a viewer would get the headers of %s unredacted", alt)
					}
				}
			}
			for _, tail := range []string{`,"Revision":7}`, `,"state":{}}`, `,"STATE":{}}`, `,"revi\u0073ion":7}`} {
				if alt := doc[:len(doc)-1] + tail; passThrough([]byte(alt), false) {
					t.Fatalf("%s passes through with its server-set field", alt)
				}
			}
			docs[i] = store.StoredDoc{Value: []byte(doc), Revision: rapid.Int64Range(1, 1<<40).Draw(t, "revision")}
		}
		next := text.Draw(t, "next")
		for _, redact := range []bool{false, true} {
			want := api.JobList{Jobs: []api.Job{}, NextCursor: next}
			for _, d := range docs {
				j, err := store.DecodeStoredJob(d.Value, d.Revision)
				if err != nil {
					t.Fatal(err)
				}
				if redact {
					j = j.Redacted()
				}
				want.Jobs = append(want.Jobs, j)
			}
			wantBody, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := jobListBody(docs, next, redact)
			if err != nil {
				t.Fatalf("redact %v: %v", redact, err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("redact %v: the reply is not JSON: %v\n%s", redact, err, got)
			}
			if err := json.Unmarshal(wantBody, &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("redact %v: pass-through gives\n%s\ndecoding gives\n%s", redact, got, wantBody)
			}
		}
	})
}

// TestJobListBodyCorruptDocument checks that a stored document that is not
// a JSON object fails the listing as decoding does, instead of making the
// reply invalid JSON.
func TestJobListBodyCorruptDocument(t *testing.T) {
	for _, doc := range []string{`{"id":"a"`, `{"id":"a"}}`, `{"id":"a",}`, "{\"id\":\"\xff\"}", `[]`, ``} {
		good := store.StoredDoc{Value: []byte(`{"id":"ok","executor":{"type":"http"},"paused":false,"partition":1}`), Revision: 3}
		_, err := jobListBody([]store.StoredDoc{good, {Value: []byte(doc), Revision: 4}}, "", false)
		_, decodeErr := store.DecodeStoredJob([]byte(doc), 4)
		if (err == nil) != (decodeErr == nil) {
			t.Errorf("document %q: listing error %v, decoding error %v", doc, err, decodeErr)
		}
	}
}
