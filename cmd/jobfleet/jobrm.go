package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/jobfleet/jobfleet/client"
)

// removed is the -o json document of job rm.
type removed struct {
	// Prefix, DryRun and the counts are set with --prefix.
	Prefix  string `json:"prefix,omitempty"`
	DryRun  bool   `json:"dry_run,omitempty"`
	Deleted int    `json:"deleted"`
	Gone    int    `json:"gone,omitempty"` // deleted by someone else meanwhile
	Failed  int    `json:"failed"`
	// Results has one entry per job: deleted, gone, failed or (with
	// --dry-run) "would delete".
	Results []importJobResult `json:"results"`
}

// rmParallel is how many deletions job rm --prefix has in flight.
const rmParallel = 8

func newJobRemoveCmd(opts *clientOptions) *cobra.Command {
	var (
		prefix      string
		yes, dryRun bool
	)
	cmd := &cobra.Command{
		Use: "rm ID... | rm --prefix P [--yes | --dry-run]", Aliases: []string{"delete"},
		Short: "Delete jobs, by ID or every job whose ID starts with a prefix (their runs are removed by the partition's owner)",
		Long: `Delete the jobs named, or with --prefix every job whose ID starts with P
(listed a page at a time; a scoped credential sees and deletes only jobs
within its own prefix). --prefix asks for confirmation on a terminal and
needs --yes otherwise; --dry-run lists the jobs it would delete and
deletes nothing. Jobs created under the prefix while it runs may stay.
The exit status is non-zero if any deletion failed.`,
		Example: `  jobfleet job rm nightly-report
  jobfleet job rm --prefix billing/tmp- --dry-run
  jobfleet job rm --prefix billing/tmp- --yes`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("prefix") {
				if yes || dryRun {
					return errors.New("--yes and --dry-run go with --prefix")
				}
				if len(args) == 0 {
					return errors.New("name the jobs to delete, or give --prefix")
				}
				return removeIDs(cmd, opts, args)
			}
			switch {
			case len(args) > 0:
				return errors.New("give job IDs or --prefix, not both")
			case prefix == "":
				return errors.New("--prefix must not be empty (it would delete every job)")
			case yes && dryRun:
				return errors.New("give --yes or --dry-run, not both")
			}
			return removePrefix(cmd, opts, prefix, yes, dryRun)
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "delete every job whose ID starts with this")
	cmd.Flags().BoolVar(&yes, "yes", false, "with --prefix: delete without asking")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "with --prefix: list the jobs that would be deleted, delete nothing")
	return cmd
}

