package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// validJob returns a complete, valid job with an http executor.
func validJob() Job {
	return Job{
		ID:       "nightly-report",
		Schedule: "0 2 * * *",
		Timezone: "Europe/Berlin",
		Executor: Executor{Type: ExecutorHTTP, URL: "http://127.0.0.1:9000/hook", Method: "POST"},
		Payload:  json.RawMessage(`{"any":"json"}`),
		Retry:    RetryPolicy{MaxAttempts: 3, InitialBackoff: Duration(time.Second), MaxBackoff: Duration(time.Minute)},
		Timeout:  Duration(5 * time.Minute),
	}
}

// checkFieldError checks the error of Validate: nil where field is "",
// else a *FieldError on field whose message contains msg.
func checkFieldError(t *testing.T, err error, field, msg string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("Validate: got %v, want nil", err)
		}
		return
	}
	fe, ok := err.(*FieldError)
	if !ok || fe.Field != field || !strings.Contains(fe.Msg, msg) {
		t.Fatalf("Validate: got %v (%T), want a *FieldError on %s containing %q", err, err, field, msg)
	}
}

func timePtr(t time.Time) *time.Time { return &t }

func TestValidate(t *testing.T) {
	runAt := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		edit      func(j *Job)
		limits    Limits
		wantField string // "" means valid
		wantMsg   string
	}{
		{name: "valid http", edit: func(j *Job) {}},
		{name: "valid minimal", edit: func(j *Job) { *j = Job{ID: "x", Executor: Executor{Type: "shell", Command: []string{"true"}}} }},
		{name: "placement selector", edit: func(j *Job) {
			j.Placement = &PlacementPolicy{Selector: "pool=gpu,region in (eu-west,eu-central),!spot,example.com/tier"}
		}},
		{name: "placement retry_elsewhere alone", edit: func(j *Job) { j.Placement = &PlacementPolicy{RetryElsewhere: new(bool)} }},
		{name: "placement selector not a selector", edit: func(j *Job) { j.Placement = &PlacementPolicy{Selector: "pool in gpu"} },
			wantField: "placement.selector", wantMsg: `"pool in gpu" is not a label selector`},
		{name: "placement selector bad value", edit: func(j *Job) { j.Placement = &PlacementPolicy{Selector: "pool=" + strings.Repeat("g", 64)} },
			wantField: "placement.selector", wantMsg: "63"},
		{name: "placement selector too long", edit: func(j *Job) { j.Placement = &PlacementPolicy{Selector: strings.Repeat("a", 1025)} },
			wantField: "placement.selector", wantMsg: "at most 1024"},
		{name: "id with spaces slashes percent and unicode", edit: func(j *Job) { j.ID = "team a/nightly 100% — Übersicht 🚀" }},
		{name: "id of max length", edit: func(j *Job) { j.ID = strings.Repeat("é", MaxIDBytes/2) }},
		{name: "id empty", edit: func(j *Job) { j.ID = "" }, wantField: "id", wantMsg: "required"},
		{name: "id too long", edit: func(j *Job) { j.ID = strings.Repeat("a", MaxIDBytes+1) }, wantField: "id", wantMsg: "201 bytes long; want at most 200"},
		{name: "id invalid utf-8", edit: func(j *Job) { j.ID = "a\xffb" }, wantField: "id", wantMsg: "not valid UTF-8"},
		{name: "id with newline", edit: func(j *Job) { j.ID = "a\nb" }, wantField: "id", wantMsg: "control character U+000A at byte 1"},
		{name: "id with nul", edit: func(j *Job) { j.ID = "a\x00" }, wantField: "id"},
		{name: "id with del", edit: func(j *Job) { j.ID = "a\x7f" }, wantField: "id"},
		{name: "id with c1 control", edit: func(j *Job) { j.ID = "a\u0085" }, wantField: "id"},
		{name: "id dot", edit: func(j *Job) { j.ID = "." }, wantField: "id", wantMsg: "reserved"},
		{name: "id dot dot", edit: func(j *Job) { j.ID = ".." }, wantField: "id"},
		{name: "id with dots inside", edit: func(j *Job) { j.ID = "a/../b" }},
		{name: "id nfc", edit: func(j *Job) { j.ID = "caf\u00e9" }},
		{name: "id nfd", edit: func(j *Job) { j.ID = "cafe\u0301" }, wantField: "id", wantMsg: `is not in Unicode normalization form C (NFC); send it as "café"`},
		{name: "id surrounded by spaces", edit: func(j *Job) { j.ID = "  spaced  " }, wantField: "id", wantMsg: "leading or trailing white space"},
		{name: "id trailing space", edit: func(j *Job) { j.ID = "spaced " }, wantField: "id", wantMsg: "leading or trailing white space"},
		{name: "id one space", edit: func(j *Job) { j.ID = " " }, wantField: "id", wantMsg: "leading or trailing white space"},
		{name: "id inner space", edit: func(j *Job) { j.ID = "team a" }},
		{name: "id no-break space", edit: func(j *Job) { j.ID = "team\u00a0a" }, wantField: "id", wantMsg: "white space U+00A0 at byte 4; only the plain space"},
		{name: "id ideographic space", edit: func(j *Job) { j.ID = "a\u3000b" }, wantField: "id", wantMsg: "white space U+3000"},
		{name: "id line separator", edit: func(j *Job) { j.ID = "a\u2028b" }, wantField: "id", wantMsg: "white space U+2028"},
		{name: "id zero-width space", edit: func(j *Job) { j.ID = "nightly\u200breport" }, wantField: "id", wantMsg: "invisible format character U+200B at byte 7"},
		{name: "id right-to-left override", edit: func(j *Job) { j.ID = "report\u202etxt.exe" }, wantField: "id", wantMsg: "U+202E"},
		{name: "id byte order mark", edit: func(j *Job) { j.ID = "\ufeffreport" }, wantField: "id", wantMsg: "U+FEFF"},
		{name: "id soft hyphen", edit: func(j *Job) { j.ID = "re\u00adport" }, wantField: "id", wantMsg: "U+00AD"},
		{name: "id noncharacter", edit: func(j *Job) { j.ID = "a\ufffe" }, wantField: "id", wantMsg: "U+FFFE at byte 1 is not an assigned Unicode character"},
		{name: "id private use", edit: func(j *Job) { j.ID = "a\ue000" }, wantField: "id", wantMsg: "private-use character U+E000 at byte 1"},
		{name: "id private use plane 15", edit: func(j *Job) { j.ID = "a\U000F0000" }, wantField: "id", wantMsg: "private-use character U+F0000"},
		{name: "id hangul filler", edit: func(j *Job) { j.ID = "billing\u3164" }, wantField: "id", wantMsg: "invisible character U+3164 at byte 7"},
		{name: "id hangul filler alone", edit: func(j *Job) { j.ID = "\u3164" }, wantField: "id", wantMsg: "invisible character U+3164"},
		{name: "id halfwidth hangul filler", edit: func(j *Job) { j.ID = "a\uffa0b" }, wantField: "id", wantMsg: "invisible character U+FFA0"},
		{name: "id hangul choseong filler", edit: func(j *Job) { j.ID = "a\u115f" }, wantField: "id", wantMsg: "invisible character U+115F"},
		{name: "id braille blank", edit: func(j *Job) { j.ID = "billing\u2800" }, wantField: "id", wantMsg: "invisible character U+2800 at byte 7"},
		{name: "id braille pattern", edit: func(j *Job) { j.ID = "\u2801\u2802" }},
		{name: "id variation selector", edit: func(j *Job) { j.ID = "deploy\u2764\ufe0f" }, wantField: "id", wantMsg: "variation selector U+FE0F at byte 9"},
		{name: "id text variation selector", edit: func(j *Job) { j.ID = "a\ufe0e" }, wantField: "id", wantMsg: "variation selector U+FE0E"},
		{name: "id ideographic variation selector", edit: func(j *Job) { j.ID = "\u845b\U000E0100" }, wantField: "id", wantMsg: "variation selector U+E0100"},
		{name: "id mongolian variation selector", edit: func(j *Job) { j.ID = "a\u180b" }, wantField: "id", wantMsg: "variation selector U+180B"},
		{name: "id combining grapheme joiner", edit: func(j *Job) { j.ID = "a\u034fb" }, wantField: "id", wantMsg: "invisible character U+034F"},
		{name: "id tag character", edit: func(j *Job) { j.ID = "a\U000E0041" }, wantField: "id", wantMsg: "invisible format character U+E0041"},
		{name: "id zero-width joiner", edit: func(j *Job) { j.ID = "a\u200db" }, wantField: "id", wantMsg: "invisible format character U+200D"},
		{name: "id left-to-right isolate", edit: func(j *Job) { j.ID = "a\u2066b" }, wantField: "id", wantMsg: "U+2066"},
		{name: "id lone combining mark", edit: func(j *Job) { j.ID = "\u0301" }, wantField: "id", wantMsg: "combining mark U+0301 at the start"},
		{name: "id leading combining mark", edit: func(j *Job) { j.ID = "\u0301billing" }, wantField: "id", wantMsg: "combining mark U+0301 at the start"},
		{name: "id combining mark after a slash", edit: func(j *Job) { j.ID = "billing/\u0308x" }, wantField: "id", wantMsg: "combining mark U+0308 at byte 8 follows U+002F"},
		{name: "id combining mark after a space", edit: func(j *Job) { j.ID = "a \u20dd" }, wantField: "id", wantMsg: "combining mark U+20DD"},
		{name: "id devanagari with marks", edit: func(j *Job) { j.ID = "\u0915\u094d\u0937\u093f" }},
		{name: "id fullwidth latin", edit: func(j *Job) { j.ID = "\uff42\uff49\uff4c\uff4c\uff49\uff4e\uff47" }, wantField: "id", wantMsg: `holds compatibility characters (fullwidth or mathematical letters, ligatures, superscripts, ...) that look like other characters; send it as "billing"`},
		{name: "id fullwidth digit", edit: func(j *Job) { j.ID = "job\uff11" }, wantField: "id", wantMsg: `send it as "job1"`},
		{name: "id mathematical bold", edit: func(j *Job) { j.ID = "\U0001d41b\U0001d422\U0001d425\U0001d425" }, wantField: "id", wantMsg: `send it as "bill"`},
		{name: "id mathematical bold inside", edit: func(j *Job) { j.ID = "billing/\U0001d41a" }, wantField: "id", wantMsg: `send it as "billing/a"`},
		{name: "id ligature", edit: func(j *Job) { j.ID = "\ufb01le" }, wantField: "id", wantMsg: `send it as "file"`},
		{name: "id superscript", edit: func(j *Job) { j.ID = "x\u00b2" }, wantField: "id", wantMsg: `send it as "x2"`},
		{name: "id circled letter", edit: func(j *Job) { j.ID = "\u24b6" }, wantField: "id", wantMsg: `send it as "A"`},
		{name: "id halfwidth katakana", edit: func(j *Job) { j.ID = "\uff76" }, wantField: "id", wantMsg: `send it as "カ"`},
		{name: "id emoji", edit: func(j *Job) { j.ID = "deploy-\U0001f680" }},
		{name: "id latin word with a cyrillic letter", edit: func(j *Job) { j.ID = "p\u0430ypal-sync" }, wantField: "id", wantMsg: `the word "pаypal" mixes the Latin and Cyrillic scripts`},
		{name: "id latin word with a greek letter", edit: func(j *Job) { j.ID = "billing/\u0391lpha" }, wantField: "id", wantMsg: "mixes the Greek and Latin scripts"},
		{name: "id cyrillic word", edit: func(j *Job) { j.ID = "\u0440\u0430\u0443" }},
		{name: "id words in two scripts", edit: func(j *Job) { j.ID = "\u043e\u0442\u0447\u0451\u0442-daily" }},
		{name: "id japanese", edit: func(j *Job) { j.ID = "東京タワーのレポート" }},
		{name: "id latin with han", edit: func(j *Job) { j.ID = "Tokyo東京" }},
		{name: "id latin with digits and marks", edit: func(j *Job) { j.ID = "re\u0301sume\u0301-2" }, wantField: "id", wantMsg: "NFC"},

		{name: "six field schedule", edit: func(j *Job) { j.Schedule = "*/10 * * * * *" }},
		{name: "every schedule", edit: func(j *Job) { j.Schedule = "@every 30s" }},
		{name: "descriptor", edit: func(j *Job) { j.Schedule = "@weekly" }},
		{name: "run_at", edit: func(j *Job) { j.Schedule = ""; j.RunAt = timePtr(runAt) }},
		{name: "neither schedule nor run_at", edit: func(j *Job) { j.Schedule = "" }},
		{name: "schedule and run_at", edit: func(j *Job) { j.RunAt = timePtr(runAt) }, wantField: "run_at", wantMsg: "must not be set together with schedule"},
		{name: "run_at zero", edit: func(j *Job) { j.Schedule = ""; j.RunAt = timePtr(time.Time{}) }, wantField: "run_at", wantMsg: "zero time"},
		{name: "run_at year 0", edit: func(j *Job) { j.Schedule = ""; j.RunAt = timePtr(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)) }, wantField: "run_at", wantMsg: "0000-01-01T00:00:00Z is before 1970-01-01T00:00:00Z"},
		{name: "run_at before the epoch", edit: func(j *Job) { j.Schedule = ""; j.RunAt = timePtr(time.Unix(-1, 0)) }, wantField: "run_at", wantMsg: "before 1970"},
		{name: "run_at at the epoch", edit: func(j *Job) { j.Schedule = ""; j.RunAt = timePtr(time.Unix(0, 0)) }},
		{name: "schedule too long", edit: func(j *Job) { j.Schedule = "0 0 * * " + strings.Repeat("1,", 600) + "2" }, wantField: "schedule", wantMsg: "1209 bytes long; want at most 1024"},
		{name: "timezone too long", edit: func(j *Job) { j.Timezone = strings.Repeat("Z", 1<<20) }, wantField: "timezone", wantMsg: "1048576 bytes long; want at most 64"},
		{name: "invalid cron", edit: func(j *Job) { j.Schedule = "x" }, wantField: "schedule", wantMsg: `invalid cron expression "x": got 1 fields; want 5`},
		{name: "cron never fires", edit: func(j *Job) { j.Schedule = "0 0 30 2 *" }, wantField: "schedule", wantMsg: "never fires"},
		{name: "every below a second", edit: func(j *Job) { j.Schedule = "@every 100ms" }, wantField: "schedule", wantMsg: "below the minimum"},
		{name: "every negative", edit: func(j *Job) { j.Schedule = "@every -1m" }, wantField: "schedule"},
		{name: "every zero", edit: func(j *Job) { j.Schedule = "@every 0s" }, wantField: "schedule"},
		{name: "every over 100 years", edit: func(j *Job) { j.Schedule = "@every 2562047h" }, wantField: "schedule", wantMsg: "more than 100 years"},
		{name: "every 100 years", edit: func(j *Job) { j.Schedule = "@every 876000h" }},
		{name: "reboot", edit: func(j *Job) { j.Schedule = "@reboot" }, wantField: "schedule"},
		{name: "cron tz prefix", edit: func(j *Job) { j.Schedule = "CRON_TZ=UTC 0 0 * * *" }, wantField: "schedule", wantMsg: "time zone prefix"},
		{name: "unknown time zone", edit: func(j *Job) { j.Timezone = "Europe/Atlantis" }, wantField: "timezone", wantMsg: `unknown time zone "Europe/Atlantis"`},
		{name: "unknown time zone with run_at", edit: func(j *Job) { j.Schedule = ""; j.RunAt = timePtr(runAt); j.Timezone = "Nope" }, wantField: "timezone"},
		{name: "local time zone", edit: func(j *Job) { j.Timezone = "Local" }, wantField: "timezone"},
		{name: "right time zone", edit: func(j *Job) { j.Timezone = "right/UTC" }, wantField: "timezone", wantMsg: `unknown time zone "right/UTC": not a zone name of the IANA database as written; did you mean "UTC"?`},
		{name: "right zone tree", edit: func(j *Job) { j.Timezone = "right/Europe/Berlin" }, wantField: "timezone", wantMsg: `did you mean "Europe/Berlin"?`},
		{name: "posix zone tree", edit: func(j *Job) { j.Timezone = "posix/Europe/Berlin" }, wantField: "timezone", wantMsg: `did you mean "Europe/Berlin"?`},
		{name: "posixrules", edit: func(j *Job) { j.Timezone = "posixrules" }, wantField: "timezone"},
		{name: "factory zone", edit: func(j *Job) { j.Timezone = "Factory" }, wantField: "timezone"},
		{name: "doubled slash zone", edit: func(j *Job) { j.Timezone = "Europe//Berlin" }, wantField: "timezone", wantMsg: `did you mean "Europe/Berlin"?`},
		{name: "trailing slash zone", edit: func(j *Job) { j.Timezone = "Europe/Berlin/" }, wantField: "timezone"},
		{name: "zone in lower case", edit: func(j *Job) { j.Timezone = "europe/berlin" }, wantField: "timezone", wantMsg: `did you mean "Europe/Berlin"?`},
		{name: "zone as a path", edit: func(j *Job) { j.Timezone = "/usr/share/zoneinfo/Europe/Berlin" }, wantField: "timezone"},
		{name: "zone as a relative path", edit: func(j *Job) { j.Timezone = "../../../../etc/localtime" }, wantField: "timezone"},
		{name: "backward zone name", edit: func(j *Job) { j.Timezone = "US/Eastern" }},
		{name: "etc zone", edit: func(j *Job) { j.Timezone = "Etc/GMT-14" }},

		{name: "executor type missing", edit: func(j *Job) { j.Executor = Executor{} }, wantField: "executor.type", wantMsg: "required"},
		{name: "http without url", edit: func(j *Job) { j.Executor.URL = "" }, wantField: "executor.url", wantMsg: "required"},
		{name: "http relative url", edit: func(j *Job) { j.Executor.URL = "/hook" }, wantField: "executor.url", wantMsg: "not an absolute http or https URL"},
		{name: "http scheme-less url", edit: func(j *Job) { j.Executor.URL = "example.com/hook" }, wantField: "executor.url"},
		{name: "http ftp url", edit: func(j *Job) { j.Executor.URL = "ftp://example.com/x" }, wantField: "executor.url"},
		{name: "http url without host", edit: func(j *Job) { j.Executor.URL = "http:///hook" }, wantField: "executor.url", wantMsg: "no host"},
		{name: "http malformed url", edit: func(j *Job) { j.Executor.URL = "http://[::1/x" }, wantField: "executor.url", wantMsg: "invalid URL"},
		{name: "http url with control character", edit: func(j *Job) { j.Executor.URL = "http://a/\n" }, wantField: "executor.url"},
		{name: "https url", edit: func(j *Job) { j.Executor.URL = "https://hooks.example.com:8443/a?b=c" }},
		{name: "http url port 0", edit: func(j *Job) { j.Executor.URL = "http://h:0/hook" }, wantField: "executor.url", wantMsg: `"http://h:0/hook": port 0 is out of range; want 1 to 65535`},
		{name: "http url port 99999", edit: func(j *Job) { j.Executor.URL = "http://h:99999/" }, wantField: "executor.url", wantMsg: "port 99999 is out of range"},
		{name: "http url port 65536", edit: func(j *Job) { j.Executor.URL = "http://h:65536/" }, wantField: "executor.url", wantMsg: "port 65536 is out of range"},
		{name: "http url port 65535", edit: func(j *Job) { j.Executor.URL = "http://h:65535/" }},
		{name: "http url port with leading zeros", edit: func(j *Job) { j.Executor.URL = "http://example.com:000080/" }, wantField: "executor.url", wantMsg: "port 000080 has leading zeros; write it as 80"},
		{name: "http url port 080", edit: func(j *Job) { j.Executor.URL = "http://h:080/" }, wantField: "executor.url", wantMsg: "port 080 has leading zeros"},
		{name: "http url port 00", edit: func(j *Job) { j.Executor.URL = "http://h:00/" }, wantField: "executor.url", wantMsg: "port 00 is out of range"},
		{name: "http url port of many digits", edit: func(j *Job) { j.Executor.URL = "http://h:99999999999999999999/" }, wantField: "executor.url", wantMsg: "out of range"},
		{name: "notify url port with leading zeros", edit: func(j *Job) { j.Notify = []Notification{{URL: "http://h:0443/", On: []RunStatus{RunDead}}} }, wantField: "notify[0].url", wantMsg: "leading zeros"},
		{name: "http url port 1", edit: func(j *Job) { j.Executor.URL = "http://h:1/" }},
		{name: "http url empty port", edit: func(j *Job) { j.Executor.URL = "http://h:/" }, wantField: "executor.url", wantMsg: "names no port"},
		{name: "http ipv6 url port 0", edit: func(j *Job) { j.Executor.URL = "http://[::1]:0/" }, wantField: "executor.url", wantMsg: "port 0"},
		{name: "http ipv6 url", edit: func(j *Job) { j.Executor.URL = "http://[::1]/" }},
		{name: "http headers differing in case", edit: func(j *Job) {
			j.Executor.Headers = map[string]HeaderValue{"X-A": Literal("1"), "x-a": Literal("2")}
		}, wantField: "executor.headers", wantMsg: `duplicate key "x-a": "X-A" names the same header (header names are case-insensitive)`},
		{name: "http lower case method", edit: func(j *Job) { j.Executor.Method = "put" }},
		{name: "http default method", edit: func(j *Job) { j.Executor.Method = "" }},
		{name: "http invalid method", edit: func(j *Job) { j.Executor.Method = "FETCH" }, wantField: "executor.method", wantMsg: `unsupported method "FETCH"`},
		{name: "http connect method", edit: func(j *Job) { j.Executor.Method = "CONNECT" }, wantField: "executor.method"},
		{name: "http headers", edit: func(j *Job) {
			j.Executor.Headers = map[string]HeaderValue{"Authorization": Literal("Bearer x"), "X-Trace": Literal("1")}
		}},
		{name: "http header bad name", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"Bad Name": Literal("x")} }, wantField: "executor.headers[Bad Name]", wantMsg: "invalid header name"},
		{name: "http header empty name", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"": Literal("x")} }, wantField: "executor.headers[]"},
		{name: "http header crlf value", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"X-A": Literal("a\r\nX-B: b")} }, wantField: "executor.headers[X-A]", wantMsg: "control character"},
		{name: "http header Host", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"Host": Literal("internal.example")} }, wantField: "executor.headers[Host]", wantMsg: "cannot be set"},
		{name: "http header transfer-encoding", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"transfer-encoding": Literal("chunked")} }, wantField: "executor.headers[transfer-encoding]", wantMsg: "cannot be set"},
		{name: "http header Content-Length", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"Content-Length": Literal("0")} }, wantField: "executor.headers[Content-Length]", wantMsg: "cannot be set"},
		{name: "http header Connection", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"Connection": Literal("close")} }, wantField: "executor.headers[Connection]", wantMsg: "cannot be set"},
		{name: "http header Upgrade", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"Upgrade": Literal("h2c")} }, wantField: "executor.headers[Upgrade]", wantMsg: "cannot be set"},
		{name: "http header reserved", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"jobfleet-run-id": Literal("x")} }, wantField: "executor.headers[jobfleet-run-id]", wantMsg: "reserved"},
		{name: "http header secret reference", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"Authorization": SecretEnv("HOOK_TOKEN")} }},
		{name: "http header secret bad name", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"Authorization": SecretEnv("1X")} }, wantField: "executor.headers[Authorization]", wantMsg: "not a valid environment variable name"},
		{name: "http header secret name with dash", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{"A": SecretEnv("A-B")} }, wantField: "executor.headers[A]"},
		{name: "http url with password", edit: func(j *Job) { j.Executor.URL = "http://user:hunter2@example.com/hook" }, wantField: "executor.url", wantMsg: "must not carry a user name or password"},
		{name: "http url with user", edit: func(j *Job) { j.Executor.URL = "https://user@example.com/hook" }, wantField: "executor.url", wantMsg: "user name or password"},
		{name: "http follow redirects", edit: func(j *Job) { j.Executor.FollowRedirects = true }},
		{name: "shell follow redirects", edit: func(j *Job) {
			j.Executor = Executor{Type: ExecutorShell, Command: []string{"ls"}, FollowRedirects: true}
		}, wantField: "executor.follow_redirects", wantMsg: `not used by executor type "shell"`},
		{name: "payload secret reference", edit: func(j *Job) { j.Payload = json.RawMessage(`{"token":{"secret_env":"API_TOKEN"}}`) }},
		{name: "payload secret reference not a string", edit: func(j *Job) { j.Payload = json.RawMessage(`{"a":[1,{"secret_env":7}]}`) }, wantField: "payload.a[1]", wantMsg: "must be a string"},
		{name: "payload secret reference bad name", edit: func(j *Job) { j.Payload = json.RawMessage(`{"a":{"secret_env":"x y"}}`) }, wantField: "payload.a", wantMsg: "not a valid environment variable name"},
		{name: "payload object with secret_env and more keys", edit: func(j *Job) { j.Payload = json.RawMessage(`{"secret_env":7,"other":1}`) }},
		{name: "body secret reference bad name", edit: func(j *Job) { j.Executor.Body = json.RawMessage(`{"secret_env":""}`) }, wantField: "executor.body", wantMsg: "not a valid"},
		{name: "http body", edit: func(j *Job) { j.Executor.Body = json.RawMessage(`{"text":"hi"}`) }},
		{name: "http body invalid", edit: func(j *Job) { j.Executor.Body = json.RawMessage(`{`) }, wantField: "executor.body", wantMsg: "not valid JSON"},
		{name: "http with command", edit: func(j *Job) { j.Executor.Command = []string{"ls"} }, wantField: "executor.command", wantMsg: `not used by executor type "http"`},
		{name: "http url at limit", edit: func(j *Job) { j.Executor.URL = "http://a/" + strings.Repeat("x", MaxURLBytes-9) }},
		{name: "http url too long", edit: func(j *Job) { j.Executor.URL = "http://a/" + strings.Repeat("x", 900<<10) }, wantField: "executor.url", wantMsg: "921609 bytes long; want at most 8192"},
		{name: "http 64 headers", edit: func(j *Job) { j.Executor.Headers = headers(64, 10) }},
		{name: "http too many headers", edit: func(j *Job) { j.Executor.Headers = headers(10000, 1) }, wantField: "executor.headers", wantMsg: "10000 headers; want at most 64"},
		{name: "http header value too long", edit: func(j *Job) {
			j.Executor.Headers = map[string]HeaderValue{"X-Big": Literal(strings.Repeat("v", 200<<10))}
		}, wantField: "executor.headers[X-Big]", wantMsg: "value of 204800 bytes; want at most 8192"},
		{name: "http header name too long", edit: func(j *Job) { j.Executor.Headers = map[string]HeaderValue{strings.Repeat("N", 300): Literal("v")} }, wantField: "executor.headers", wantMsg: "is longer than 256 bytes"},

		{name: "shell", edit: func(j *Job) {
			j.Executor = Executor{Type: ExecutorShell, Command: []string{"/bin/sh", "-c", "echo hi"}}
		}},
		{name: "shell empty command", edit: func(j *Job) { j.Executor = Executor{Type: ExecutorShell} }, wantField: "executor.command", wantMsg: "required"},
		{name: "shell empty program", edit: func(j *Job) { j.Executor = Executor{Type: ExecutorShell, Command: []string{""}} }, wantField: "executor.command"},
		{name: "shell nul in argument", edit: func(j *Job) { j.Executor = Executor{Type: ExecutorShell, Command: []string{"echo", "a\x00b"}} }, wantField: "executor.command[1]"},
		{name: "shell 1024 arguments", edit: func(j *Job) {
			j.Executor = Executor{Type: ExecutorShell, Command: slices.Repeat([]string{"a"}, MaxCommandArgs)}
		}},
		{name: "shell 100000 arguments", edit: func(j *Job) {
			j.Executor = Executor{Type: ExecutorShell, Command: slices.Repeat([]string{"a"}, 100000)}
		}, wantField: "executor.command", wantMsg: "100000 words; want at most 1024"},
		{name: "shell arguments too long together", edit: func(j *Job) {
			j.Executor = Executor{Type: ExecutorShell, Command: []string{"echo", strings.Repeat("a", 100<<10), strings.Repeat("b", 100<<10)}}
		}, wantField: "executor.command", wantMsg: "more than 131072 bytes in all"},
		{name: "shell with url", edit: func(j *Job) { j.Executor = Executor{Type: ExecutorShell, Command: []string{"ls"}, URL: "http://x"} }, wantField: "executor.url"},
		{name: "shell with method", edit: func(j *Job) { j.Executor = Executor{Type: ExecutorShell, Command: []string{"ls"}, Method: "POST"} }, wantField: "executor.method"},

		{name: "named handler", edit: func(j *Job) { j.Executor = Executor{Type: "billing.invoice-run:v2"} }},
		{name: "named handler with headers", edit: func(j *Job) {
			j.Executor = Executor{Type: "billing", Headers: map[string]HeaderValue{"A": Literal("b")}}
		}, wantField: "executor.headers"},
		{name: "named handler starting with digit", edit: func(j *Job) { j.Executor = Executor{Type: "1x"} }, wantField: "executor.type", wantMsg: "invalid handler name"},
		{name: "named handler with space", edit: func(j *Job) { j.Executor = Executor{Type: "my handler"} }, wantField: "executor.type"},
		{name: "named handler too long", edit: func(j *Job) { j.Executor = Executor{Type: "h" + strings.Repeat("x", 64)} }, wantField: "executor.type"},
		{name: "named handler huge", edit: func(j *Job) { j.Executor = Executor{Type: strings.Repeat("x", 1<<20)} }, wantField: "executor.type", wantMsg: "… (1048576 bytes)"},
		{name: "type Shell", edit: func(j *Job) { j.Executor = Executor{Type: "Shell", Command: []string{"true"}} }, wantField: "executor.type", wantMsg: `unknown type "Shell"; did you mean "shell"? Built-in types are lower case`},
		{name: "type HTTP", edit: func(j *Job) { j.Executor.Type = "HTTP" }, wantField: "executor.type", wantMsg: `unknown type "HTTP"; did you mean "http" (it sends to http and https URLs)?`},
		{name: "type https", edit: func(j *Job) { j.Executor.Type = "https" }, wantField: "executor.type", wantMsg: `did you mean "http"`},
		{name: "type htpp", edit: func(j *Job) { j.Executor.Type = "htpp" }, wantField: "executor.type", wantMsg: `did you mean "http"`},
		{name: "type shel", edit: func(j *Job) { j.Executor = Executor{Type: "shel", Command: []string{"true"}} }, wantField: "executor.type", wantMsg: `did you mean "shell"`},
		{name: "type SHELLS", edit: func(j *Job) { j.Executor = Executor{Type: "SHELLS"} }, wantField: "executor.type", wantMsg: `did you mean "shell"`},
		{name: "type sh", edit: func(j *Job) { j.Executor = Executor{Type: "sh"} }, wantField: "executor.type", wantMsg: `did you mean "shell"`},
		{name: "type webhook is a handler", edit: func(j *Job) { j.Executor = Executor{Type: "webhook"} }},
		{name: "type shellcheck is a handler", edit: func(j *Job) { j.Executor = Executor{Type: "shellcheck"} }},

		{name: "payload absent", edit: func(j *Job) { j.Payload = nil }},
		{name: "payload scalar", edit: func(j *Job) { j.Payload = json.RawMessage(`42`) }},
		{name: "payload invalid", edit: func(j *Job) { j.Payload = json.RawMessage(`{"a":`) }, wantField: "payload", wantMsg: "not valid JSON"},
		{name: "payload at limit", edit: func(j *Job) { j.Payload = jsonString(100) }, limits: Limits{MaxPayloadBytes: 100}},
		{name: "payload over limit", edit: func(j *Job) { j.Payload = jsonString(101) }, limits: Limits{MaxPayloadBytes: 100}, wantField: "payload", wantMsg: "101 bytes; want at most 100"},
		{name: "payload over default limit", edit: func(j *Job) { j.Payload = jsonString(DefaultMaxPayloadBytes + 1) }, wantField: "payload"},
		{name: "payload invalid utf-8", edit: func(j *Job) { j.Payload = json.RawMessage("{\"a\":\"x\xffy\"}") }, wantField: "payload", wantMsg: "byte 0xFF is not valid UTF-8 (at byte 7)"},
		{name: "payload unpaired surrogate", edit: func(j *Job) { j.Payload = json.RawMessage(`["\ud800"]`) }, wantField: "payload", wantMsg: `"\ud800" is an unpaired UTF-16 surrogate`},
		{name: "payload unpaired low surrogate", edit: func(j *Job) { j.Payload = json.RawMessage(`"\udc00x"`) }, wantField: "payload", wantMsg: "unpaired"},
		{name: "payload high surrogate then letter", edit: func(j *Job) { j.Payload = json.RawMessage(`"\ud83dx"`) }, wantField: "payload", wantMsg: "unpaired"},
		{name: "payload surrogate pair", edit: func(j *Job) { j.Payload = json.RawMessage(`"\ud83d\ude80 \u00e9 \\u"`) }},
		{name: "payload 64 deep", edit: func(j *Job) { j.Payload = nested(MaxJSONDepth) }},
		{name: "payload 65 deep", edit: func(j *Job) { j.Payload = nested(MaxJSONDepth + 1) }, wantField: "payload", wantMsg: "nested more than 64 levels deep"},
		{name: "payload 9999 deep", edit: func(j *Job) { j.Payload = nested(9999) }, wantField: "payload", wantMsg: "nested more than 64 levels deep (at byte 64)"},
		{name: "payload brackets in strings", edit: func(j *Job) { j.Payload = json.RawMessage(`"` + strings.Repeat("[{", 100) + `\""`) }},
		{name: "body 65 deep", edit: func(j *Job) { j.Executor.Body = nested(65) }, wantField: "executor.body", wantMsg: "nested more than 64"},
		{name: "body over limit", edit: func(j *Job) { j.Executor.Body = jsonString(101) }, limits: Limits{MaxPayloadBytes: 100}, wantField: "executor.body"},

		{name: "retry unset", edit: func(j *Job) { j.Retry = RetryPolicy{} }},
		{name: "retry max attempts 100", edit: func(j *Job) { j.Retry.MaxAttempts = 100 }},
		{name: "retry max attempts 101", edit: func(j *Job) { j.Retry.MaxAttempts = 101 }, wantField: "retry.max_attempts", wantMsg: "101 is out of range; want 1 to 100"},
		{name: "retry max attempts negative", edit: func(j *Job) { j.Retry.MaxAttempts = -1 }, wantField: "retry.max_attempts"},
		{name: "retry negative initial backoff", edit: func(j *Job) { j.Retry.InitialBackoff = Duration(-time.Second) }, wantField: "retry.initial_backoff", wantMsg: "-1s is negative"},
		{name: "retry negative max backoff", edit: func(j *Job) { j.Retry.MaxBackoff = Duration(-time.Second) }, wantField: "retry.max_backoff"},
		{name: "retry initial above max", edit: func(j *Job) { j.Retry.InitialBackoff = Duration(2 * time.Minute) }, wantField: "retry.initial_backoff", wantMsg: "2m is longer than retry.max_backoff 1m"},
		{name: "retry initial with max unset", edit: func(j *Job) { j.Retry.InitialBackoff = Duration(2 * time.Minute); j.Retry.MaxBackoff = 0 }},
		{name: "retry max backoff 24h", edit: func(j *Job) { j.Retry.MaxBackoff = MaxTimeout }},
		{name: "retry max backoff absurd", edit: func(j *Job) { j.Retry.MaxBackoff = Duration(25 * time.Hour) }, wantField: "retry.max_backoff", wantMsg: "longer than the maximum of 24h"},

		{name: "timeout unset", edit: func(j *Job) { j.Timeout = 0 }},
		{name: "timeout 24h", edit: func(j *Job) { j.Timeout = MaxTimeout }},
		{name: "timeout negative", edit: func(j *Job) { j.Timeout = Duration(-time.Second) }, wantField: "timeout", wantMsg: "negative"},
		{name: "timeout absurd", edit: func(j *Job) { j.Timeout = Duration(1000 * time.Hour) }, wantField: "timeout", wantMsg: "longer than the maximum"},
		{name: "timeout none", edit: func(j *Job) { j.Timeout = NoTimeout }},
		{name: "timeout 1ns", edit: func(j *Job) { j.Timeout = 1 }, wantField: "timeout", wantMsg: "1ns is shorter than the minimum of 1s"},
		{name: "timeout 999ms", edit: func(j *Job) { j.Timeout = Duration(999 * time.Millisecond) }, wantField: "timeout", wantMsg: "shorter than the minimum of 1s"},
		{name: "timeout 1s", edit: func(j *Job) { j.Timeout = Duration(time.Second) }},
		{name: "backoff 1ms", edit: func(j *Job) { j.Retry.InitialBackoff = Duration(time.Millisecond) }},
		{name: "backoff 1ns", edit: func(j *Job) { j.Retry.InitialBackoff = 1 }, wantField: "retry.initial_backoff", wantMsg: "1ns is shorter than the minimum of 1ms"},
		{name: "max backoff 1us", edit: func(j *Job) { j.Retry.InitialBackoff = 1000; j.Retry.MaxBackoff = 1000 }, wantField: "retry.initial_backoff", wantMsg: "shorter than the minimum of 1ms"},
		{name: "negative revision", edit: func(j *Job) { j.Revision = -1 }, wantField: "revision", wantMsg: "-1 is negative"},
		{name: "positive revision", edit: func(j *Job) { j.Revision = 7 }},
		{name: "backoff none", edit: func(j *Job) { j.Retry.MaxBackoff = NoTimeout }, wantField: "retry.max_backoff", wantMsg: `"none" is only allowed for the job's timeout`},

		{name: "concurrency forbid", edit: func(j *Job) { j.ConcurrencyPolicy = ConcurrencyForbid }},
		{name: "concurrency replace", edit: func(j *Job) { j.ConcurrencyPolicy = ConcurrencyReplace }},
		{name: "concurrency unknown", edit: func(j *Job) { j.ConcurrencyPolicy = "queue" }, wantField: "concurrency_policy", wantMsg: `unknown policy "queue"; want "allow", "forbid" or "replace"`},
		{name: "misfire skip", edit: func(j *Job) { j.MisfirePolicy = MisfireSkip }},
		{name: "misfire run all", edit: func(j *Job) { j.MisfirePolicy = MisfireRunAll }},
		{name: "misfire unknown", edit: func(j *Job) { j.MisfirePolicy = "Run_Once" }, wantField: "misfire_policy", wantMsg: `unknown policy "Run_Once"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := validJob()
			tt.edit(&j)
			before := fmt.Sprintf("%#v", j)
			err := j.Validate(tt.limits)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Validate: got %v, want nil", err)
				}
				// A valid job stays valid once normalized.
				j.Normalize()
				if err := j.Validate(tt.limits); err != nil {
					t.Fatalf("Validate after Normalize: got %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate: got %v (%T), want a *FieldError", err, err)
			}
			if fe.Field != tt.wantField {
				t.Errorf("Field: got %q, want %q (error %q)", fe.Field, tt.wantField, err)
			}
			if !strings.Contains(fe.Msg, tt.wantMsg) {
				t.Errorf("Msg: got %q, want it to contain %q", fe.Msg, tt.wantMsg)
			}
			if !errors.Is(err, ErrInvalidJob) {
				t.Errorf("errors.Is(%v, ErrInvalidJob): got false, want true", err)
			}
			if got := fmt.Sprintf("%#v", j); got != before {
				t.Errorf("Validate modified the job:\n got %s\nwant %s", got, before)
			}
		})
	}
}

// headers returns n distinct headers with values of size bytes.
func headers(n, size int) map[string]HeaderValue {
	h := make(map[string]HeaderValue, n)
	for i := range n {
		h[fmt.Sprintf("X-H%d", i)] = Literal(strings.Repeat("v", size))
	}
	return h
}

// nested returns a JSON value nested depth levels deep: [[...{"a":1}...]].
func nested(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", depth-1) + `{"a":1}` + strings.Repeat("]", depth-1))
}

func TestValidateAtRunAtAhead(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		runAt   time.Time
		wantErr string
	}{
		{name: "yesterday", runAt: now.AddDate(0, 0, -1)},
		{name: "99 years ahead", runAt: now.AddDate(99, 0, 0)},
		{name: "101 years ahead", runAt: now.AddDate(101, 0, 0), wantErr: "run_at: 2127-12-01T00:00:00Z is more than 100 years ahead"},
		{name: "year 9999", runAt: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), wantErr: "more than 100 years ahead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := validJob()
			j.Schedule, j.RunAt = "", &tt.runAt
			err := j.ValidateAt(DefaultLimits(), now)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateAt: got %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ValidateAt: got %v, want %q", err, tt.wantErr)
			}
			if err := j.Validate(DefaultLimits()); err != nil {
				t.Errorf("Validate without a clock: got %v, want nil (only ValidateAt knows now)", err)
			}
		})
	}
}

// jsonString returns a JSON string literal of exactly n bytes.
func jsonString(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("a", n-2) + `"`)
}

