package notify

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// maxSlackError bounds the error a Slack message quotes, in bytes (Slack
// refuses a section's text beyond 3000 characters).
const maxSlackError = 1500

// slackMessage is a Slack incoming webhook's body.
type slackMessage struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

type slackBlock struct {
	Type     string        `json:"type"`
	Text     *slackText    `json:"text,omitempty"`
	Fields   []slackText   `json:"fields,omitempty"`
	Elements []slackButton `json:"elements,omitempty"`
}

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type slackButton struct {
	Type string    `json:"type"`
	Text slackText `json:"text"`
	URL  string    `json:"url"`
}

// SlackBody returns the Slack incoming webhook message ({"text": …,
// "blocks": […]}) of notification o, whose Run holds the document it
// delivers (a run, a misfire or an overdue document): the job, the event,
// the run's status, its last error or reason, and, when consoleURL (the
// console's base URL, ".../ui/") is not empty and the notification is of
// a run, a button linking to the run's page. It fails only if o.Run is
// not a JSON object.
func SlackBody(o store.Outbox, consoleURL string) ([]byte, error) {
	var doc struct {
		RunID    string `json:"run_id"`
		Status   string `json:"status"`
		Reason   string `json:"reason"`
		Attempts []struct {
			Error string `json:"error"`
		} `json:"attempts"`
		Items []struct {
			Status   string `json:"status"`
			Attempts []struct {
				Error string `json:"error"`
			} `json:"attempts"`
		} `json:"items"`
		Missed  int `json:"missed"`
		Fired   int `json:"fired"`
		Skipped int `json:"skipped"`
	}
	if err := json.Unmarshal(o.Run, &doc); err != nil {
		return nil, fmt.Errorf("notification body: %w", err)
	}
	runID := o.RunID
	if runID == "" {
		runID = doc.RunID
	}
	errText := doc.Reason
	if n := len(doc.Attempts); n > 0 && doc.Attempts[n-1].Error != "" {
		errText = doc.Attempts[n-1].Error
	}
	for _, it := range doc.Items {
		if n := len(it.Attempts); errText == "" && n > 0 && it.Attempts[n-1].Error != "" {
			errText = it.Attempts[n-1].Error
		}
	}
	headline := fmt.Sprintf("%s jobfleet: job %s %s", slackIcon(o.Event), slackEscape(o.JobID), slackEventText(o.Event))
	if o.Attempt > 0 {
		headline += fmt.Sprintf(" (attempt %d)", o.Attempt)
	}
	text := headline
	if errText != "" {
		text += ": " + slackEscape(cut(errText, 200))
	}
	fields := []slackText{
		{Type: "mrkdwn", Text: "*Job*\n" + slackEscape(o.JobID)},
		{Type: "mrkdwn", Text: "*Event*\n" + slackEscape(string(o.Event))},
	}
	if doc.Status != "" {
		fields = append(fields, slackText{Type: "mrkdwn", Text: "*Status*\n" + slackEscape(doc.Status)})
	}
	if runID != "" {
		fields = append(fields, slackText{Type: "mrkdwn", Text: "*Run*\n" + slackEscape(runID)})
	}
	if doc.Missed > 0 {
		fields = append(fields, slackText{Type: "mrkdwn", Text: fmt.Sprintf("*Missed*\n%d (%d fired, %d skipped)", doc.Missed, doc.Fired, doc.Skipped)})
	}
	blocks := []slackBlock{
		{Type: "section", Text: &slackText{Type: "mrkdwn", Text: "*" + headline + "*"}},
		{Type: "section", Fields: fields},
	}
	if errText != "" {
		blocks = append(blocks, slackBlock{Type: "section", Text: &slackText{Type: "mrkdwn", Text: "*Error*\n```" + slackEscape(cut(errText, maxSlackError)) + "```"}})
	}
	if consoleURL != "" && runID != "" {
		link := consoleURL + "#/run/" + url.PathEscape(runID)
		blocks = append(blocks, slackBlock{Type: "actions", Elements: []slackButton{{Type: "button", Text: slackText{Type: "plain_text", Text: "Open the run"}, URL: link}}})
		text += " <" + link + "|open the run>"
	}
	return json.Marshal(slackMessage{Text: text, Blocks: blocks})
}

// slackIcon is the emoji code a message of event e starts with.
func slackIcon(e api.RunStatus) string {
	switch e {
	case api.RunSucceeded:
		return ":white_check_mark:"
	case api.RunFailed, api.RunDead, api.NotifyOverdue:
		return ":x:"
	}
	return ":warning:"
}

// slackEventText says event e of a job.
func slackEventText(e api.RunStatus) string {
	switch e {
	case api.RunSucceeded, api.RunFailed, api.RunCancelled, api.RunSkipped:
		return "run " + string(e)
	case api.RunDead:
		return "run dead (no retry left)"
	case api.NotifyPaused:
		return "paused after dead runs"
	case api.NotifyMissed:
		return "missed scheduled times"
	case api.NotifyOverdue:
		return "overdue: no run succeeded in time"
	}
	return string(e)
}

// slackEscape escapes the three characters Slack's mrkdwn reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// cut returns s cut to at most n bytes, on a rune boundary, with "…" if
// cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
