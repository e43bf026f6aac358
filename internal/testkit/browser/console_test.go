package browser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/egress"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/worker"
	"github.com/jobfleet/jobfleet/internal/testkit/etcdtest"
	"github.com/jobfleet/jobfleet/internal/testkit/fleettest"
	"github.com/jobfleet/jobfleet/shard"
)

// Environment variables of these tests.
const (
	// envRequire, set to 1 (CI sets it), makes a missing browser a failure
	// instead of a skip.
	envRequire = "JOBFLEET_BROWSER_TESTS"
	// envBrowser names the browser binary; default: the first of
	// browserNames found on the PATH.
	envBrowser = "JOBFLEET_CHROMIUM"
	// envScreenshots names a directory (such as docs/img, relative to the
	// repository's root) to write the screenshots to; default: the test's
	// temporary directory.
	envScreenshots = "JOBFLEET_SCREENSHOTS"
)

var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

var etcd *etcdtest.Server

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, &etcd,
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait")))
}

// browser returns the path of a Chromium, or skips the test (fails it if
// envRequire is 1).
func browser(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envBrowser); p != "" {
		return p
	}
	for _, name := range browserNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("no browser found (looked for %v on the PATH, or set %s): install Debian's chromium (apt-get install chromium) to run the console's browser tests", browserNames, envBrowser)
	if os.Getenv(envRequire) == "1" {
		t.Fatal(msg + "; " + envRequire + "=1 requires them")
	}
	t.Skip(msg)
	return ""
}

// screenshotDir returns where screenshots go.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv(envScreenshots)
	if dir == "" {
		return t.TempDir()
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", "..", "..", dir) // from internal/testkit/browser to the root
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// page drives one browser tab at one member's console.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string
	shot string // screenshot directory
}

// openBrowser starts the browser exe (headless, a window 1280 wide and
// height high) on about:blank and returns a page of it on base; stop
// stops the browser. It fails t if the browser does not start.
func openBrowser(t *testing.T, exe, base string, height int) (p *page, stop func()) {
	t.Helper()
	shot := screenshotDir(t)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, height),
		chromedp.Flag("disable-dev-shm-usage", true),
	)...)
	ctx, cancelTab := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	stop = func() { cancelTab(); cancelAlloc() }
	// The first action starts the browser, which lives as long as the
	// context of that action: no timeout here.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		stop()
		t.Fatalf("start the browser: %v", err)
	}
	return &page{t: t, ctx: ctx, base: base, shot: shot}, stop
}

// do runs steps with a timeout, failing the test on error.
func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) and
// returns its value.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// script is a step that evaluates js and ignores its value.
func script(js string) chromedp.Action[chromedp.Void] { return chromedp.Evaluate[chromedp.Void](js) }

// waitJS waits until the expression is true.
func (p *page) waitJS(what, js string, within time.Duration) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, within+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		p.t.Fatalf("waiting for %s (%s): %v", what, js, err)
	}
}

func (p *page) screenshot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(p.shot, name), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// colourScheme makes the page prefer a dark or light colour scheme.
func colourScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

func (p *page) signIn(token string) {
	p.t.Helper()
	p.do("open the console", chromedp.Navigate(p.base+"/ui/"))
	p.do("forget the token", script(`sessionStorage.clear(); history.replaceState(null, '', '#/overview')`), chromedp.Reload())
	p.do("the sign-in form", chromedp.WaitVisible(chromedp.ID("token")))
	p.do("sign in", chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("signin-submit")))
	p.waitJS("signed in", `!document.getElementById('nav').hidden`, 10*time.Second)
}

// open shows the view of hash, as a user following a link.
func (p *page) open(hash string) {
	p.t.Helper()
	p.do("open "+hash, script(fmt.Sprintf("location.hash = %q", hash)))
}