// removeIDs deletes the jobs named, one request each.
func removeIDs(cmd *cobra.Command, opts *clientOptions, ids []string) error {
	var errs []error
	doc := removed{Results: []importJobResult{}}
	for _, id := range ids {
		if err := opts.call(cmd, func(ctx context.Context, c *client.Client) error { return c.DeleteJob(ctx, id) }); err != nil {
			errs = append(errs, fmt.Errorf("job %q: %w", id, err))
			doc.Results = append(doc.Results, importJobResult{ID: id, Result: "failed", Error: err.Error()})
			doc.Failed++
			continue
		}
		doc.Results = append(doc.Results, importJobResult{ID: id, Result: "deleted"})
		doc.Deleted++
		if !opts.structured() {
			fmt.Fprintf(cmd.OutOrStdout(), "deleted job %q\n", id)
		}
	}
	if opts.structured() {
		if err := printDoc(cmd.OutOrStdout(), opts.output, doc); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// removePrefix deletes every job whose ID starts with prefix.
func removePrefix(cmd *cobra.Command, opts *clientOptions, prefix string, yes, dryRun bool) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var ids []string
	if err := opts.call(cmd, func(ctx context.Context, c *client.Client) error {
		if !dryRun {
			// Every deletion would be refused alike: say so once, before
			// asking, rather than once per job after.
			me, err := c.Whoami(ctx)
			switch {
			case err == nil && me.Role != string(api.RoleOperator) && me.Role != string(api.RoleAdmin):
				return fmt.Errorf("credential %q (role %s) may not delete jobs (an operator or admin may); nothing deleted", me.Credential, me.Role)
			case err != nil && !errors.Is(err, client.ErrNotFound): // a server without whoami lets the deletions say it
				return err
			}
		}
		jobs, err := readPages(ctx, prefix, func(ctx context.Context, o client.ListOptions) ([]api.Job, string, error) {
			page, err := c.ListJobs(ctx, o)
			return page.Jobs, page.NextCursor, err
		})
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		return err
	}); err != nil {
		return err
	}
	doc := removed{Prefix: prefix, DryRun: dryRun, Results: make([]importJobResult, len(ids))}
	if dryRun {
		for i, id := range ids {
			doc.Results[i] = importJobResult{ID: id, Result: "would delete"}
		}
		if opts.structured() {
			return printDoc(out, opts.output, doc)
		}
		for _, id := range ids {
			fmt.Fprintln(out, cell(id))
		}
		_, err := fmt.Fprintf(out, "would delete %s whose ID starts with %s (dry run: nothing deleted)\n", plural(len(ids), "job"), cell(fmt.Sprintf("%q", prefix)))
		return err
	}
	if len(ids) == 0 {
		if opts.structured() {
			return printDoc(out, opts.output, doc)
		}
		_, err := fmt.Fprintf(out, "no job's ID starts with %s\n", cell(fmt.Sprintf("%q", prefix)))
		return err
	}
	if !yes {
		if !isTerminal(cmd.InOrStdin()) {
			return fmt.Errorf("refusing to delete %s whose ID starts with %q without --yes (standard input is not a terminal to ask on); --dry-run lists them", plural(len(ids), "job"), prefix)
		}
		fmt.Fprintf(errOut, "Delete %s whose ID starts with %s (%s)? Type yes to delete: ", plural(len(ids), "job"), cell(fmt.Sprintf("%q", prefix)), sampleIDs(ids))
		line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
		if strings.TrimSpace(strings.ToLower(line)) != "yes" {
			return errors.New("nothing deleted")
		}
	}
	err := opts.call(cmd, func(ctx context.Context, c *client.Client) error {
		deleteAll(ctx, c, ids, &doc, errOut)
		return nil
	})
	if err != nil {
		return err
	}
	if opts.structured() {
		if err := printDoc(out, opts.output, doc); err != nil {
			return err
		}
	} else {
		for _, r := range doc.Results {
			if r.Result == "failed" {
				fmt.Fprintf(out, "job %s: %s\n", cell(fmt.Sprintf("%q", r.ID)), text(r.Error))
			}
		}
		fmt.Fprintf(out, "deleted %s whose ID starts with %s (%d gone meanwhile, %d failed)\n", plural(doc.Deleted, "job"), cell(fmt.Sprintf("%q", prefix)), doc.Gone, doc.Failed)
	}
	if doc.Failed > 0 {
		return fmt.Errorf("%d of %s failed", doc.Failed, plural(len(ids), "deletion"))
	}
	return nil
}

// deleteAll deletes ids, rmParallel at a time, recording each outcome in
// doc (a job already gone is counted as such, not as a failure), with
// progress on progress about once a second.
func deleteAll(ctx context.Context, c *client.Client, ids []string, doc *removed, progress io.Writer) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next int
		done int
	)
	start, last := time.Now(), time.Now()
	for range rmParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(ids) {
					return
				}
				err := c.DeleteJob(ctx, ids[i])
				mu.Lock()
				switch {
				case err == nil:
					doc.Results[i] = importJobResult{ID: ids[i], Result: "deleted"}
					doc.Deleted++
				case errors.Is(err, client.ErrNotFound):
					doc.Results[i] = importJobResult{ID: ids[i], Result: "gone"}
					doc.Gone++
				default:
					doc.Results[i] = importJobResult{ID: ids[i], Result: "failed", Error: err.Error()}
					doc.Failed++
				}
				done++
				if now := time.Now(); now.Sub(last) >= time.Second {
					last = now
					fmt.Fprintf(progress, "deleted %d/%d jobs (%d failed), %.0f/s\n", done, len(ids), doc.Failed, float64(done)/now.Sub(start).Seconds())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// sampleIDs names a few of ids for a confirmation question.
func sampleIDs(ids []string) string {
	const show = 3
	var q []string
	for _, id := range ids[:min(show, len(ids))] {
		q = append(q, cell(fmt.Sprintf("%q", id)))
	}
	if len(ids) > show {
		q = append(q, "…")
	}
	return strings.Join(q, ", ")
}

// isTerminal reports whether r is a terminal. A character device is not
// enough: /dev/null, the standard input of cron jobs and CI steps, is
// one too.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
