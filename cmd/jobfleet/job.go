package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/internal/crontab"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/store"
)

// jobsSource is what orchestratorJobs needs of the orchestrator: Jobs
// fails with orchestrator.ErrNotStarted until Run has read the cluster's
// partition count and made the store.
type jobsSource interface {
	Jobs() (*store.Etcd, error)
}

// orchestratorJobs returns the admin.JobsFunc of a member: its
// orchestrator's job store, once there is one.
func orchestratorJobs(orch jobsSource) admin.JobsFunc {
	return func() (admin.JobStore, error) {
		s, err := orch.Jobs()
		if errors.Is(err, orchestrator.ErrNotStarted) {
			return nil, errors.New("it has not joined the cluster yet")
		}
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return s, nil
	}
}

func newJobCmd() *cobra.Command {
	var opts clientOptions
	cmd := &cobra.Command{Use: "job", Short: "Create, inspect and operate jobs over the HTTP API"}
	requireSubcommand(cmd)
	opts.register(cmd)
	cmd.AddCommand(
		newJobCreateCmd(&opts),
		newJobApplyCmd(&opts),
		newJobGetCmd(&opts),
		newJobListCmd(&opts),
		newJobRemoveCmd(&opts),
		newJobPauseCmd(&opts, "pause", true),
		newJobPauseCmd(&opts, "resume", false),
		newJobTriggerCmd(&opts),
		newJobRunsCmd(&opts),
		newImportCrontabCmd(&opts),
	)
	return cmd
}

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
	data, err := io.ReadAll(io.LimitReader(r, 2*store.DefaultMaxDocumentBytes))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// jobFlags are create's flags for writing a job without a file.
type jobFlags struct {
	id, schedule, timezone, runAt            string
	httpURL, method, shell, handler, payload string
	headers, secretHeaders, command          []string
	maxAttempts                              int
	backoff, maxBackoff                      time.Duration
	timeout                                  store.Duration
	concurrencyPolicy, misfirePolicy         string
	paused, followRedirects                  bool
}

// Names of create's job flags: all of them, those choosing the executor,
// and those only an http executor takes.
var (
	jobFlagNames = []string{"id", "schedule", "timezone", "run-at", "http-url", "method", "header", "secret-header", "follow-redirects", "shell", "command",
		"handler", "payload", "max-attempts", "backoff", "max-backoff", "job-timeout", "concurrency-policy", "misfire-policy", "paused"}
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
	fs.IntVar(&f.maxAttempts, "max-attempts", 0, "attempts per run including the first (default 1: no retry)")
	fs.DurationVar(&f.backoff, "backoff", 0, "wait before the first retry (default 1s)")
	fs.DurationVar(&f.maxBackoff, "max-backoff", 0, "longest wait between attempts (default 1m)")
	fs.Var(&timeoutFlag{d: &f.timeout}, "job-timeout", `time limit of one attempt, up to 24h, or "none" (default 1h)`)
	fs.StringVar(&f.concurrencyPolicy, "concurrency-policy", "", "allow, forbid or replace (default allow)")
	fs.StringVar(&f.misfirePolicy, "misfire-policy", "", "run_once, skip or run_all (default run_once)")
	fs.BoolVar(&f.paused, "paused", false, "create the job paused")
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
	j := store.Job{
		ID:                f.id,
		Schedule:          f.schedule,
		Timezone:          f.timezone,
		Retry:             store.RetryPolicy{MaxAttempts: f.maxAttempts, InitialBackoff: store.Duration(f.backoff), MaxBackoff: store.Duration(f.maxBackoff)},
		Timeout:           f.timeout,
		ConcurrencyPolicy: store.ConcurrencyPolicy(f.concurrencyPolicy),
		MisfirePolicy:     store.MisfirePolicy(f.misfirePolicy),
		Paused:            f.paused,
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
		j.Executor = store.Executor{Type: store.ExecutorHTTP, URL: f.httpURL, Method: f.method, FollowRedirects: f.followRedirects}
		for flag, list := range map[string][]string{"header": f.headers, "secret-header": f.secretHeaders} {
			for _, h := range list {
				name, value, ok := strings.Cut(h, ":")
				if !ok {
					return nil, fmt.Errorf("--%s %q: want \"Name: value\"", flag, h)
				}
				if j.Executor.Headers == nil {
					j.Executor.Headers = map[string]store.HeaderValue{}
				}
				v := store.Literal(strings.TrimSpace(value))
				if flag == "secret-header" {
					v = store.SecretEnv(strings.TrimSpace(value))
				}
				j.Executor.Headers[strings.TrimSpace(name)] = v
			}
		}
	case cmd.Flags().Changed("shell"):
		j.Executor = store.Executor{Type: store.ExecutorShell, Command: []string{"/bin/sh", "-c", f.shell}}
	case cmd.Flags().Changed("command"):
		j.Executor = store.Executor{Type: store.ExecutorShell, Command: f.command}
	default:
		j.Executor = store.Executor{Type: f.handler}
	}
	return json.Marshal(j)
}