// cloneJob returns the JSON encoding of j, to compare jobs.
func cloneJob(t *testing.T, j Job) string {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return string(b)
}

func TestFieldErrorMessage(t *testing.T) {
	j := validJob()
	j.Schedule = "x"
	err := j.Validate(DefaultLimits())
	want := `schedule: invalid cron expression "x": got 1 fields; want 5 (minute hour day-of-month month day-of-week) or 6 (second first)`
	if err == nil || err.Error() != want {
		t.Errorf("Validate: got %v, want %q", err, want)
	}
}

func TestNormalize(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   Job
		want Job
	}{
		{
			name: "defaults for http",
			in:   Job{ID: "a", Schedule: "  @hourly ", Executor: Executor{Type: ExecutorHTTP, URL: "http://x"}},
			want: Job{
				ID: "a", Schedule: "@hourly", Timezone: "UTC",
				Executor:          Executor{Type: ExecutorHTTP, URL: "http://x", Method: "POST"},
				Retry:             RetryPolicy{MaxAttempts: 1, InitialBackoff: Duration(time.Second), MaxBackoff: Duration(time.Minute)},
				Timeout:           Duration(time.Hour),
				ConcurrencyPolicy: ConcurrencyAllow,
				MisfirePolicy:     MisfireRunOnce,
			},
		},
		{
			name: "keeps given values",
			in: Job{
				ID: "a", Timezone: "Asia/Tokyo", Executor: Executor{Type: ExecutorHTTP, URL: "http://x", Method: "patch"},
				Retry:   RetryPolicy{MaxAttempts: 5, InitialBackoff: Duration(2 * time.Second), MaxBackoff: Duration(10 * time.Second)},
				Timeout: Duration(time.Minute), ConcurrencyPolicy: ConcurrencyForbid, MisfirePolicy: MisfireRunAll,
			},
			want: Job{
				ID: "a", Timezone: "Asia/Tokyo", Executor: Executor{Type: ExecutorHTTP, URL: "http://x", Method: "PATCH"},
				Retry:   RetryPolicy{MaxAttempts: 5, InitialBackoff: Duration(2 * time.Second), MaxBackoff: Duration(10 * time.Second)},
				Timeout: Duration(time.Minute), ConcurrencyPolicy: ConcurrencyForbid, MisfirePolicy: MisfireRunAll,
			},
		},
		{
			name: "max backoff follows a large initial backoff",
			in:   Job{ID: "a", Executor: Executor{Type: "h"}, Retry: RetryPolicy{InitialBackoff: Duration(5 * time.Minute)}},
			want: Job{
				ID: "a", Timezone: "UTC", Executor: Executor{Type: "h"},
				Retry:   RetryPolicy{MaxAttempts: 1, InitialBackoff: Duration(5 * time.Minute), MaxBackoff: Duration(5 * time.Minute)},
				Timeout: DefaultTimeout, ConcurrencyPolicy: ConcurrencyAllow, MisfirePolicy: MisfireRunOnce,
			},
		},
		{
			name: "shell gets no method; null payload and run_at to utc",
			in: Job{
				ID: "a", RunAt: timePtr(time.Date(2026, 12, 1, 1, 0, 0, 0, berlin)),
				Executor: Executor{Type: ExecutorShell, Command: []string{"true"}, Body: json.RawMessage(" null ")},
				Payload:  json.RawMessage("null"),
			},
			want: Job{
				ID: "a", Timezone: "UTC", RunAt: timePtr(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
				Executor: Executor{Type: ExecutorShell, Command: []string{"true"}},
				Retry:    RetryPolicy{MaxAttempts: 1, InitialBackoff: DefaultInitialBackoff, MaxBackoff: DefaultMaxBackoff},
				Timeout:  DefaultTimeout, ConcurrencyPolicy: ConcurrencyAllow, MisfirePolicy: MisfireRunOnce,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.Normalize()
			if g, w := cloneJob(t, got), cloneJob(t, tt.want); g != w {
				t.Errorf("Normalize:\n got %s\nwant %s", g, w)
			}
			if got.RunAt != nil && got.RunAt.Location() != time.UTC {
				t.Errorf("RunAt location: got %v, want UTC", got.RunAt.Location())
			}
			again := got
			again.Normalize()
			if g, w := cloneJob(t, again), cloneJob(t, got); g != w {
				t.Errorf("Normalize twice:\n got %s\nwant %s", g, w)
			}
		})
	}
}

// TestParsePort: one rule for every port of the API's URLs: decimal
// digits only, 1 to 65535, no leading zeros.
func TestParsePort(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
		msg  string // of the error; "" for accepted
	}{
		{"1", 1, ""}, {"80", 80, ""}, {"65535", 65535, ""},
		{"0", 0, "out of range"}, {"00", 0, "out of range"}, {"65536", 0, "out of range"}, {"99999999999999999999", 0, "out of range"},
		{"080", 0, "port 080 has leading zeros; write it as 80"}, {"000080", 0, "write it as 80"},
		{"", 0, "not a number"}, {"+80", 0, "not a number"}, {"-1", 0, "not a number"}, {"8a", 0, "not a number"}, {" 80", 0, "not a number"},
	} {
		n, err := ParsePort(tt.in)
		switch {
		case tt.msg == "" && (err != nil || n != tt.want):
			t.Errorf("ParsePort(%q) = %d, %v; want %d", tt.in, n, err, tt.want)
		case tt.msg != "" && (err == nil || !strings.Contains(err.Error(), tt.msg)):
			t.Errorf("ParsePort(%q) = %d, %v; want an error containing %q", tt.in, n, err, tt.msg)
		}
	}
}
