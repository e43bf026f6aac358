package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/jobfleet/jobfleet/api"
)

// readDocument reads the file named by -f; "-" is standard input.
func readDocument(cmd *cobra.Command, name string) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	// The server refuses documents over its limit with a clear message;
	// read a little more than that so it can.
	data, err := io.ReadAll(io.LimitReader(r, 2*api.DefaultMaxDocumentBytes))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if !json.Valid(data) && looksLikeYAML(data) {
		return nil, fmt.Errorf("%s: %s", name, yamlNotJSON)
	}
	return data, nil
}

// yamlNotJSON says why a YAML job document is refused and what to use.
const yamlNotJSON = "this looks like YAML; job documents are JSON (jobfleet job get ID -o json writes one)"

// looksLikeYAML reports whether data, which is not JSON, is a YAML
// mapping: a job written as "jobfleet job get -o yaml" shows it.
func looksLikeYAML(data []byte) bool {
	var m map[string]any
	return yaml.Unmarshal(data, &m) == nil && len(m) > 0
}

// jobFlags are create's flags for writing a job without a file.
type jobFlags struct {
	id, schedule, timezone, runAt            string
	httpURL, method, shell, handler, payload string
	headers, secretHeaders, command          []string
	maxAttempts                              int
	backoff, maxBackoff                      time.Duration
	timeout                                  api.Duration
	concurrencyPolicy, misfirePolicy         string
	paused, followRedirects                  bool
	// the schedule controls
	jitter              time.Duration
	notBefore, notAfter string
	maxFires            int64
	exclude             []string
	pauseAfterFailures  int
	expectSuccessWithin time.Duration
	deleteAfter         string
}

// Names of create's job flags: all of them, those choosing the executor,
// and those only an http executor takes.
var (
	jobFlagNames = []string{"id", "schedule", "timezone", "run-at", "http-url", "method", "header", "secret-header", "follow-redirects", "shell", "command",
		"handler", "payload", "max-attempts", "backoff", "max-backoff", "job-timeout", "concurrency-policy", "misfire-policy", "paused",
		"jitter", "not-before", "not-after", "max-fires", "exclude", "pause-after-failures", "delete-after"}
	executorFlagNames = []string{"http-url", "shell", "command", "handler"}
	httpFlagNames     = []string{"method", "header", "secret-header", "follow-redirects"}
)