func newJobCreateCmd(opts *clientOptions) *cobra.Command {
	var (
		file  string
		flags jobFlags
	)
	cmd := &cobra.Command{
		Use:   "create (-f FILE | --id ID --http-url URL | --id ID --shell CMD | ...)",
		Short: "Create a job from a job document (-f FILE, - for standard input) or from flags; fails if the ID exists",
		Example: `  jobfleet job create -f nightly-report.json
  jobfleet job create --id ping --schedule '*/5 * * * *' --http-url http://127.0.0.1:9000/hook --payload '{"x":1}'
  jobfleet job create --id backup --schedule '0 2 * * *' --timezone Europe/Berlin --shell '/srv/backup.sh --full'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var doc []byte
			var err error
			if file != "" {
				if given := changed(cmd, jobFlagNames); len(given) > 0 {
					return fmt.Errorf("-f takes the whole job from the file; do not combine it with %s", strings.Join(given, ", "))
				}
				doc, err = readDocument(cmd, file)
			} else {
				doc, err = flags.document(cmd)
			}
			if err != nil {
				return err
			}
			var j store.Job
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				j, err = c.CreateJobJSON(ctx, doc)
				return err
			}); err != nil {
				return err
			}
			return printJobResult(cmd, opts, "created", j)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "job document (JSON); - reads standard input")
	flags.register(cmd)
	return cmd
}

func newJobApplyCmd(opts *clientOptions) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or replace the job a job document describes (its \"id\" names it; a \"revision\" makes it replace only that revision)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("-f FILE is required (- reads standard input)")
			}
			doc, err := readDocument(cmd, file)
			if err != nil {
				return err
			}
			var head struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(doc, &head); err != nil {
				return fmt.Errorf("%s: not a JSON job document: %w", file, err)
			}
			if head.ID == "" {
				return fmt.Errorf("%s: the job document has no \"id\"", file)
			}
			var (
				j       store.Job
				created bool
			)
			err = opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				j, created, err = c.PutJobJSON(ctx, head.ID, doc)
				return err
			})
			if errors.Is(err, client.ErrConflict) && strings.Contains(err.Error(), "stale revision") {
				return fmt.Errorf("%w\n(%s names the revision it was read at; see the current job with: jobfleet job get %q -o json)", err, file, head.ID)
			}
			if err != nil {
				return err
			}
			verb := "replaced"
			if created {
				verb = "created"
			}
			return printJobResult(cmd, opts, verb, j)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "job document (JSON); - reads standard input")
	return cmd
}

// printJobResult reports a stored job: the job document with -o json, a
// line saying what happened otherwise.
func printJobResult(cmd *cobra.Command, opts *clientOptions, verb string, j store.Job) error {
	if opts.output == "json" {
		return printJSON(cmd.OutOrStdout(), j)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s job %q (partition %d, revision %d)\n", verb, j.ID, j.Partition, j.Revision)
	return err
}

func newJobGetCmd(opts *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use: "get ID", Short: "Show one job", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var j store.Job
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				j, err = c.GetJob(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			if opts.output == "json" {
				return printJSON(cmd.OutOrStdout(), j)
			}
			return printJobDetail(cmd.OutOrStdout(), j)
		},
	}
}

func printJobDetail(w io.Writer, j store.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, cell(v)) }
	row("ID", j.ID)
	row("SCHEDULE", scheduleText(j))
	row("EXECUTOR", executorText(j.Executor, 0))
	if len(j.Payload) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, j.Payload) != nil {
			b.Reset()
			b.Write(j.Payload)
		}
		row("PAYLOAD", clip(b.String(), 200))
	}
	row("RETRY", fmt.Sprintf("max_attempts %d, backoff %v to %v", j.Retry.MaxAttempts, j.Retry.InitialBackoff, j.Retry.MaxBackoff))
	row("TIMEOUT", j.Timeout.String())
	row("CONCURRENCY", string(j.ConcurrencyPolicy))
	row("MISFIRE", string(j.MisfirePolicy))
	row("PAUSED", fmt.Sprint(j.Paused))
	row("PARTITION", fmt.Sprint(j.Partition))
	row("CREATED", j.CreatedAt.Format(time.RFC3339))
	row("UPDATED", j.UpdatedAt.Format(time.RFC3339))
	row("REVISION", fmt.Sprint(j.Revision))
	return tw.Flush()
}

// scheduleText describes when a job runs.
func scheduleText(j store.Job) string {
	switch {
	case j.Schedule != "" && j.Timezone != "" && j.Timezone != store.DefaultTimezone && !strings.HasPrefix(j.Schedule, "@every"):
		return j.Schedule + " (" + j.Timezone + ")"
	case j.Schedule != "":
		return j.Schedule
	case j.RunAt != nil:
		return "once at " + j.RunAt.Format(time.RFC3339)
	default:
		return "once, when created"
	}
}

// executorText describes an executor in at most max characters (0: no
// limit).
func executorText(e store.Executor, max int) string {
	var s string
	switch e.Type {
	case store.ExecutorHTTP:
		s = "http " + e.Method + " " + e.URL
	case store.ExecutorShell:
		s = "shell " + strings.Join(e.Command, " ")
	default:
		s = "handler " + e.Type
	}
	if max > 0 {
		s = clip(s, max)
	}
	return s
}

// clip shortens s to at most n runes, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func newJobListCmd(opts *clientOptions) *cobra.Command {
	var (
		limit, chunk int
		cursor       string
	)
	cmd := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List jobs, sorted by ID (all of them unless --limit)", Args: cobra.NoArgs,
		Long: `List jobs sorted by ID. Without --limit every job is fetched (in pages of
--chunk-size) and the whole list is sorted. With --limit N the API's first N
jobs after --cursor are shown, sorted by ID; the API pages in its own order
(by partition, then ID), so such a page is not the first N IDs.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit must not be negative, got %d", limit)
			}
			if chunk < 1 || chunk > 1000 {
				return fmt.Errorf("--chunk-size must be 1 to 1000, got %d", chunk)
			}
			all := api.JobList{Jobs: []store.Job{}, NextCursor: cursor}
			err := opts.call(cmd, func(ctx context.Context, c *client.Client) error {
				for {
					n := chunk
					if limit > 0 {
						n = min(n, limit-len(all.Jobs))
					}
					page, err := c.ListJobs(ctx, client.ListOptions{Limit: n, Cursor: all.NextCursor})
					if err != nil {
						return err
					}
					all.Jobs = append(all.Jobs, page.Jobs...)
					all.NextCursor = page.NextCursor
					if page.NextCursor == "" || (limit > 0 && len(all.Jobs) >= limit) {
						return nil
					}
				}
			})
			if err != nil {
				return err
			}
			// The API pages in key order (partition, then ID), which keeps
			// cursors stable; people look jobs up by ID.
			slices.SortFunc(all.Jobs, func(a, b store.Job) int { return strings.Compare(a.ID, b.ID) })
			if opts.output == "json" {
				return printJSON(cmd.OutOrStdout(), all)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSCHEDULE\tEXECUTOR\tPAUSED\tPARTITION")
			for _, j := range all.Jobs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d\n", cell(j.ID), cell(scheduleText(j)), cell(executorText(j.Executor, 60)), j.Paused, j.Partition)
			}
			if all.NextCursor != "" {
				fmt.Fprintf(tw, "(more: --cursor %q)\n", all.NextCursor)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many jobs (0: all)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "start after this cursor (from a previous --limit listing)")
	cmd.Flags().IntVar(&chunk, "chunk-size", 500, "jobs fetched per request, 1 to 1000")
	return cmd
}

