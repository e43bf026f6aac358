package browser_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
)

// TestConsoleJobForm creates a job through the console's form as an
// operator limited to team/, with the schedule's next fires previewed
// as typed and the server's errors shown next to the fields they name;
// edits it, keeping every field the form has no input for (a payload
// with an integer past 2^53, shards, priority, jitter); is refused with
// the job changed by the API since the form was opened (409), reloads
// and saves; is asked before leaving an edit not saved (and kept on the
// form when it says no); edits the job as JSON text; and checks that a
// viewer is offered neither form.
func TestConsoleJobForm(t *testing.T) {
	exe := browser(t)
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: 8, Scheduler: true, Quiet: true})
	f.Join("m1")
	f.WaitSettled(30 * time.Second)
	m1 := f.Member("m1").URL
	operator := f.Token(api.RoleOperator, "team/")
	viewer := f.Token(api.RoleViewer, "")
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}

	p, closeBrowser := openBrowser(t, exe, m1, 1400)
	defer closeBrowser()
	p.signIn(operator)

	const id = "team/form-a"
	const bigInt = "12345678901234567890" // past 2^53: a JavaScript number would round it
	path := m1 + "/v1/jobs/" + url.PathEscape(id)
	// retype replaces an input's text by typing, as the preview listens
	// to what is typed.
	retype := func(input, text string) {
		t.Helper()
		p.do("type "+text+" into "+input, script(`document.getElementById('`+input+`').value = ''`), chromedp.SendKeys(chromedp.ID(input), text))
	}
	// fires returns the preview's rows, checked to be the same instant
	// in Berlin and in UTC.
	fires := func() []time.Time {
		t.Helper()
		rows := eval[[][2]string](p, `[...document.querySelectorAll('#form-fires tbody tr')].map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent))`)
		var out []time.Time
		for _, r := range rows {
			local, err1 := time.Parse(time.RFC3339Nano, r[0])
			utc, err2 := time.Parse(time.RFC3339Nano, r[1])
			if err1 != nil || err2 != nil || !local.Equal(utc) || !strings.HasSuffix(r[1], "Z") {
				t.Fatalf("preview row %q: want one instant in the zone and in UTC (%v, %v)", r, err1, err2)
			}
			if _, off := local.Zone(); off != func() int { _, o := local.In(berlin).Zone(); return o }() {
				t.Errorf("preview row %q: the local time is not at Berlin's offset", r)
			}
			out = append(out, local.In(berlin))
		}
		return out
	}

	t.Run("create, with the preview and the server's errors", func(t *testing.T) {
		p.t = t
		p.open("#/jobs")
		p.do("New job", chromedp.WaitVisible(chromedp.ID("new-job")), chromedp.Click(chromedp.ID("new-job")))
		p.waitJS("the form", `location.hash === '#/new' && !!document.getElementById('job-form')`, 10*time.Second)
		if got := eval[string](p, `document.getElementById('f-id').value`); got != "team/" {
			t.Errorf("the ID starts as %q, want the credential's prefix", got)
		}
		// A schedule the parser refuses: the server's error, next to it.
		p.do("a bad schedule", chromedp.SendKeys(chromedp.ID("f-schedule"), "0 25 * * *"))
		p.waitJS("the schedule's error", `document.getElementById('err-schedule').textContent.startsWith('schedule: ') && document.getElementById('f-schedule').getAttribute('aria-invalid') === 'true'`, 10*time.Second)
		if n := eval[int](p, `document.querySelectorAll('#form-fires tr').length`); n != 0 {
			t.Errorf("the preview lists %d rows for a bad schedule", n)
		}
		// A good one, in Berlin: the next 5 fires, Berlin and UTC.
		retype("f-schedule", "0 9 * * 1-5")
		p.do("the zone", chromedp.SendKeys(chromedp.ID("f-timezone"), "Europe/Berlin"))
		p.waitJS("the preview", `document.querySelectorAll('#form-fires tbody tr').length === 5 && document.getElementById('form-fires').textContent.includes('Europe/Berlin') &&
			document.getElementById('err-schedule').textContent === ''`, 10*time.Second)
		for _, at := range fires() {
			if at.Hour() != 9 || at.Minute() != 0 || at.Weekday() == time.Saturday || at.Weekday() == time.Sunday || !at.After(time.Now()) {
				t.Errorf("preview fire %s: want 09:00 Berlin time on a weekday, after now", at)
			}
		}
		// A one-off: its one time, then back to the schedule.
		at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
		p.do("a one-off", script(`(() => { const s = document.getElementById('f-when'); s.value = 'run_at'; s.dispatchEvent(new Event('change')); })()`),
			chromedp.SendKeys(chromedp.ID("f-run-at"), at))
		p.waitJS("its one fire", `document.querySelectorAll('#form-fires tbody tr').length === 1 && document.querySelector('#form-fires td[data-field=utc]').textContent === '`+at+`' &&
			document.getElementById('f-schedule').closest('.field').hidden`, 10*time.Second)
		p.do("back to the schedule", script(`(() => { const s = document.getElementById('f-when'); s.value = 'schedule'; s.dispatchEvent(new Event('change')); })()`))
		p.waitJS("the schedule's fires", `document.querySelectorAll('#form-fires tbody tr').length === 5`, 10*time.Second)
		p.do("fill the rest",
			chromedp.SetValue(chromedp.ID("f-executor-url"), "https://hooks.example.com/invoice"),
			chromedp.SetValue(chromedp.ID("f-retry-max-attempts"), "3"),
			chromedp.SetValue(chromedp.ID("f-retry-initial-backoff"), "5s"),
			chromedp.SetValue(chromedp.ID("f-history-max-runs"), "50"),
			chromedp.SetValue(chromedp.ID("f-other"), `{"payload": {"account": `+bigInt+`}, "priority": 7, "shards": {"count": 3}, "jitter": "1m"}`))
		p.do("the ID", chromedp.SetValue(chromedp.ID("f-id"), id), script(`document.activeElement.blur()`))
		p.screenshot("console-job-form.png")

		// The server names the field: max_attempts is not a number.
		p.do("save", chromedp.SetValue(chromedp.ID("f-retry-max-attempts"), "three"), chromedp.Click(chromedp.ID("form-save")))
		p.waitJS("max_attempts refused", `document.getElementById('err-retry.max_attempts').textContent.startsWith('retry.max_attempts')`, 10*time.Second)
		if got := eval[string](p, `document.activeElement.id + ' ' + document.getElementById('form-summary').textContent`); !strings.HasPrefix(got, "f-retry-max-attempts Not saved: retry.max_attempts") {
			t.Errorf("after the refusal: focus and summary %q, want the focus on max attempts and its error", got)
		}
		// The operator may create only under team/: the server's 403, at
		// the ID.
		p.do("outside the prefix", chromedp.SetValue(chromedp.ID("f-retry-max-attempts"), "3"), chromedp.SetValue(chromedp.ID("f-id"), "billing/form-a"), chromedp.Click(chromedp.ID("form-save")))
		p.waitJS("the ID refused", `document.getElementById('err-id').textContent.includes('team/') && document.getElementById('err-retry.max_attempts').textContent === ''`, 10*time.Second)
		// A field in Other fields the server refuses: its error there.
		p.do("a bad priority", chromedp.SetValue(chromedp.ID("f-id"), id), chromedp.SetValue(chromedp.ID("f-other"), `{"payload": {"account": `+bigInt+`}, "priority": 100000, "shards": {"count": 3}, "jitter": "1m"}`),
			chromedp.Click(chromedp.ID("form-save")))
		p.waitJS("priority refused", `document.getElementById('err-other').textContent.startsWith('priority') && document.getElementById('err-id').textContent === ''`, 10*time.Second)

		p.do("save", chromedp.SetValue(chromedp.ID("f-other"), `{"payload": {"account": `+bigInt+`}, "priority": 7, "shards": {"count": 3}, "jitter": "1m"}`), chromedp.Click(chromedp.ID("form-save")))
		p.waitJS("the job's page", `location.hash === '#/job/team%2Fform-a' && document.getElementById('job-state')?.textContent === 'active'`, 10*time.Second)
		if msg := eval[string](p, `document.querySelector('#view p[aria-live]').textContent`); !strings.HasPrefix(msg, "Created (revision ") {
			t.Errorf("the job page says %q, want that it was created", msg)
		}
		j, raw := getJob(t, operator, path)
		if j.Schedule != "0 9 * * 1-5" || j.Timezone != "Europe/Berlin" || j.Executor.URL != "https://hooks.example.com/invoice" || j.Retry.MaxAttempts != 3 ||
			j.Retry.InitialBackoff != api.Duration(5*time.Second) || j.History.MaxRuns != 50 || j.Priority == nil || *j.Priority != 7 || j.Shards == nil || j.Shards.Count != 3 {
			t.Errorf("the job created: %s", raw)
		}
		if !bytes.Contains(j.Payload, []byte(bigInt)) {
			t.Errorf("payload %s, want the account %s whole", j.Payload, bigInt)
		}
	})

	t.Run("edit keeps what the form does not show", func(t *testing.T) {
		p.t = t
		p.do("Edit", chromedp.WaitVisible(chromedp.ID("edit")), chromedp.Click(chromedp.ID("edit")))
		p.waitJS("the form, filled", `location.hash === '#/edit/team%2Fform-a' && document.getElementById('job-form')?.hidden === false && document.getElementById('f-schedule')?.value === '0 9 * * 1-5' &&
			document.querySelectorAll('#form-fires tbody tr').length === 5`, 10*time.Second)
		if other := eval[string](p, `document.getElementById('f-other').value`); !strings.Contains(other, bigInt) || !strings.Contains(other, `"priority": 7`) || strings.Contains(other, "revision") {
			t.Errorf("Other fields hold %q: want the payload whole and priority, without the server's fields", other)
		}
		before, _ := getJob(t, operator, path)
		retype("f-schedule", "30 9 * * 1-5")
		p.waitJS("the preview follows", `[...document.querySelectorAll('#form-fires td[data-field=local]')].every(td => td.textContent.includes('T09:30:00'))`, 10*time.Second)
		p.do("save", chromedp.SetValue(chromedp.ID("f-retry-max-attempts"), "5"), chromedp.Click(chromedp.ID("form-save")))
		p.waitJS("the job's page", `location.hash === '#/job/team%2Fform-a' && document.querySelector('#view p[aria-live]')?.textContent.startsWith('Saved (revision ')`, 10*time.Second)
		after, raw := getJob(t, operator, path)
		if after.Schedule != "30 9 * * 1-5" || after.Retry.MaxAttempts != 5 || after.Revision == before.Revision {
			t.Errorf("the job edited: %s", raw)
		}
		// Everything else as it was.
		before.Schedule, before.Retry.MaxAttempts = after.Schedule, after.Retry.MaxAttempts
		if a, b := comparable(t, after), comparable(t, before); a != b {
			t.Errorf("the edit changed more than the schedule and max_attempts:\n got %s\nwant %s", a, b)
		}
		if !bytes.Contains(after.Payload, []byte(bigInt)) {
			t.Errorf("payload %s after the edit, want the account %s whole", after.Payload, bigInt)
		}
	})

	t.Run("a concurrent change is refused, and reloaded", func(t *testing.T) {
		p.t = t
		p.open("#/edit/" + url.PathEscape(id))
		p.waitJS("the form, filled", `document.getElementById('job-form')?.hidden === false && document.getElementById('f-schedule')?.value === '30 9 * * 1-5'`, 10*time.Second)
		// Someone else changes the job meanwhile.
		j, _ := getJob(t, f.AdminToken, path)
		j.Timeout = api.Duration(10 * time.Minute)
		if code := call(t, f.AdminToken, "PUT", path, j, nil); code != http.StatusOK {
			t.Fatalf("PUT through the API: %d", code)
		}
		p.do("save over it", chromedp.SetValue(chromedp.ID("f-retry-max-attempts"), "2"), chromedp.Click(chromedp.ID("form-save")))
		p.waitJS("the conflict", `document.getElementById('form-conflict')?.hidden === false && document.getElementById('form-conflict').textContent.includes('changed by someone else since you opened it')`, 10*time.Second)
		if got := eval[string](p, `document.activeElement.id + ' ' + location.hash`); got != "form-reload #/edit/team%2Fform-a" {
			t.Errorf("after the conflict, focus and address %q: want the reload button, on the form", got)
		}
		if now, _ := getJob(t, operator, path); now.Retry.MaxAttempts != 5 || now.Timeout != api.Duration(10*time.Minute) {
			t.Errorf("after the refused save the job has max_attempts %d, timeout %s: want the API's change only", now.Retry.MaxAttempts, now.Timeout)
		}
		p.do("reload", chromedp.Click(chromedp.ID("form-reload")))
		p.waitJS("the job as it is now", `document.getElementById('job-form')?.hidden === false && document.getElementById('f-timeout').value === '10m' &&
			document.getElementById('f-retry-max-attempts').value === '5' && document.getElementById('form-note').textContent.startsWith('Reloaded')`, 10*time.Second)
		p.do("save", chromedp.SetValue(chromedp.ID("f-retry-max-attempts"), "2"), chromedp.Click(chromedp.ID("form-save")))
		p.waitJS("saved", `location.hash === '#/job/team%2Fform-a'`, 10*time.Second)
		if now, raw := getJob(t, operator, path); now.Retry.MaxAttempts != 2 || now.Timeout != api.Duration(10*time.Minute) || !bytes.Contains(now.Payload, []byte(bigInt)) {
			t.Errorf("after the reload and save: %s", raw)
		}
	})

	t.Run("leaving with edits not saved asks first", func(t *testing.T) {
		p.t = t
		filled := `location.hash === '#/edit/team%2Fform-a' && document.getElementById('job-form')?.hidden === false && document.getElementById('f-retry-max-attempts')?.value === '2'`
		p.open("#/edit/" + url.PathEscape(id))
		p.waitJS("the form, filled", filled, 10*time.Second)
		// The page's confirm, answered by the test: refused first.
		p.do("answer confirm", script(`window.asked = []; window.answer = false; window.confirm = (m) => { window.asked.push(m); return window.answer; }`))
		p.open("#/jobs")
		p.waitJS("the jobs, without a question", `document.getElementById('view').dataset.view === 'jobs' && window.asked.length === 0`, 10*time.Second)
		p.open("#/edit/" + url.PathEscape(id))
		p.waitJS("the form again", filled, 10*time.Second)
		p.do("an edit, then away", chromedp.SetValue(chromedp.ID("f-timeout"), "20m"), script(`location.hash = '#/jobs'`))
		p.waitJS("asked, and kept on the form", `window.asked.length === 1 && window.asked[0].includes('not saved') && location.hash === '#/edit/team%2Fform-a' &&
			document.getElementById('view').dataset.view === 'edit' && document.getElementById('f-timeout').value === '20m'`, 10*time.Second)
		if got := eval[bool](p, `(() => { const e = new Event('beforeunload', { cancelable: true }); window.dispatchEvent(e); return e.defaultPrevented; })()`); !got {
			t.Errorf("closing the page with the edit not saved is not held (beforeunload)")
		}
		p.do("away after all", script(`window.answer = true; location.hash = '#/jobs'`))
		p.waitJS("the jobs", `window.asked.length === 2 && document.getElementById('view').dataset.view === 'jobs'`, 10*time.Second)
		if got := eval[bool](p, `(() => { const e = new Event('beforeunload', { cancelable: true }); window.dispatchEvent(e); return e.defaultPrevented; })()`); got {
			t.Errorf("the jobs list holds the page's closing")
		}
		if j, raw := getJob(t, operator, path); j.Timeout != api.Duration(10*time.Minute) {
			t.Errorf("the edit left unsaved was saved: %s", raw)
		}
	})

	t.Run("edit as JSON", func(t *testing.T) {
		p.t = t
		p.open("#/edit/" + url.PathEscape(id))
		p.waitJS("the form, filled", `location.hash === '#/edit/team%2Fform-a' && document.getElementById('job-form')?.hidden === false && document.getElementById('f-timeout')?.value === '10m'`, 10*time.Second)
		p.do("Edit as JSON", chromedp.Click(chromedp.ID("form-json")))
		p.waitJS("the document", `!document.getElementById('form-json-set').hidden && document.getElementById('f-json').value.includes('"timeout": "10m"')`, 10*time.Second)
		doc := eval[string](p, `document.getElementById('f-json').value`)
		if !strings.Contains(doc, bigInt) || !strings.Contains(doc, `"revision"`) || !strings.Contains(doc, `"schedule": "30 9 * * 1-5"`) {
			t.Errorf("the document in JSON mode: %s\nwant the payload whole, the schedule and the revision", doc)
		}
		if n := eval[int](p, `[...document.querySelectorAll('#job-form fieldset')].filter(f => !f.hidden).length`); n != 1 {
			t.Errorf("%d fieldsets shown in JSON mode, want the document's only", n)
		}
		// Another ID cannot go back into the form (it has no input for it).
		p.do("another ID", chromedp.SetValue(chromedp.ID("f-json"), strings.Replace(doc, `"id": "team/form-a"`, `"id": "team/zzz"`, 1)), chromedp.Click(chromedp.ID("form-json")))
		p.waitJS("refused at the document", `document.getElementById('err-json').textContent.includes('not the ID of the job edited') && !document.getElementById('form-json-set').hidden`, 10*time.Second)
		// Without its revision the form says a save replaces whatever is
		// stored, then the revision put back says it again as before.
		noRev := regexp.MustCompile(`,?\n\s*"revision": \d+`).ReplaceAllString(doc, "")
		if noRev == doc {
			t.Fatalf("no revision line in %s", doc)
		}
		p.do("no revision", chromedp.SetValue(chromedp.ID("f-json"), noRev), chromedp.Click(chromedp.ID("form-json")))
		p.waitJS("the form says so", `document.getElementById('form-json-set').hidden && document.getElementById('form-revision').textContent.includes('replaces whatever is stored')`, 10*time.Second)
		p.do("back to JSON", chromedp.Click(chromedp.ID("form-json")))
		p.waitJS("the document again", `!document.getElementById('form-json-set').hidden`, 10*time.Second)
		p.do("the revision back", chromedp.SetValue(chromedp.ID("f-json"), doc), chromedp.Click(chromedp.ID("form-json")))
		p.waitJS("the revision shown", `document.getElementById('form-json-set').hidden && document.getElementById('form-revision').textContent.includes('replaces only this revision')`, 10*time.Second)
		p.do("JSON again", chromedp.Click(chromedp.ID("form-json")))
		p.waitJS("the document", `!document.getElementById('form-json-set').hidden`, 10*time.Second)
		// An error the server finds is shown at the document.
		p.do("a bad timeout", chromedp.SetValue(chromedp.ID("f-json"), strings.Replace(doc, `"timeout": "10m"`, `"timeout": "soon"`, 1)), chromedp.Click(chromedp.ID("form-save")))
		p.waitJS("refused at the document", `document.getElementById('err-json').textContent.startsWith('timeout')`, 10*time.Second)
		// Back to the form with an edit made in the text, then saved.
		p.do("an edit in the text", chromedp.SetValue(chromedp.ID("f-json"), strings.Replace(doc, `"timeout": "10m"`, `"timeout": "15m"`, 1)), chromedp.Click(chromedp.ID("form-json")))
		p.waitJS("the form shows it", `document.getElementById('form-json-set').hidden && document.getElementById('f-timeout').value === '15m' &&
			document.querySelectorAll('#form-fires tbody tr').length === 5`, 10*time.Second)
		p.do("save", chromedp.Click(chromedp.ID("form-save")))
		p.waitJS("saved", `location.hash === '#/job/team%2Fform-a' && document.querySelector('#view p[aria-live]')?.textContent.startsWith('Saved (revision ')`, 10*time.Second)
		if j, raw := getJob(t, operator, path); j.Timeout != api.Duration(15*time.Minute) || !bytes.Contains(j.Payload, []byte(bigInt)) || j.Schedule != "30 9 * * 1-5" {
			t.Errorf("after the JSON edit: %s", raw)
		}
	})

	t.Run("a viewer is offered no form", func(t *testing.T) {
		p.t = t
		p.signIn(viewer)
		p.open("#/jobs")
		p.waitJS("the jobs", `!!document.querySelector('tr[data-job]')`, 10*time.Second)
		p.open("#/job/" + url.PathEscape(id))
		p.waitJS("the job", `document.getElementById('job-state')?.textContent === 'active'`, 10*time.Second)
		if got := eval[string](p, `[!!document.getElementById('new-job'), !!document.getElementById('edit')].join()`); got != "false,false" {
			t.Errorf("a viewer is offered New job, Edit: %s", got)
		}
		for _, hash := range []string{"#/new", "#/edit/" + url.PathEscape(id)} {
			p.open(hash)
			p.waitJS("the refusal", `!!document.getElementById('form-readonly') && !document.getElementById('job-form')`, 10*time.Second)
		}
	})
}

// getJob reads a job through the API: the document decoded, and as sent.
func getJob(t *testing.T, token, u string) (api.Job, string) {
	t.Helper()
	var raw json.RawMessage
	if code := call(t, token, "GET", u, nil, &raw); code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, code, raw)
	}
	var j api.Job
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	return j, string(raw)
}

// comparable returns job j as JSON without the fields the server sets.
func comparable(t *testing.T, j api.Job) string {
	t.Helper()
	j.Revision, j.UpdatedAt, j.State, j.Status, j.ResumedAt = 0, time.Time{}, nil, "", nil
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