func (f *jobFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.id, "id", "", "job ID")
	fs.StringVar(&f.schedule, "schedule", "", `cron expression (5 or 6 fields), "@hourly", "@every 30s", ...; neither --schedule nor --run-at runs the job once, now`)
	fs.StringVar(&f.timezone, "timezone", "", "IANA time zone of --schedule (default UTC)")
	fs.StringVar(&f.runAt, "run-at", "", "run once at this RFC 3339 time, e.g. 2026-12-01T00:00:00Z")
	fs.StringVar(&f.httpURL, "http-url", "", "http executor: the URL to send the payload to")
	fs.StringVar(&f.method, "method", "", "http executor: the HTTP method (default POST)")
	fs.StringArrayVar(&f.headers, "header", nil, `http executor: an extra request header "Name: value" (repeatable)`)
	fs.StringArrayVar(&f.secretHeaders, "secret-header", nil, `http executor: a header whose value the worker takes from its environment, "Name: VARIABLE" (repeatable; the worker needs --secret-env VARIABLE)`)
	fs.BoolVar(&f.followRedirects, "follow-redirects", false, "http executor: follow redirects (within the worker's destination policy, never changing the method)")
	fs.StringVar(&f.shell, "shell", "", `shell executor: a command line run with /bin/sh -c`)
	fs.StringArrayVar(&f.command, "command", nil, "shell executor: the program, then its arguments, run without a shell (repeat the flag per word)")
	fs.StringVar(&f.handler, "handler", "", "executor of a handler registered by Go code, by name")
	fs.StringVar(&f.payload, "payload", "", "JSON payload handed to the executor")
	fs.IntVar(&f.maxAttempts, "max-attempts", 0, "attempts per run including the first, at least 1 (default 1: no retry; 0 is refused, as by the API: leave the flag out)")
	fs.DurationVar(&f.backoff, "backoff", 0, "wait before the first retry, at least 1ms (default 1s; 0s is refused, as by the API: leave the flag out)")
	fs.DurationVar(&f.maxBackoff, "max-backoff", 0, "longest wait between attempts, at least 1ms (default the larger of 1m and --backoff; 0s is refused, as by the API: leave the flag out)")
	fs.Var(&timeoutFlag{d: &f.timeout}, "job-timeout", `time limit of one attempt, 1s to 24h, or "none" (default 1h; 0s is refused, as by the API: leave the flag out)`)
	fs.StringVar(&f.concurrencyPolicy, "concurrency-policy", "", "allow, forbid or replace (default allow)")
	fs.StringVar(&f.misfirePolicy, "misfire-policy", "", "run_once, skip or run_all (default run_once)")
	fs.BoolVar(&f.paused, "paused", false, "create the job paused")
	fs.DurationVar(&f.jitter, "jitter", 0, "delay each scheduled fire by a pseudo-random offset below this, the same on every member (e.g. 5m; default none; 0s is refused: leave the flag out for none)")
	fs.StringVar(&f.notBefore, "not-before", "", "fire no scheduled time before this RFC 3339 time")
	fs.StringVar(&f.notAfter, "not-after", "", "fire no scheduled time after this RFC 3339 time; the job then completes")
	fs.Int64Var(&f.maxFires, "max-fires", 0, "start at most this many runs on the schedule; the job then completes (default: no limit; 0 is refused, as by the API: leave the flag out)")
	fs.StringArrayVar(&f.exclude, "exclude", nil, "a calendar whose dates and ranges the job does not fire in (repeatable)")
	fs.IntVar(&f.pauseAfterFailures, "pause-after-failures", 0, "pause the job after this many runs in a row ended dead (default: never; 0 is refused, as by the API: leave the flag out)")
	fs.DurationVar(&f.expectSuccessWithin, "expect-success-within", 0, "notify \"overdue\" subscribers when no run succeeded for this long (e.g. 26h; 1m to 9600h; default never; 0s is refused, as by the API: leave the flag out)")
	fs.StringVar(&f.deleteAfter, "delete-after", "", `how long a completed job is kept ("168h", "never"; default the fleet's)`)
}

// changed returns the names among names the user gave.
func changed(cmd *cobra.Command, names []string) []string {
	var out []string
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			out = append(out, "--"+n)
		}
	}
	return out
}