// removed is the -o json document of job rm.
type removed struct {
	Results []importJobResult `json:"results"` // per ID: deleted or failed
}

func newJobRemoveCmd(opts *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use: "rm ID...", Aliases: []string{"delete"}, Short: "Delete jobs (their runs are removed by the partition's owner)", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			doc := removed{Results: []importJobResult{}}
			for _, id := range args {
				if err := opts.call(cmd, func(ctx context.Context, c *client.Client) error { return c.DeleteJob(ctx, id) }); err != nil {
					errs = append(errs, fmt.Errorf("job %q: %w", id, err))
					doc.Results = append(doc.Results, importJobResult{ID: id, Result: "failed", Error: err.Error()})
					continue
				}
				doc.Results = append(doc.Results, importJobResult{ID: id, Result: "deleted"})
				if opts.output != "json" {
					fmt.Fprintf(cmd.OutOrStdout(), "deleted job %q\n", id)
				}
			}
			if opts.output == "json" {
				if err := printJSON(cmd.OutOrStdout(), doc); err != nil {
					return err
				}
			}
			return errors.Join(errs...)
		},
	}
}

// newJobPauseCmd returns the pause command (pause true) or resume.
func newJobPauseCmd(opts *clientOptions, name string, pause bool) *cobra.Command {
	short := "Pause a job: it does not fire until resumed (it can still be triggered)"
	if !pause {
		short = "Resume a paused job; times scheduled while it was paused are not made up"
	}
	return &cobra.Command{
		Use: name + " ID", Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var j store.Job
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				if pause {
					j, err = c.PauseJob(ctx, args[0])
				} else {
					j, err = c.ResumeJob(ctx, args[0])
				}
				return err
			}); err != nil {
				return err
			}
			if opts.output == "json" {
				return printJSON(cmd.OutOrStdout(), j)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%sd job %q\n", name, j.ID)
			return err
		},
	}
}

