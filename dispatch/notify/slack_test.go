package notify_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/notify"
	"github.com/jobfleet/jobfleet/store"
)

// TestSlackBody: the message escapes Slack's reserved characters, quotes
// the last attempt's error, links the run only with a console URL, and
// makes a message of a misfire document (no run, no link).
func TestSlackBody(t *testing.T) {
	run := `{"run_id":"a%2Fb@2026-12-01T00:00:00Z","job_id":"a/b","status":"failed","attempts":[{"attempt":1,"error":"first"},{"attempt":2,"error":"x < y & z > 0"}]}`
	o := store.Outbox{RunID: "a%2Fb@2026-12-01T00:00:00Z", JobID: "a/b", Event: api.RunFailed, Attempt: 2, Run: json.RawMessage(run)}
	b, err := notify.SlackBody(o, "https://jf.example/ui/")
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Text   string
		Blocks []json.RawMessage
	}
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg.Text, "x &lt; y &amp; z &gt; 0") || strings.Contains(msg.Text, "first") || !strings.Contains(msg.Text, "(attempt 2)") {
		t.Errorf("text %q, want the last error escaped and the attempt", msg.Text)
	}
	if !strings.Contains(string(b), `"url":"https://jf.example/ui/#/run/a%252Fb@2026-12-01T00:00:00Z"`) {
		t.Errorf("no link to the run's page (its ID encoded as the console does) in %s", b)
	}
	if b, _ := notify.SlackBody(o, ""); strings.Contains(string(b), "button") {
		t.Errorf("a button without a console URL: %s", b)
	}
	mis := store.Outbox{JobID: "a/b", Event: api.NotifyMissed, Run: json.RawMessage(`{"job_id":"a/b","event":"missed","missed":5,"fired":1,"skipped":4}`)}
	b, err = notify.SlackBody(mis, "https://jf.example/ui/")
	if err != nil || !strings.Contains(string(b), "5 (1 fired, 4 skipped)") || strings.Contains(string(b), "button") {
		t.Errorf("misfire message %s, %v: want the counts and no link", b, err)
	}
	if _, err := notify.SlackBody(store.Outbox{Run: json.RawMessage(`[1]`)}, ""); err == nil {
		t.Error("a body that is not an object was taken")
	}
}