// document builds the job document the flags describe. It checks what
// only the client can (which flags go together, well-formed values); the
// server validates the rest.
func (f *jobFlags) document(cmd *cobra.Command) ([]byte, error) {
	execs := changed(cmd, executorFlagNames)
	if len(execs) != 1 {
		return nil, fmt.Errorf("give -f FILE, or --id and exactly one of --http-url, --shell, --command or --handler (got %d)", len(execs))
	}
	if f.httpURL == "" && cmd.Flags().Changed("http-url") {
		return nil, errors.New("--http-url must not be empty")
	}
	if f.httpURL == "" {
		if given := changed(cmd, httpFlagNames); len(given) > 0 {
			return nil, fmt.Errorf("%s apply only to --http-url", strings.Join(given, ", "))
		}
	}
	// A number given explicitly is at least its minimum: 0 would be
	// dropped from the document and silently mean the default, which the
	// API refuses for a field given as 0.
	for _, n := range []struct {
		flag   string
		value  int64
		accept string
	}{
		{"max-attempts", int64(f.maxAttempts), "want at least 1 attempt (1: no retry)"},
		{"backoff", int64(f.backoff), "want a wait of at least 1ms, such as 500ms or 10s"},
		{"max-backoff", int64(f.maxBackoff), "want a wait of at least 1ms, such as 30s or 5m"},
		{"jitter", int64(f.jitter), "want a positive delay, such as 30s or 5m"},
		{"max-fires", f.maxFires, "want at least 1 run"},
		{"pause-after-failures", int64(f.pauseAfterFailures), "want at least 1 run in a row"},
		{"expect-success-within", int64(f.expectSuccessWithin), "want a bound of at least 1m, such as 26h"},
	} {
		if fl := cmd.Flags().Lookup(n.flag); fl != nil && fl.Changed && n.value <= 0 {
			return nil, fmt.Errorf("--%s %s: %s; leave the flag out for the default", n.flag, fl.Value, n.accept)
		}
	}
	j := api.Job{
		ID:                  f.id,
		Schedule:            f.schedule,
		Timezone:            f.timezone,
		Retry:               api.RetryPolicy{MaxAttempts: f.maxAttempts, InitialBackoff: api.Duration(f.backoff), MaxBackoff: api.Duration(f.maxBackoff)},
		Timeout:             f.timeout,
		ConcurrencyPolicy:   api.ConcurrencyPolicy(f.concurrencyPolicy),
		MisfirePolicy:       api.MisfirePolicy(f.misfirePolicy),
		Paused:              f.paused,
		Jitter:              api.Duration(f.jitter),
		MaxFires:            f.maxFires,
		Exclude:             f.exclude,
		PauseAfterFailures:  f.pauseAfterFailures,
		ExpectSuccessWithin: api.Duration(f.expectSuccessWithin),
		DeleteAfter:         api.Retention(f.deleteAfter),
	}
	for _, b := range []struct {
		flag, v string
		to      **time.Time
	}{{"not-before", f.notBefore, &j.NotBefore}, {"not-after", f.notAfter, &j.NotAfter}} {
		if b.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, b.v)
		if err != nil {
			return nil, fmt.Errorf("--%s %q: want an RFC 3339 time such as 2026-12-01T00:00:00Z", b.flag, b.v)
		}
		*b.to = &t
	}
	if f.runAt != "" {
		t, err := time.Parse(time.RFC3339Nano, f.runAt)
		if err != nil {
			return nil, fmt.Errorf("--run-at %q: want an RFC 3339 time such as 2026-12-01T00:00:00Z", f.runAt)
		}
		j.RunAt = &t
	}
	if f.payload != "" {
		if !json.Valid([]byte(f.payload)) {
			return nil, fmt.Errorf("--payload is not valid JSON: %s", f.payload)
		}
		j.Payload = json.RawMessage(f.payload)
	}
	switch {
	case f.httpURL != "":
		j.Executor = api.Executor{Type: api.ExecutorHTTP, URL: f.httpURL, Method: f.method, FollowRedirects: f.followRedirects}
		for flag, list := range map[string][]string{"header": f.headers, "secret-header": f.secretHeaders} {
			for _, h := range list {
				name, value, ok := strings.Cut(h, ":")
				if !ok {
					return nil, fmt.Errorf("--%s %q: want \"Name: value\"", flag, h)
				}
				if j.Executor.Headers == nil {
					j.Executor.Headers = map[string]api.HeaderValue{}
				}
				v := api.Literal(strings.TrimSpace(value))
				if flag == "secret-header" {
					v = api.SecretEnv(strings.TrimSpace(value))
				}
				j.Executor.Headers[strings.TrimSpace(name)] = v
			}
		}
	case cmd.Flags().Changed("shell"):
		j.Executor = api.Executor{Type: api.ExecutorShell, Command: []string{"/bin/sh", "-c", f.shell}}
	case cmd.Flags().Changed("command"):
		j.Executor = api.Executor{Type: api.ExecutorShell, Command: f.command}
	default:
		j.Executor = api.Executor{Type: f.handler}
	}
	return json.Marshal(j)
}

// timeoutFlag is a job timeout flag: a duration, or "none".
type timeoutFlag struct {
	d    *api.Duration
	zero string // what an unset flag means, for its help
}

func (f *timeoutFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return f.zero
	}
	return f.d.String()
}

func (f *timeoutFlag) Set(s string) error {
	if s == "none" {
		*f.d = api.NoTimeout
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Duration(api.MinTimeout) {
		return fmt.Errorf("want a duration of at least 1s such as 90m or 2h, or none for no time limit; leave the flag out for the default")
	}
	*f.d = api.Duration(d)
	return nil
}

func (f *timeoutFlag) Type() string { return "duration" }