func newJobTriggerCmd(opts *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use: "trigger ID", Short: "Fire a job now, and print the ID its run will have", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t api.Triggered
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				t.RunID, err = c.TriggerJob(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			if opts.output == "json" {
				return printJSON(cmd.OutOrStdout(), t)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "triggered job %q: run %s\n", args[0], cell(t.RunID))
			return err
		},
	}
}

func newJobRunsCmd(opts *clientOptions) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use: "runs ID", Short: "List a job's runs, newest first", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > 1000 {
				return fmt.Errorf("--limit must be 1 to 1000, got %d", limit)
			}
			var rl api.RunList
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				rl.Runs, err = c.ListRuns(ctx, args[0], limit)
				return err
			}); err != nil {
				return err
			}
			if opts.output == "json" {
				return printJSON(cmd.OutOrStdout(), rl)
			}
			return printRuns(cmd.OutOrStdout(), rl.Runs)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "show at most this many runs, 1 to 1000")
	return cmd
}

// printRuns writes runs as a table: the last attempt's worker and error,
// escaped (they come from workers).
func printRuns(w io.Writer, runs []store.Run) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN ID\tSTATUS\tSCHEDULED\tFIRED\tATTEMPTS\tWORKER\tLAST ERROR")
	for _, r := range runs {
		lastWorker, lastErr := "", ""
		if n := len(r.Attempts); n > 0 {
			lastWorker = r.Attempts[n-1].Worker
			lastErr = cell(clip(r.Attempts[n-1].Error, 60))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", cell(r.ID), cell(string(r.Status)),
			r.ScheduledAt.Format(time.RFC3339), r.FiredAt.Format(time.RFC3339), len(r.Attempts), cell(lastWorker), lastErr)
	}
	return tw.Flush()
}

