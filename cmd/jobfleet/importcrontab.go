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

	"github.com/jobfleet/jobfleet/api"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/internal/crontab"
)

// importReport is the -o json document of import-crontab.
type importReport struct {
	// Prefix starts the IDs of the jobs; PrefixFrom says where it comes
	// from (--prefix, or the file's name).
	Prefix     string `json:"prefix"`
	PrefixFrom string `json:"prefix_from"`
	// Timezone is the zone of the jobs before any CRON_TZ line;
	// TimezoneFrom says where it comes from (--timezone, or this
	// machine's zone and where it is named).
	Timezone     string           `json:"timezone"`
	TimezoneFrom string           `json:"timezone_from"`
	Jobs         []importedJob    `json:"jobs"`
	Skipped      []crontabProblem `json:"skipped"`
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
	Line int     `json:"line"`
	User string  `json:"user,omitempty"`
	Job  api.Job `json:"job"`
	// ZoneFrom says where the job's zone comes from: "CRON_TZ, line N",
	// or the import's default (importReport.TimezoneFrom).
	ZoneFrom string `json:"zone_from"`
	Action   string `json:"action"`

	revision int64 // of the stored job to update
	paused   bool  // of the stored job: an update keeps it
}

type staleJob struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	// Former is set for a job of this file's lines imported under the
	// former default prefix (crontab/, shared by every file), which this
	// import replaces.
	Former bool `json:"former_prefix,omitempty"`
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
duplicating them; an update keeps a job paused if it was. The prefix is
crontab/<file name> unless --prefix, so that --prune on one file never
deletes another file's jobs. Environment lines mean what they mean to
cronie: CRON_TZ is the zone of the schedules of the lines after it, TZ
only the commands' environment; schedules before any CRON_TZ are read in
--timezone, by default this machine's zone (named from $TZ, /etc/timezone
or /etc/localtime; the import refuses if it cannot be named). A system
crontab (--system) converts only the lines of --worker-user. The jobs have
no timeout unless --job-timeout. Workers run shell jobs only when started
with --allow-shell.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.checkOutput(); err != nil {
				return err
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
			rep := importReport{Jobs: []importedJob{}, Skipped: []crontabProblem{}, Stale: []staleJob{}, Applied: apply,
				Prefix: copts.IDPrefix, PrefixFrom: "--prefix", Timezone: copts.Timezone, TimezoneFrom: "--timezone"}
			if !cmd.Flags().Changed("prefix") {
				rep.Prefix, rep.PrefixFrom = defaultPrefix(args[0]), "the file's name"
				copts.IDPrefix = rep.Prefix
			}
			if !cmd.Flags().Changed("timezone") {
				zone, from, err := localZone()
				if err != nil {
					return err
				}
				rep.Timezone, rep.TimezoneFrom = zone, "this machine's zone, from "+from
				copts.Timezone = zone
			}
			res, err := crontab.Parse(r, copts)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			prefix := rep.Prefix
			for _, e := range res.Jobs {
				from := rep.TimezoneFrom
				if e.ZoneLine > 0 {
					from = fmt.Sprintf("CRON_TZ, line %d", e.ZoneLine)
				}
				rep.Jobs = append(rep.Jobs, importedJob{Line: e.Line, User: e.User, Job: e.Job, ZoneFrom: from, Action: actionUnknown})
			}
			for _, p := range res.Skipped {
				rep.Skipped = append(rep.Skipped, crontabProblem{Line: p.Line, Text: p.Text, Reason: p.Reason})
			}
			former := !cmd.Flags().Changed("prefix")
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) error {
				return planImport(ctx, c, &rep, prefix, former, prune)
			}); err != nil {
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
			if opts.structured() {
				if err := printDoc(cmd.OutOrStdout(), opts.output, rep); err != nil {
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
	fs.Var(&timeoutFlag{d: &copts.Timeout}, "job-timeout", `time limit of each attempt of the jobs, e.g. 2h, 1s to 24h (default none: cron has no timeout; 0s is refused: leave the flag out)`)
	fs.StringVar(&copts.Timezone, "timezone", "", "IANA time zone of the machine whose cron ran the crontab, the schedules' zone until a CRON_TZ line (default: this machine's zone)")
	fs.StringVar(&copts.IDPrefix, "prefix", "", "start of every job ID (IDs are PREFIX/...) (default: crontab/<the file's name>, so that each file's jobs, and --prune, are its own)")
	fs.StringVar((*string)(&copts.MisfirePolicy), "misfire-policy", string(api.MisfireSkip), "misfire policy of the jobs: skip (like cron), run_once or run_all")
	fs.BoolVar(&apply, "apply", false, "make the changes shown: create and update the converted jobs; without it nothing is changed")
	fs.BoolVar(&prune, "prune", false, "with --apply: also delete the jobs of earlier imports under --prefix that are no longer in the file")
	return cmd
}

// planImport compares the converted jobs with those on the server and
// sets each one's action, and lists the jobs of earlier imports under
// prefix that the file no longer has. With former (the default prefix),
// jobs of this file's lines imported under the former default prefix
// (crontab/, shared by every file: the same line has the same
// "<slug>-<hash>") are listed too, to delete with --prune: this import
// makes them again under the file's own prefix.
func planImport(ctx context.Context, c *client.Client, rep *importReport, prefix string, former, prune bool) error {
	existing := map[string]api.Job{}
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
	lines := map[string]bool{} // "<slug>-<hash>" of the file's jobs
	for _, e := range rep.Jobs {
		lines[strings.TrimPrefix(e.Job.ID, prefix+"/")] = true
	}
	var formers []string
	if former {
		for _, j := range jobs {
			if crontab.Owns(crontab.DefaultIDPrefix, j.ID) && lines[strings.TrimPrefix(j.ID, crontab.DefaultIDPrefix+"/")] {
				formers = append(formers, j.ID)
			}
		}
	}
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
	for _, id := range formers {
		action := actionKeep
		if prune {
			action = actionDelete
		}
		rep.Stale = append(rep.Stale, staleJob{ID: id, Action: action, Former: true})
	}
	return nil
}

// sameImport reports whether a stored job is what an import would make of
// its line: the fields an import sets are equal (pausing is the user's).
func sameImport(stored, converted api.Job) bool {
	view := func(j api.Job) []byte {
		b, _ := json.Marshal(api.Job{
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
	fmt.Fprintf(w, "IDs under %s/ (from %s); schedules before any CRON_TZ line in %s (%s)\n", cell(rep.Prefix), rep.PrefixFrom, cell(rep.Timezone), rep.TimezoneFrom)
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
			zone := e.Job.Timezone
			if strings.HasPrefix(e.ZoneFrom, "CRON_TZ") {
				zone += " (" + e.ZoneFrom + ")"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s", e.Line, e.Action, cell(e.Job.ID), cell(e.Job.Schedule), cell(zone), cell(user), e.Job.Timeout, cell(command))
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
			if s.Former {
				line += "  (this file's line, imported under the former default prefix " + crontab.DefaultIDPrefix + "/; made again under " + cell(rep.Prefix) + "/)"
			}
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