// call makes an API request with token and decodes the reply into out.
func call(t *testing.T, token, method, u string, body, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, u, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// TestConsole drives the console of a three-member fleet in one headless
// browser.
func TestConsole(t *testing.T) {
	exe := browser(t)
	const partitions = 32
	f := fleettest.New(t, etcd, fleettest.Options{Partitions: partitions, Scheduler: true, Quiet: true})
	for _, id := range []string{"m1", "m2", "m3"} {
		f.Join(id)
	}
	f.WaitSettled(30 * time.Second)
	m1 := f.Member("m1").URL
	viewer := f.Token(api.RoleViewer, "")

	// The jobs call hook: its first call of each run fails, the second
	// succeeds, so that a run shows two attempts with an error and an
	// output.
	var calls atomic.Int32
	stopped := make(chan struct{}, 1) // the slow hook's request was cancelled
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/broken" { // every call fails
			http.Error(w, "the printer is on fire", http.StatusInternalServerError)
			return
		}
		if r.URL.Path == "/item" { // item 2 fails, the others succeed
			if r.Header.Get(worker.HeaderShardIndex) == "2" {
				http.Error(w, "shard 2 is corrupt", http.StatusInternalServerError)
				return
			}
			fmt.Fprintln(w, "shard "+r.Header.Get(worker.HeaderShardIndex)+" of "+r.Header.Get(worker.HeaderShardCount)+" done")
			return
		}
		if r.URL.Path == "/slow" { // runs until its worker stops it
			select {
			case <-r.Context().Done():
				stopped <- struct{}{}
			case <-time.After(time.Minute):
			}
			return
		}
		if calls.Add(1)%2 == 1 {
			http.Error(w, "the ledger is locked; try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "invoice 2026-11 sent to 3 customers")
	}))
	defer hook.Close()
	startWorker(t, f.URLs(), f.WorkerToken)

	p, closeBrowser := openBrowser(t, exe, m1, 900)
	defer closeBrowser()
	p.signIn(f.AdminToken)
	const job = "team/console-a"

	t.Run("map shows every partition in three owner colours", func(t *testing.T) {
		p.t = t
		p.open("#/partitions")
		p.waitJS("the map", fmt.Sprintf(`document.querySelectorAll('.cell[data-owner]').length === %d && [...document.querySelectorAll('.cell')].every(c => c.dataset.owner)`, partitions), 10*time.Second)
		type ownersAndColours struct {
			Owners  []string `json:"owners"`
			Colours []string `json:"colours"`
		}
		got := eval[ownersAndColours](p, `(() => {
			const cells = [...document.querySelectorAll('.cell')];
			return {owners: [...new Set(cells.map(c => c.dataset.owner))].sort(),
			        colours: [...new Set(cells.map(c => getComputedStyle(c).backgroundColor))]};
		})()`)
		if !slices.Equal(got.Owners, []string{"m1", "m2", "m3"}) || len(got.Colours) != 3 {
			t.Errorf("owners %v in colours %v, want m1, m2, m3 in three colours", got.Owners, got.Colours)
		}
		// A cell is focusable and says what it is.
		label := eval[string](p, `(() => { const c = document.querySelector('.cell'); c.focus(); return document.activeElement.getAttribute('aria-label') + ' | ' + document.querySelector('.detail').textContent; })()`)
		if !strings.HasPrefix(label, "partition 0, owner m") || !strings.Contains(label, "Epoch") {
			t.Errorf("the first cell, focused: %q", label)
		}
		// The map is one Tab stop; the arrow keys, Home and End move
		// within it, and Tab leaves it.
		focused := func() string {
			return eval[string](p, `(() => { const a = document.activeElement; return a.classList.contains('cell') ? 'cell ' + a.dataset.partition : a.tagName; })()`)
		}
		if n := eval[int](p, `document.querySelectorAll('.cell:not([tabindex="-1"])').length`); n != 1 {
			t.Errorf("%d cells are in the Tab order, want 1", n)
		}
		// Down moves one row: by the cells in the first row as laid out,
		// to the last cell if there is no row below.
		// A narrow map, so that it has rows.
		p.do("narrow the map", script(`document.querySelector('.map').style.width = '200px'`))
		perRow := eval[int](p, `[...document.querySelectorAll('.cell')].filter(c => c.offsetTop === document.querySelector('.cell').offsetTop).length`)
		if perRow < 2 || perRow >= partitions {
			t.Fatalf("the narrowed map shows %d cells per row", perRow)
		}
		for _, step := range []struct{ name, key, want string }{
			{"right", kb.ArrowRight, "cell 1"},
			{"right", kb.ArrowRight, "cell 2"},
			{"left", kb.ArrowLeft, "cell 1"},
			{"End", kb.End, fmt.Sprintf("cell %d", partitions-1)},
			{"right at the end", kb.ArrowRight, fmt.Sprintf("cell %d", partitions-1)},
			{"Home", kb.Home, "cell 0"},
			{"down", kb.ArrowDown, fmt.Sprintf("cell %d", perRow)},
			{"right", kb.ArrowRight, fmt.Sprintf("cell %d", perRow+1)},
			{"up", kb.ArrowUp, "cell 1"},
		} {
			p.do("press "+step.name, chromedp.KeyEvent(step.key))
			if got := focused(); got != step.want {
				t.Errorf("after %s focus is on %s, want %s", step.name, got, step.want)
			}
		}
		p.do("widen the map", script(`document.querySelector('.map').style.width = ''`))
		p.do("press Tab", chromedp.KeyEvent(kb.Tab))
		if got := focused(); strings.HasPrefix(got, "cell") {
			t.Errorf("Tab from the map focused %s, want the map left", got)
		}
		p.do("press Shift+Tab", chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)))
		if got := focused(); got != "cell 1" {
			t.Errorf("Shift+Tab back into the map focused %s, want the cell last focused, cell 1", got)
		}
		p.screenshot("console-map.png")
		p.do("dark", colourScheme("dark"))
		p.screenshot("console-map-dark.png")
		p.do("light", colourScheme("light"))
	})

	t.Run("a job created through the API appears in the list", func(t *testing.T) {
		p.t = t
		for i, id := range []string{job, "team/console-b", "other/console-c"} {
			j := api.Job{ID: id, Schedule: fmt.Sprintf("%d * * * *", 10+i), Timezone: "Europe/Paris", Executor: api.Executor{Type: "http", URL: hook.URL + "/invoice"},
				Retry: api.RetryPolicy{MaxAttempts: 3, InitialBackoff: api.Duration(100 * time.Millisecond)}}
			if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs", j, nil); code != http.StatusCreated {
				t.Fatalf("create %s: %d", id, code)
			}
		}
		// A link's query is decoded once: a prefix holding '&' and '%'
		// arrives whole.
		p.open("#/jobs/prefix=a%26b%25c&paused=paused")
		p.waitJS("the prefix of the link", `document.getElementById('jobs-prefix') && document.getElementById('jobs-prefix').value === 'a&b%c' && document.getElementById('jobs-paused').value === 'paused'`, 10*time.Second)
		p.open("#/jobs")
		p.do("search team/",
			chromedp.WaitVisible(chromedp.ID("jobs-prefix")),
			chromedp.SetValue(chromedp.ID("jobs-prefix"), "team/"),
			chromedp.Click(chromedp.ID("jobs-search")))
		p.waitJS("the job in the list", fmt.Sprintf(`!!document.querySelector('tr[data-job=%q]') && document.querySelectorAll('#jobs-table tbody tr').length === 2`, job), 10*time.Second)
		p.waitJS("last run column", `[...document.querySelectorAll('#jobs-table tbody tr td:last-child')].every(td => td.textContent !== '…')`, 10*time.Second)
		// The next fire columns show the job's next fire as the API
		// computes it (a listing carries no state).
		var next api.NextFires
		if code := call(t, f.AdminToken, "GET", m1+"/v1/jobs/"+url.PathEscape(job)+"/next?count=1", nil, &next); code != http.StatusOK || len(next.Fires) != 1 {
			t.Fatalf("next fire of %s: %d %+v", job, code, next)
		}
		p.waitJS("the next fire columns", fmt.Sprintf(`(() => { const tds = document.querySelectorAll('tr[data-job=%q] td');
			return tds[4].textContent === %q && !['…', '?', '', 'none', 'not scheduled yet'].includes(tds[3].textContent); })()`, job, next.Fires[0].UTC), 10*time.Second)
		if note := eval[string](p, `document.getElementById('jobs-note').textContent`); note != "Page 1: 2 jobs." {
			t.Errorf("the note under the search says %q, want %q", note, "Page 1: 2 jobs.")
		}
		p.screenshot("console-jobs.png")
		// The search is kept in the address: Back from a job shows it
		// again.
		if h := eval[string](p, `location.hash`); h != "#/jobs/prefix=team%2F" {
			t.Errorf("after the search the address is %q, want #/jobs/prefix=team%%2F", h)
		}
		p.do("open the job", script(fmt.Sprintf(`document.querySelector('tr[data-job=%q] a').click()`, job)))
		p.waitJS("the job page", fmt.Sprintf(`document.querySelector('#view h1')?.textContent === 'Job %s'`, job), 10*time.Second)
		p.do("back", chromedp.NavigateBack())
		p.waitJS("the search again", fmt.Sprintf(`document.getElementById('jobs-prefix')?.value === 'team/' && !!document.querySelector('tr[data-job=%q]') && document.querySelectorAll('#jobs-table tbody tr').length === 2`, job), 10*time.Second)
		// Pages: the focus stays on the pager's buttons as they turn.
		for i := range 26 {
			j := api.Job{ID: fmt.Sprintf("pages/%02d", i), Schedule: "0 0 1 1 *", Executor: api.Executor{Type: "http", URL: hook.URL + "/invoice"}}
			if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs", j, nil); code != http.StatusCreated {
				t.Fatalf("create %s: %d", j.ID, code)
			}
		}
		p.open("#/jobs/prefix=pages%2F")
		p.waitJS("a full first page", `document.querySelectorAll('#jobs-table tbody tr').length === 25 && !document.getElementById('jobs-next').disabled`, 10*time.Second)
		p.do("next page by keyboard", script(`document.getElementById('jobs-next').focus()`), chromedp.KeyEvent("\r"))
		p.waitJS("the second page", `document.getElementById('jobs-note').textContent.startsWith('Page 2: 1 job.')`, 10*time.Second)
		if got := eval[string](p, `document.activeElement.id`); got != "jobs-prev" {
			t.Errorf("on the last page the focus is on %q, want jobs-prev (Next page is disabled)", got)
		}
		p.do("previous page by keyboard", chromedp.KeyEvent("\r"))
		p.waitJS("the first page", `document.getElementById('jobs-note').textContent.startsWith('Page 1: 25 jobs')`, 10*time.Second)
		if got := eval[string](p, `document.activeElement.id`); got != "jobs-next" {
			t.Errorf("back on the first page the focus is on %q, want jobs-next (Previous page is disabled)", got)
		}
	})

	t.Run("the trigger button runs the job", func(t *testing.T) {
		p.t = t
		p.open("#/job/" + url.PathEscape(job))
		p.do("trigger", chromedp.WaitVisible(chromedp.ID("trigger")), chromedp.Click(chromedp.ID("trigger")))
		// The page reloads the runs after the action and every 10 s.
		p.waitJS("a run that succeeded on its second attempt",
			`[...document.querySelectorAll('tr[data-run]')].some(tr => tr.textContent.includes('succeeded') && tr.textContent.includes('2 attempts'))`, 20*time.Second)
	})

	t.Run("the run page cancels a running run, and offers viewers nothing", func(t *testing.T) {
		p.t = t
		trigger := func(id, executor, hookURL string) string {
			at := time.Now().Add(24 * time.Hour)
			j := api.Job{ID: id, RunAt: &at, Executor: api.Executor{Type: executor, URL: hookURL}}
			if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs", j, nil); code != http.StatusCreated {
				t.Fatalf("create %s: %d", id, code)
			}
			var tr struct {
				RunID string `json:"run_id"`
			}
			if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs/"+url.PathEscape(id)+"/trigger", nil, &tr); code != http.StatusAccepted {
				t.Fatalf("trigger %s: %d", id, code)
			}
			return tr.RunID
		}
		waiting := trigger("team/console-waits", "nobody-runs-this", "") // stays pending
		p.signIn(viewer)
		p.open("#/run/" + url.PathEscape(waiting))
		p.waitJS("the run page", `document.getElementById('run-status')?.textContent === 'pending'`, 10*time.Second)
		if n := eval[int](p, `document.querySelectorAll('#view .actions button').length`); n != 0 {
			t.Errorf("a viewer sees %d action buttons on a pending run", n)
		}
		p.signIn(f.AdminToken)
		slow := trigger("team/console-slow", "http", hook.URL+"/slow")
		p.open("#/run/" + url.PathEscape(slow))
		p.waitJS("the run running", `document.getElementById('run-status')?.textContent === 'running'`, 20*time.Second)
		p.do("cancel", chromedp.WaitVisible(chromedp.ID("cancel-run")), chromedp.Click(chromedp.ID("cancel-run")),
			chromedp.WaitVisible(chromedp.ID("confirm-cancel-run")), chromedp.Click(chromedp.ID("confirm-cancel-run")))
		p.waitJS("the run cancelled", `document.getElementById('run-status')?.textContent === 'cancelled' && !document.getElementById('cancel-run')`, 20*time.Second)
		select {
		case <-stopped: // the worker was told through its heartbeat, and stopped the request
		case <-time.After(30 * time.Second):
			t.Fatal("the worker did not stop the cancelled attempt")
		}
		var r api.Run
		if call(t, f.AdminToken, "GET", m1+"/v1/runs/"+url.PathEscape(slow), nil, &r); r.Status != "cancelled" || !strings.Contains(r.Reason, "cancelled by") {
			t.Errorf("the run after the cancel: %+v", r)
		}
		p.screenshot("console-run-cancelled.png")
	})

	t.Run("the job page reloads in one loop, keeping focus, the delete question and open runs", func(t *testing.T) {
		p.t = t
		p.open("#/job/" + url.PathEscape(job))
		p.waitJS("the page loaded", `!!document.getElementById('trigger') && (!!document.querySelector('tr[data-run]') || [...document.querySelectorAll('#view p')].some((e) => e.textContent === 'No runs stored.'))`, 10*time.Second)
		// Count the page's reload timers, and hold its runs requests
		// while the gate is shut, so that two triggers land while a
		// reload is in flight.
		p.do("instrument the page", script(`(() => {
			window.ticks = 0; window.held = []; window.gate = false;
			const st = window.setTimeout.bind(window);
			window.setTimeout = (fn, ms, ...a) => { if (fn && fn.name === 'tick') window.ticks++; return st(fn, ms, ...a); };
			const f = window.fetch.bind(window);
			window.fetch = (u, o) => (window.gate && String(u).includes('/runs?limit=50'))
				? new Promise((res) => window.held.push(() => res(f(u, o))))
				: f(u, o);
			window.gate = true;
		})()`))
		p.do("trigger", chromedp.Click(chromedp.ID("trigger")))
		p.waitJS("a reload held", `window.held.length === 1`, 10*time.Second)
		p.do("trigger again", chromedp.Click(chromedp.ID("trigger")))
		p.waitJS("a second reload held", `window.held.length === 2`, 10*time.Second)
		p.do("let both finish", script(`window.ticks = 0; window.held.splice(0).forEach((go) => go())`))
		// Both reloads end within moments of each other; the next one
		// starts a second later (fast reloads after an action) and is
		// held: by then every reload timer of this round is set.
		p.waitJS("the next reload", `window.held.length >= 1`, 10*time.Second)
		if n := eval[int](p, `window.ticks`); n != 1 {
			t.Errorf("after two overlapping reloads the page set %d reload timers, want 1 (each extra one is a reload loop for as long as the page is open)", n)
		}
		p.do("release", script(`window.gate = false; window.held.splice(0).forEach((go) => go())`))
		// Delete asks first; the page's reloads (every second after an
		// action) leave the question open and focused; Cancel gives focus
		// back to Delete.
		p.do("count reloads", script(`window.reloads = 0; { const f = window.fetch; window.fetch = (u, o) => { if (String(u).includes('/runs?limit=50')) window.reloads++; return f(u, o); }; }`))
		p.do("trigger, then delete", chromedp.Click(chromedp.ID("trigger")), chromedp.Click(chromedp.ID("delete")))
		p.waitJS("two reloads", `window.reloads >= 3`, 10*time.Second)
		if got := eval[string](p, `document.activeElement.id + ' ' + document.getElementById('confirm-delete').closest('span').hidden`); got != "confirm-delete false" {
			t.Errorf("two reloads after Delete…: focus on and question hidden %q, want %q", got, "confirm-delete false")
		}
		// Reloads keep a run's attempts open, and the focus on it.
		p.waitJS("a run with attempts", `!!document.querySelector('tr[data-run] summary')`, 10*time.Second)
		p.do("open a run's attempts and the document", script(`(() => { document.getElementById('job-document').open = true; const s = document.querySelector('tr[data-run] summary'); s.click(); s.focus(); window.openRun = s.closest('tr').dataset.run; })()`))
		n := eval[int](p, `window.reloads`)
		p.do("trigger (reloads every second)", script(`document.getElementById('trigger').click()`))
		p.waitJS("two more reloads", fmt.Sprintf(`window.reloads >= %d`, n+2), 10*time.Second)
		if got := eval[string](p, `(() => { const tr = [...document.querySelectorAll('tr[data-run]')].find((tr) => tr.dataset.run === window.openRun);
			return (tr.querySelector('details').open ? 'open' : 'closed') + ' ' + (tr.contains(document.activeElement) ? 'focused' : 'not focused'); })()`); got != "open focused" {
			t.Errorf("a run's attempts, opened, after two reloads: %s, want open focused", got)
		}
		if !eval[bool](p, `document.getElementById('job-document').open`) {
			t.Error("the job's document, opened, is closed after two reloads")
		}
		p.do("cancel", chromedp.Click(chromedp.ID("cancel-delete")))
		if got := eval[string](p, `document.activeElement.id + ' ' + document.getElementById('confirm-delete').closest('span').hidden`); got != "delete true" {
			t.Errorf("after Cancel: focus on and question hidden %q, want %q", got, "delete true")
		}
	})

	t.Run("the pause button pauses the job", func(t *testing.T) {
		p.t = t
		p.open("#/job/" + url.PathEscape(job))
		p.do("pause", chromedp.WaitVisible(chromedp.ID("pause")), chromedp.Click(chromedp.ID("pause")))
		deadline := time.Now().Add(10 * time.Second)
		for {
			var j api.Job
			if code := call(t, f.AdminToken, "GET", m1+"/v1/jobs/"+url.PathEscape(job), nil, &j); code == 200 && j.Paused {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the job is not paused 10 s after the click")
			}
			time.Sleep(50 * time.Millisecond)
		}
		p.waitJS("the page shows it", `document.getElementById('job-state')?.textContent === 'paused' && !!document.getElementById('resume')`, 10*time.Second)
		// Its next fires are those it would fire if resumed, and the page
		// says so.
		p.waitJS("the note above the next fires", `document.getElementById('fires-note')?.textContent.includes('only if resumed') && document.querySelectorAll('#fires-note + table tbody tr').length === 10`, 10*time.Second)
		// The jobs view's state filter, applied by the server, finds it
		// alone among team/'s jobs.
		p.open("#/jobs")
		p.do("search team/'s paused jobs",
			chromedp.WaitVisible(chromedp.ID("jobs-prefix")),
			chromedp.SetValue(chromedp.ID("jobs-prefix"), "team/"),
			chromedp.SetValue(chromedp.ID("jobs-paused"), "paused"),
			chromedp.Click(chromedp.ID("jobs-search")))
		p.waitJS("only the paused job", fmt.Sprintf(`document.querySelectorAll('#jobs-table tbody tr').length === 1 && !!document.querySelector('tr[data-job=%q]')`, job), 10*time.Second)
		p.open("#/job/" + url.PathEscape(job))
		p.waitJS("the runs", `document.querySelectorAll('tr[data-run]').length > 0`, 10*time.Second)
		p.do("open the run's attempts", script(`document.querySelector('tr[data-run] details').open = true`))
		p.screenshot("console-job.png")
	})

	t.Run("a jittered job shows its controls and when it fires", func(t *testing.T) {
		p.t = t
		id := "team/jittered"
		j := api.Job{ID: id, Schedule: "@hourly", Jitter: api.Duration(30 * time.Minute), MaxFires: 5, Executor: api.Executor{Type: "http", URL: hook.URL + "/invoice"}}
		if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs", j, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", id, code)
		}
		p.open("#/job/" + url.PathEscape(id))
		p.waitJS("its max_fires count", `document.getElementById('job-max-fires')?.textContent === '0 of 5' && document.getElementById('job-misfires')?.textContent === '0'`, 10*time.Second)
		// The next fires are the jittered moments, with the scheduled
		// times the runs will have.
		var next api.NextFires
		if code := call(t, f.AdminToken, "GET", m1+"/v1/jobs/"+url.PathEscape(id)+"/next?count=10", nil, &next); code != http.StatusOK || len(next.Fires) != 5 {
			t.Fatalf("next fires of %s: %d %+v, want the 5 of max_fires", id, code, next)
		}
		p.waitJS("the scheduled times beside the fires", fmt.Sprintf(`(() => { const ths = [...document.querySelectorAll('th')].map(th => th.textContent);
			const rows = [...document.querySelectorAll('tbody tr')].filter(tr => tr.children.length === 3);
			return ths.includes('Scheduled (UTC)') && rows.length === 5 && rows[0].children[1].textContent === %q; })()`, next.Fires[0].UTC), 10*time.Second)
	})

	t.Run("where is job X agrees with the API", func(t *testing.T) {
		p.t = t
		p.open("#/where/" + url.PathEscape(job))
		p.waitJS("the placement", `!!document.querySelector('[data-field=owner]')`, 10*time.Second)
		shown := eval[map[string]string](p, `Object.fromEntries([...document.querySelectorAll('[data-field]')].map(e => [e.dataset.field, e.textContent]))`)
		var want api.Placement
		if code := call(t, f.AdminToken, "GET", m1+"/v1/cluster/placement?job="+url.QueryEscape(job), nil, &want); code != 200 {
			t.Fatalf("placement: %d", code)
		}
		if shown["hash"] != want.Hash || shown["partition"] != fmt.Sprintf("%d of %d", want.Partition, want.Partitions) ||
			shown["owner"] != want.Owner || shown["target"] != want.Target || shown["epoch"] != fmt.Sprint(want.Epoch) || shown["reason"] != want.Reason {
			t.Errorf("the console shows %v, the API answers %+v", shown, want)
		}
		p.screenshot("console-where.png")
	})

	t.Run("a worker token is turned away at sign-in", func(t *testing.T) {
		p.t = t
		p.do("open the console", chromedp.Navigate(p.base+"/ui/"))
		p.do("forget the token", script(`sessionStorage.clear(); history.replaceState(null, '', '#/overview')`), chromedp.Reload())
		p.do("sign in", chromedp.WaitVisible(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), f.WorkerToken), chromedp.Click(chromedp.ID("signin-submit")))
		p.waitJS("the refusal", `document.getElementById('signin-error').textContent.includes('is a worker credential') && document.getElementById('nav').hidden && !sessionStorage.getItem('jobfleet.token')`, 10*time.Second)
		p.signIn(f.AdminToken)
	})

	t.Run("a job whose executor fails shows in the failing runs, to viewers too", func(t *testing.T) {
		p.t = t
		const broken = "team/console-broken"
		j := api.Job{ID: broken, Schedule: "0 0 1 1 *", Executor: api.Executor{Type: "http", URL: hook.URL + "/broken"},
			Retry: api.RetryPolicy{MaxAttempts: 2, InitialBackoff: api.Duration(100 * time.Millisecond)}}
		if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs", j, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", broken, code)
		}
		var trig api.Triggered
		if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs/"+url.PathEscape(broken)+"/trigger", nil, &trig); code != http.StatusAccepted {
			t.Fatalf("trigger %s: %d", broken, code)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			var r api.Run
			if code := call(t, f.AdminToken, "GET", m1+"/v1/runs/"+url.PathEscape(trig.RunID), nil, &r); code == 200 && r.Status == api.RunDead {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the broken job's run is not dead after 20 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		row := fmt.Sprintf(`document.querySelector('#failing-table tr[data-run=%q]')`, trig.RunID)
		check := func(who string) {
			t.Helper()
			p.open("#/failing")
			p.waitJS(who+": the dead run in the view", row+`?.dataset.status === 'dead'`, 10*time.Second)
			got := eval[map[string]string](p, `(() => { const tr = `+row+`; return {text: tr.textContent, href: tr.querySelector('a').getAttribute('href'), note: document.getElementById('failing-note').textContent}; })()`)
			if want := "#/job/" + url.PathEscape(broken); got["href"] != want {
				t.Errorf("%s: the row links to %q, want %q", who, got["href"], want)
			}
			for _, want := range []string{broken, "dead", "/broken: status 500"} {
				if !strings.Contains(got["text"], want) {
					t.Errorf("%s: the row %q does not say %q", who, got["text"], want)
				}
			}
			if !strings.Contains(got["note"], "newest first") {
				t.Errorf("%s: the note says %q, not in which order the rows are", who, got["note"])
			}
			// Grouped by job: the job's row counts its dead run and links
			// to the job.
			group := fmt.Sprintf(`document.querySelector('#failing-jobs tr[data-job=%q]')`, broken)
			p.waitJS(who+": the job in the grouped table", group+` !== null`, 10*time.Second)
			g := eval[map[string]string](p, `(() => { const tr = `+group+`; return {dead: tr.children[1].textContent, href: tr.querySelector('a').getAttribute('href'), error: tr.children[4].textContent}; })()`)
			if g["dead"] == "0" || g["href"] != "#/job/"+url.PathEscape(broken) || !strings.Contains(g["error"], "status 500") {
				t.Errorf("%s: the job's group %v; want its dead runs counted, a link to it and its latest error", who, g)
			}
		}
		check("admin")
		p.screenshot("console-failing.png")
		// The job's page charts its runs' durations: the dead run is a bar
		// of its colour, as long as its two attempts took, a link to it.
		p.open("#/job/" + url.PathEscape(broken))
		bar := fmt.Sprintf(`document.querySelector('figure[data-chart="Run durations"] rect[data-run=%q]')`, trig.RunID)
		p.waitJS("the dead run charted", bar+`?.dataset.status === 'dead'`, 10*time.Second)
		if got := eval[map[string]string](p, `(() => { const b = `+bar+`; return {seconds: b.dataset.seconds, run: decodeURIComponent(b.parentNode.getAttribute('href').slice('#/run/'.length)), label: b.closest('svg').getAttribute('aria-label')}; })()`); got["seconds"] == "" ||
			got["run"] != trig.RunID || !strings.Contains(got["label"], "1 dead") {
			t.Errorf("the dead run's bar %v; want its duration, a link to the run, and the chart's label counting it", got)
		}
		p.open("#/failing")
		p.waitJS("back on the failing runs", row+`?.dataset.status === 'dead'`, 10*time.Second)
		// Its search is kept in the address, as the jobs view's.
		p.do("search dead runs of team/",
			chromedp.SetValue(chromedp.ID("failing-prefix"), "team/"),
			chromedp.SetValue(chromedp.ID("failing-status"), "dead"),
			chromedp.Click(chromedp.ID("failing-search")))
		p.waitJS("the dead run", row+`?.dataset.status === 'dead'`, 10*time.Second)
		if h := eval[string](p, `location.hash`); h != "#/failing/prefix=team%2F&status=dead" {
			t.Errorf("after the search the address is %q, want #/failing/prefix=team%%2F&status=dead", h)
		}
		// The 30 s refresh keeps the focus on the run's link: catch the
		// view's refresh to run it now.
		p.do("catch the refresh", script(`(() => { const si = window.setInterval; window.setInterval = (fn, ms) => { if (ms === 30000) { window.refreshFailing = fn; return 0; } return si(fn, ms); }; window.restoreInterval = () => { window.setInterval = si; }; })()`))
		p.open("#/failing")
		p.waitJS("the view with its refresh caught", row+`?.dataset.status === 'dead' && typeof window.refreshFailing === 'function'`, 10*time.Second)
		p.do("focus the run's link, refresh", script(`window.restoreInterval(); window.before = `+row+`; window.before.querySelector('a').focus(); window.refreshFailing()`))
		p.waitJS("the refreshed row", row+` && `+row+` !== window.before`, 10*time.Second)
		if got := eval[string](p, `document.activeElement.closest('tr[data-run]')?.dataset.run + ' ' + document.activeElement.tagName`); got != trig.RunID+" A" {
			t.Errorf("after the refresh the focus is on %q, want the link of %s", got, trig.RunID)
		}
		p.signIn(viewer)
		check("viewer")
		p.do("follow the link to the job", script(row+`.querySelector('a').click()`))
		p.waitJS("the job page", `document.querySelector('#view h1')?.textContent === 'Job `+broken+`'`, 10*time.Second)
		// A viewer of another prefix does not see it.
		p.signIn(f.Token(api.RoleViewer, "other/"))
		p.open("#/failing")
		p.waitJS("the view answered", `/No dead or failed runs/.test(document.getElementById('failing-note').textContent)`, 10*time.Second)
		if n := eval[int](p, `document.querySelectorAll('#failing-table tr[data-run]').length`); n != 0 {
			t.Errorf("a viewer of other/ sees %d failing runs", n)
		}
		p.signIn(f.AdminToken)
	})

	t.Run("a sharded run's page shows its items coloured by status, an item's attempts on click", func(t *testing.T) {
		p.t = t
		const sharded = "team/console-sharded"
		j := api.Job{ID: sharded, Schedule: "0 0 1 1 *", Executor: api.Executor{Type: "http", URL: hook.URL + "/item"}, Shards: &api.Shards{Count: 6}}
		if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs", j, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", sharded, code)
		}
		var trig api.Triggered
		if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs/"+url.PathEscape(sharded)+"/trigger", nil, &trig); code != http.StatusAccepted {
			t.Fatalf("trigger %s: %d", sharded, code)
		}
		p.open("#/run/" + url.PathEscape(trig.RunID))
		p.waitJS("the run dead with its six items", `document.getElementById('run-status')?.textContent === 'dead' && document.querySelectorAll('#items-grid .cell').length === 6 && document.querySelectorAll('#items-grid .cell[data-status=pending], #items-grid .cell[data-status=running]').length === 0 && !document.getElementById('cancel-run')`, 20*time.Second)
		type gridState struct {
			Statuses []string `json:"statuses"`
			Colours  []string `json:"colours"`
			Items    string   `json:"items"`
			Reason   string   `json:"reason"`
		}
		got := eval[gridState](p, `(() => {
			const cells = [...document.querySelectorAll('#items-grid .cell')];
			const of = (s) => cells.filter(c => c.dataset.status === s).map(c => getComputedStyle(c).backgroundColor);
			return {statuses: cells.map(c => c.dataset.status), colours: [...new Set([...of('succeeded'), ...of('dead')])],
			        items: document.getElementById('run-items').textContent, reason: document.getElementById('run-reason').textContent};
		})()`)
		// Item 2 failed; the run is dead with it, the others ended as they
		// did (succeeded, or skipped if the run was decided before they ran).
		if got.Statuses[2] != "dead" || len(got.Colours) != 2 || !strings.Contains(got.Items, "/6 succeeded") || !strings.Contains(got.Reason, "dead: 2") {
			t.Errorf("grid %v in colours %v, items %q, reason %q; want item 2 dead in a colour of its own, named in the reason", got.Statuses, got.Colours, got.Items, got.Reason)
		}
		p.do("click item 2", chromedp.Click(chromedp.CSS(`#items-grid .cell[data-item="2"]`)))
		p.waitJS("item 2's attempt", `document.getElementById('item-detail').textContent.includes('Item2 of 6')`, 5*time.Second)
		if detail := eval[string](p, `document.getElementById('item-detail').textContent`); !strings.Contains(detail, "shard 2 is corrupt") || !strings.Contains(detail, "console-worker") {
			t.Errorf("item 2's detail %q, want its attempt's error and worker", detail)
		}
		p.screenshot("console-run-items.png")
		// The job page links its runs to their page.
		p.open("#/job/" + url.PathEscape(sharded))
		p.waitJS("the run's row", fmt.Sprintf(`decodeURIComponent(document.querySelector('tr[data-run=%q] a')?.getAttribute('href').slice(6)) === %q`, trig.RunID, trig.RunID), 10*time.Second)
	})

	t.Run("a viewer sees no actions and is refused them", func(t *testing.T) {
		p.t = t
		p.signIn(viewer)
		p.open("#/job/" + url.PathEscape(job))
		p.waitJS("the job page", `document.getElementById('job-state')?.textContent === 'paused'`, 10*time.Second)
		buttons := eval[int](p, `document.querySelectorAll('#view .actions button').length`)
		if buttons != 0 {
			t.Errorf("a viewer sees %d action buttons", buttons)
		}
		code := eval[int](p, fmt.Sprintf(`fetch('/v1/jobs/%s/resume', {method: 'POST', headers: {Authorization: 'Bearer ' + sessionStorage.getItem('jobfleet.token')}}).then(r => r.status)`, url.PathEscape(job)))
		if code != http.StatusForbidden {
			t.Errorf("a viewer's resume from the page: %d, want 403", code)
		}
		var j api.Job
		if call(t, f.AdminToken, "GET", m1+"/v1/jobs/"+url.PathEscape(job), nil, &j); !j.Paused {
			t.Error("the viewer's refused resume changed the job")
		}
		p.signIn(f.AdminToken)
	})

	t.Run("draining a member recolours its cells without a reload", func(t *testing.T) {
		p.t = t
		p.open("#/partitions")
		p.waitJS("the map", fmt.Sprintf(`document.querySelectorAll('.cell[data-owner=m3]').length > 0 && document.querySelectorAll('.cell').length === %d`, partitions), 10*time.Second)
		p.do("mark the page", script(`window.notReloaded = true`))
		left := make(chan struct{})
		go func() { defer close(left); f.Leave("m3") }()
		// When etcd no longer records m3 as an owner, the map has 2 s.
		var moved time.Time
		for moved.IsZero() {
			owners, _, err := f.Owners(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(owners, func(o shard.OwnerInfo) bool { return o.Member == "m3" }) {
				moved = time.Now()
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
		p.waitJS("no m3 cell", `document.querySelectorAll('.cell[data-owner=m3]').length === 0 && window.notReloaded === true`, 2*time.Second)
		t.Logf("the map dropped m3 %v after etcd did", time.Since(moved).Round(time.Millisecond))
		<-left
		p.waitJS("settled", `[...document.querySelectorAll('.cell')].every(c => c.dataset.owner === 'm1' || c.dataset.owner === 'm2')`, 10*time.Second)
	})

	t.Run("the late runs view says why a run waits", func(t *testing.T) {
		p.t = t
		at := time.Now().Add(-time.Second)
		j := api.Job{ID: "team/console-late", RunAt: &at, Executor: api.Executor{Type: "nobody-serves-this"}}
		if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs", j, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", j.ID, code)
		}
		defer call(t, f.AdminToken, "DELETE", m1+"/v1/jobs/"+url.PathEscape(j.ID), nil, nil)
		p.open("#/late")
		row := `[...document.querySelectorAll('#late-runs tr')].find(tr => tr.cells[0].textContent === 'team/console-late')`
		p.waitJS("the late run", row+`?.querySelector('.late-reason').textContent.includes('nobody-serves-this')`, 30*time.Second)
		if got := eval[string](p, row+`.cells[4].textContent`); got != "m1" && got != "m2" && got != "m3" {
			t.Errorf("the late run's member %q", got)
		}
		p.screenshot("console-late.png")
	})

	t.Run("the workers view shows what each serves and its labels, filtered by a selector", func(t *testing.T) {
		p.t = t
		p.open("#/workers")
		p.waitJS("the worker", `[...document.querySelectorAll('#workers-table tbody tr')].some(r => r.cells[0].textContent === 'console-worker' && r.cells[2].textContent === 'http' && r.cells[3].textContent === 'pool=console, region=eu-west')`, 15*time.Second)
		p.screenshot("console-workers.png")
		filter := func(sel string) {
			p.do("filter "+sel, script(fmt.Sprintf(`document.getElementById('workers-selector').value = %q`, sel)), chromedp.Click(chromedp.ID("workers-filter")))
		}
		filter("pool=gpu")
		p.waitJS("no gpu worker", `document.getElementById('workers-list').textContent === 'No live worker matches pool=gpu.' && location.hash === '#/workers/selector=pool%3Dgpu'`, 10*time.Second)
		filter("region in (eu-west,eu-central),!spot")
		p.waitJS("the eu worker", `document.querySelectorAll('#workers-table tbody tr').length === 1`, 10*time.Second)
		filter("pool in gpu")
		p.waitJS("the refusal", `document.querySelector('#workers-list .error') && document.getElementById('workers-list').textContent.includes('selector:')`, 10*time.Second)
	})

	t.Run("overview", func(t *testing.T) {
		p.t = t
		// A job firing every second whose every attempt fails: the charts
		// of the fleet count its fires and then its dead runs, whichever
		// member owns it (the others' figures are published to etcd).
		tick := api.Job{ID: "team/console-tick", Schedule: "@every 1s", Executor: api.Executor{Type: "http", URL: hook.URL + "/broken"},
			Retry: api.RetryPolicy{MaxAttempts: 1}}
		if code := call(t, f.AdminToken, "POST", m1+"/v1/jobs", tick, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", tick.ID, code)
		}
		defer call(t, f.AdminToken, "DELETE", m1+"/v1/jobs/"+url.PathEscape(tick.ID), nil, nil)
		p.open("#/overview")
		p.waitJS("members", `document.querySelectorAll('#view table tbody tr').length === 2`, 10*time.Second)
		sum := func(chart, series string) string {
			return fmt.Sprintf(`[...document.querySelectorAll('figure[data-chart=%q] [data-series=%q]')].reduce((a, e) => a + Number(e.dataset.value || 0), 0)`, chart, series)
		}
		p.waitJS("four charts", `document.querySelectorAll('figure.chart svg').length === 4`, 10*time.Second)
		p.waitJS("fires charted", sum("Fires", "fires")+` >= 3`, 20*time.Second)
		p.waitJS("the failures charted", sum("Outcomes", "dead")+` >= 2`, 20*time.Second)
		// The overview's cards are the fleet's: whichever member owns the
		// job, the page of m1 counts its fires and deaths.
		p.waitJS("the fleet's cards count the fires", `Number(document.querySelector('[data-card="fleet-fires"] .v').textContent) >= 3`, 20*time.Second)
		p.waitJS("the fleet's cards count the deaths", `Number(document.querySelector('[data-card="fleet-dead"] .v').textContent) >= 2`, 20*time.Second)
		if label := eval[string](p, `document.querySelector('figure[data-chart="Outcomes"] svg').getAttribute('aria-label')`); !strings.Contains(label, "dead") {
			t.Errorf("the outcomes chart's label %q does not say how many died", label)
		}
		// One member's charts: the select lists each, and the charts of
		// the two members add up to the fleet's (both counted the same
		// minutes, give or take a fire).
		fleet := eval[int](p, sum("Fires", "fires"))
		if got := eval[string](p, `[...document.querySelectorAll('#chart-scope option')].map(o => o.value).join(',')`); got != ",m1,m2" {
			t.Errorf("chart scopes %q, want the fleet, m1 and m2", got)
		}
		var members int
		for _, m := range []string{"m1", "m2"} {
			p.do("chart "+m, script(fmt.Sprintf(`(() => { const s = document.getElementById('chart-scope'); s.value = %q; s.dispatchEvent(new Event('change')); })()`, m)))
			members += eval[int](p, sum("Fires", "fires"))
		}
		if members < fleet {
			t.Errorf("the members' fires add up to %d, the fleet's were %d", members, fleet)
		}
		p.do("chart the fleet", script(`(() => { const s = document.getElementById('chart-scope'); s.value = ''; s.dispatchEvent(new Event('change')); })()`))
		p.screenshot("console-overview.png")
		p.do("the charts in view", script(`document.getElementById('charts-title').scrollIntoView()`))
		p.screenshot("console-charts.png")
		p.do("dark", colourScheme("dark"))
		p.screenshot("console-charts-dark.png")
		p.do("light", colourScheme("light"))
	})
}

// startWorker runs a worker of the fleet's orchestrators until the test
// ends.
func startWorker(t *testing.T, urls []string, token string) {
	t.Helper()
	w, err := worker.New(worker.Config{
		ID:              "console-worker",
		Orchestrators:   worker.StaticOrchestrators(urls...),
		ServeHTTP:       true,
		Labels:          map[string]string{"pool": "console", "region": "eu-west"},
		Token:           token,
		Concurrency:     4,
		PollWait:        2 * time.Second,
		ShutdownTimeout: 5 * time.Second,
		RetryInitial:    50 * time.Millisecond,
		RetryMax:        500 * time.Millisecond,
		Logger:          zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		HTTPPolicy:      egress.Policy{Allow: []string{"127.0.0.1"}}, // the hook
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}