// importReport is the -o json document of import-crontab.
type importReport struct {
	Jobs    []importedJob    `json:"jobs"`
	Skipped []crontabProblem `json:"skipped"`
	// Stale are the jobs of earlier imports under the same prefix that are
	// no longer in the file: deleted with --prune, kept otherwise.
	Stale []staleJob `json:"stale"`
	// CompareError says why the jobs could not be compared with the
	// server's (a dry run then shows the conversion only).
	CompareError string            `json:"compare_error,omitempty"`
	Applied      bool              `json:"applied"`
	Results      []importJobResult `json:"results,omitempty"`
}

// The actions of an import, per job.
const (
	actionCreate    = "create"    // no job has the ID
	actionUpdate    = "update"    // the job exists and differs
	actionUnchanged = "unchanged" // the job exists as the file says
	actionDelete    = "delete"    // a stale job, with --prune
	actionKeep      = "keep"      // a stale job, without --prune
	actionUnknown   = "?"         // not compared
)

type importedJob struct {
	Line   int       `json:"line"`
	User   string    `json:"user,omitempty"`
	Job    store.Job `json:"job"`
	Action string    `json:"action"`

	revision int64 // of the stored job to update
	paused   bool  // of the stored job: an update keeps it
}

type staleJob struct {
	ID     string `json:"id"`
	Action string `json:"action"`
}

type crontabProblem struct {
	Line   int    `json:"line"`
	Text   string `json:"text"`
	Reason string `json:"reason"`
}

type importJobResult struct {
	ID     string `json:"id"`
	Result string `json:"result"` // created, updated, unchanged, deleted or failed
	Error  string `json:"error,omitempty"`
}

func newImportCrontabCmd(opts *clientOptions) *cobra.Command {
	var (
		copts crontab.Options
		apply bool
		prune bool
	)
	cmd := &cobra.Command{
		Use:   "import-crontab FILE",
		Short: "Convert a crontab into jobs: report what converts, what does not and what would change; make the changes with --apply",
		Long: `Convert a crontab (FILE, or - for standard input) into shell jobs, one per
job line, and print each converted job with what --apply would do to it
(create, update or unchanged, compared with the jobs on the server), each
line that was not converted or was ignored with the reason, and the jobs
of earlier imports under the same --prefix that are no longer in the file.
Nothing changes unless --apply is given; --prune also deletes those jobs.

Job IDs are "<prefix>/<command>-<hash>", from each line's user and command
only, so importing an edited crontab again updates its jobs instead of
duplicating them; an update keeps a job paused if it was. A system crontab
(--system) converts only the lines of --worker-user. The jobs have no
timeout unless --job-timeout. Workers run shell jobs only when started with
--allow-shell.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.output != "table" && opts.output != "json" {
				return fmt.Errorf("--output must be table or json, got %q", opts.output)
			}
			if prune && !apply {
				return errors.New("--prune deletes jobs: give --apply too (without both, import-crontab only shows what it would do)")
			}
			var r io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			res, err := crontab.Parse(r, copts)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			prefix := copts.IDPrefix
			if prefix == "" {
				prefix = crontab.DefaultIDPrefix
			}
			rep := importReport{Jobs: []importedJob{}, Skipped: []crontabProblem{}, Stale: []staleJob{}, Applied: apply}
			for _, e := range res.Jobs {
				rep.Jobs = append(rep.Jobs, importedJob{Line: e.Line, User: e.User, Job: e.Job, Action: actionUnknown})
			}
			for _, p := range res.Skipped {
				rep.Skipped = append(rep.Skipped, crontabProblem{Line: p.Line, Text: p.Text, Reason: p.Reason})
			}
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) error { return planImport(ctx, c, &rep, prefix, prune) }); err != nil {
				if apply {
					return fmt.Errorf("reading the jobs of earlier imports: %w", err)
				}
				rep.CompareError = err.Error()
			}
			var errs []error
			if apply {
				if err := opts.call(cmd, func(ctx context.Context, c *client.Client) error {
					errs = applyImport(ctx, c, &rep)
					return nil
				}); err != nil {
					return err
				}
			}
			if opts.output == "json" {
				if err := printJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else if err := printImportReport(cmd.OutOrStdout(), args[0], rep); err != nil {
				return err
			}
			if len(errs) > 0 {
				return fmt.Errorf("%d changes failed: %w", len(errs), errors.Join(errs...))
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&copts.SystemFormat, "system", false, "system crontab format (/etc/crontab, /etc/cron.d): a user column after the time fields")
	fs.StringVar(&copts.WorkerUser, "worker-user", "", "with --system: the user the workers that run shell jobs run as; only lines for that user are converted (workers never switch users)")
	fs.Var(&timeoutFlag{d: &copts.Timeout}, "job-timeout", `time limit of each attempt of the jobs, e.g. 2h, up to 24h (default none: cron has no timeout)`)
	fs.StringVar(&copts.Timezone, "timezone", "", "IANA time zone of the machine the crontab comes from, used until a CRON_TZ or TZ line (default UTC)")
	fs.StringVar(&copts.IDPrefix, "prefix", crontab.DefaultIDPrefix, "start of every job ID (IDs are PREFIX/...); use distinct prefixes for several crontabs")
	fs.StringVar((*string)(&copts.MisfirePolicy), "misfire-policy", string(store.MisfireSkip), "misfire policy of the jobs: skip (like cron), run_once or run_all")
	fs.BoolVar(&apply, "apply", false, "make the changes shown: create and update the converted jobs; without it nothing is changed")
	fs.BoolVar(&prune, "prune", false, "with --apply: also delete the jobs of earlier imports under --prefix that are no longer in the file")
	return cmd
}

// planImport compares the converted jobs with those on the server and
// sets each one's action, and lists the jobs of earlier imports under
// prefix that the file no longer has.
func planImport(ctx context.Context, c *client.Client, rep *importReport, prefix string, prune bool) error {
	existing := map[string]store.Job{}
	jobs, err := c.AllJobs(ctx, 1000)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if crontab.Owns(prefix, j.ID) {
			existing[j.ID] = j
		}
	}
	inFile := map[string]bool{}
	for i := range rep.Jobs {
		e := &rep.Jobs[i]
		inFile[e.Job.ID] = true
		old, ok := existing[e.Job.ID]
		switch {
		case !ok:
			e.Action = actionCreate
		case sameImport(old, e.Job):
			e.Action = actionUnchanged
		default:
			e.Action, e.revision, e.paused = actionUpdate, old.Revision, old.Paused
		}
	}
	for _, id := range slices.Sorted(maps.Keys(existing)) {
		if inFile[id] {
			continue
		}
		action := actionKeep
		if prune {
			action = actionDelete
		}
		rep.Stale = append(rep.Stale, staleJob{ID: id, Action: action})
	}
	return nil
}

// sameImport reports whether a stored job is what an import would make of
// its line: the fields an import sets are equal (pausing is the user's).
func sameImport(stored, converted store.Job) bool {
	view := func(j store.Job) []byte {
		b, _ := json.Marshal(store.Job{
			Schedule: j.Schedule, Timezone: j.Timezone, RunAt: j.RunAt, Executor: j.Executor, Payload: j.Payload,
			Retry: j.Retry, Timeout: j.Timeout, ConcurrencyPolicy: j.ConcurrencyPolicy, MisfirePolicy: j.MisfirePolicy,
		})
		return b
	}
	return bytes.Equal(view(stored), view(converted))
}

// applyImport makes the planned changes: creates, updates (only over the
// revision compared, keeping the job's pause) and, with --prune, deletes.
func applyImport(ctx context.Context, c *client.Client, rep *importReport) []error {
	var errs []error
	record := func(id, result string, err error) {
		out := importJobResult{ID: id, Result: result}
		if err != nil {
			out.Result, out.Error = "failed", err.Error()
			errs = append(errs, fmt.Errorf("job %q: %w", id, err))
		}
		rep.Results = append(rep.Results, out)
	}
	for _, e := range rep.Jobs {
		j := e.Job
		switch e.Action {
		case actionUnchanged:
			record(j.ID, "unchanged", nil)
			continue
		case actionUpdate:
			j.Revision, j.Paused = e.revision, e.paused
		}
		doc, err := json.Marshal(j)
		if err != nil {
			record(j.ID, "", err)
			continue
		}
		_, created, err := c.PutJobJSON(ctx, j.ID, doc)
		result := "updated"
		if created {
			result = "created"
		}
		record(j.ID, result, err)
	}
	for _, s := range rep.Stale {
		if s.Action != actionDelete {
			continue
		}
		err := c.DeleteJob(ctx, s.ID)
		record(s.ID, "deleted", err)
	}
	return errs
}

// timeoutFlag is a job timeout flag: a duration, or "none".
type timeoutFlag struct {
	d    *store.Duration
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
		*f.d = store.NoTimeout
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive duration such as 90m or 2h, or none")
	}
	*f.d = store.Duration(d)
	return nil
}

func (f *timeoutFlag) Type() string { return "duration" }

func printImportReport(w io.Writer, name string, rep importReport) error {
	results := map[string]importJobResult{}
	for _, r := range rep.Results {
		results[r.ID] = r
	}
	result := func(id string) string {
		r := results[id]
		if r.Error != "" {
			return r.Result + ": " + cell(r.Error)
		}
		return r.Result
	}
	counts := map[string]int{}
	for _, e := range rep.Jobs {
		counts[e.Action]++
	}
	for _, s := range rep.Stale {
		counts[s.Action]++
	}
	fmt.Fprintf(w, "%s: %s converted, %s not converted or ignored\n", name, plural(len(rep.Jobs), "job"), plural(len(rep.Skipped), "line"))
	if rep.CompareError != "" {
		fmt.Fprintf(w, "Not compared with the jobs on the server (%s): showing the conversion only.\n", cell(rep.CompareError))
	} else {
		fmt.Fprintf(w, "%d to create, %d to update, %d unchanged, %d to delete", counts[actionCreate], counts[actionUpdate], counts[actionUnchanged], counts[actionDelete])
		if counts[actionKeep] > 0 {
			fmt.Fprintf(w, ", %d no longer in the file (kept; --prune deletes them)", counts[actionKeep])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	if len(rep.Jobs) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		header := "LINE\tACTION\tID\tSCHEDULE\tTIMEZONE\tUSER\tTIMEOUT\tCOMMAND"
		if rep.Applied {
			header += "\tRESULT"
		}
		fmt.Fprintln(tw, header)
		for _, e := range rep.Jobs {
			user := e.User
			if user == "" {
				user = "-"
			}
			command := ""
			if c := e.Job.Executor.Command; len(c) > 0 {
				command = clip(c[len(c)-1], 60) // the crontab's command, after "sh -c"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s", e.Line, e.Action, cell(e.Job.ID), cell(e.Job.Schedule), cell(e.Job.Timezone), cell(user), e.Job.Timeout, cell(command))
			if rep.Applied {
				fmt.Fprintf(tw, "\t%s", result(e.Job.ID))
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.Stale) > 0 {
		fmt.Fprintf(w, "\nNo longer in the file (jobs of an earlier import under this prefix):\n")
		for _, s := range rep.Stale {
			line := fmt.Sprintf("  %s  %s", s.Action, cell(s.ID))
			if rep.Applied && s.Action == actionDelete {
				line += "  " + result(s.ID)
			}
			fmt.Fprintln(w, line)
		}
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(w, "\nNot converted or ignored:\n")
		for _, p := range rep.Skipped {
			fmt.Fprintf(w, "  line %d: %s\n      %s\n", p.Line, cell(p.Reason), cell(p.Text))
		}
	}
	var err error
	if !rep.Applied {
		_, err = fmt.Fprintf(w, "\nDry run: nothing was changed. Run again with --apply to make these changes (and --prune to delete what is no longer in the file).\n")
	}
	return err
}

// plural returns "1 job", "2 jobs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
