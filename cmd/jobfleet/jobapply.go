package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

// sourceDoc is one job document read by job apply, with where it was
// read.
type sourceDoc struct {
	file string
	line int
	id   string
	raw  json.RawMessage
	// after is set when the document names jobs it runs after: such a
	// job is saved on its own (PUT or POST /v1/jobs), whose write checks
	// its dependencies for cycles, never in a batch.
	after bool
}

// where names the document's place for messages: "FILE:LINE".
func (d sourceDoc) where() string { return fmt.Sprintf("%s:%d", d.file, d.line) }

// applyResult is one document's outcome, an item of job apply's -o json
// document.
type applyResult struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	ID     string `json:"id"`
	Result string `json:"result"` // created, replaced or failed
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// applyReport is job apply's -o json document when it sends batches.
type applyReport struct {
	Created  int           `json:"created"`
	Replaced int           `json:"replaced"`
	Failed   int           `json:"failed"`
	Results  []applyResult `json:"results"`
}

// applyExts are the file names job apply reads in a directory.
var applyExts = []string{".json", ".jsonl", ".ndjson"}

func newJobApplyCmd(opts *clientOptions) *cobra.Command {
	var (
		file            string
		batch, parallel int
		mode            string
	)
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or replace the jobs of job documents: a file (JSON, an array of them, or JSON Lines), a directory of such files, or - (standard input)",
		Long: `Create or replace the jobs that job documents describe: their "id" names
them; a document with a "revision" replaces only that revision of its job.

-f takes a file holding one job document, a JSON array of them, or several
(JSON Lines: one per line); a directory (every *.json, *.jsonl and *.ndjson
file under it, in name order); or - for standard input. A single document
is sent with PUT /v1/jobs/{id}; more go in batches (POST /v1/jobs:batch) of
--batch-size jobs, --parallel batches in flight. A batch is written whole
or not at all: when some of its jobs fail (invalid, stale revision), the
rest of the batch is sent again without them. A job that runs after other
jobs ("after"), or replaces one that did, is saved on its own (PUT, or POST
in create mode), whose write checks the dependencies for cycles; the jobs
it names need not exist yet. Failures are reported with
the file and line of their document; the exit status is non-zero if any
job failed. Progress goes to standard error.`,
		Example: `  jobfleet job apply -f nightly-report.json
  jobfleet job apply -f jobs.jsonl --parallel 8
  jobfleet job apply -f ./jobs/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("-f FILE is required (- reads standard input)")
			}
			if batch < 1 || batch > client.MaxBatchJobs {
				return fmt.Errorf("--batch-size must be 1 to %d, got %d", client.MaxBatchJobs, batch)
			}
			if parallel < 1 || parallel > 64 {
				return fmt.Errorf("--parallel must be 1 to 64, got %d", parallel)
			}
			if mode != client.BatchApply && mode != client.BatchCreate {
				return fmt.Errorf("--mode must be %s or %s, got %q", client.BatchApply, client.BatchCreate, mode)
			}
			docs, single, err := readApplySource(cmd, file)
			if err != nil {
				return err
			}
			if single && mode == client.BatchApply {
				return applyOne(cmd, opts, file, docs[0])
			}
			var rep applyReport
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) error {
				rep = sendBatches(ctx, c, docs, mode, batch, parallel, cmd.ErrOrStderr())
				return nil
			}); err != nil {
				return err
			}
			return printApplyReport(cmd, opts, rep)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "job documents: a file (JSON, JSON array or JSON Lines), a directory of them, or - for standard input")
	cmd.Flags().IntVar(&batch, "batch-size", client.MaxBatchJobs, fmt.Sprintf("jobs per request, 1 to %d; a batch is also cut before 1 MiB of documents (the server's limit)", client.MaxBatchJobs))
	cmd.Flags().IntVar(&parallel, "parallel", 4, "batches in flight at once, 1 to 64")
	cmd.Flags().StringVar(&mode, "mode", client.BatchApply, `apply (create or replace) or create (an existing ID fails)`)
	return cmd
}

// applyOne sends a single job document with PUT, as apply always did for
// one document.
func applyOne(cmd *cobra.Command, opts *clientOptions, name string, d sourceDoc) error {
	var (
		j       api.Job
		created bool
	)
	err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
		j, created, err = c.PutJobJSON(ctx, d.id, d.raw)
		return err
	})
	if errors.Is(err, client.ErrConflict) && strings.Contains(err.Error(), "stale revision") {
		return fmt.Errorf("%w\n(%s names the revision it was read at; see the current job with: jobfleet job get %q -o json)", err, name, d.id)
	}
	if err != nil {
		return err
	}
	verb := "replaced"
	if created {
		verb = "created"
	}
	return printJobResult(cmd, opts, verb, j)
}

// readApplySource reads the documents of -f: a file, a directory or "-".
// single reports a source that is one file holding one bare object.
func readApplySource(cmd *cobra.Command, name string) (docs []sourceDoc, single bool, err error) {
	if name == "-" {
		data, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return nil, false, fmt.Errorf("read standard input: %w", err)
		}
		return parseDocs("-", data)
	}
	st, err := os.Stat(name)
	if err != nil {
		return nil, false, err
	}
	if !st.IsDir() {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, false, err
		}
		return parseDocs(name, data)
	}
	var files []string
	err = filepath.WalkDir(name, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && slices.Contains(applyExts, strings.ToLower(filepath.Ext(path))) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if len(files) == 0 {
		return nil, false, fmt.Errorf("%s: no %s files in the directory", name, strings.Join(applyExts, ", "))
	}
	slices.Sort(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, false, err
		}
		d, _, err := parseDocs(f, data)
		if err != nil {
			return nil, false, err
		}
		docs = append(docs, d...)
	}
	return docs, false, nil
}

// parseDocs splits data, read from file, into job documents: a stream of
// JSON values, each an object (a job) or an array of objects. Each must
// have an "id"; an ID may appear once. Errors name the file and line.
func parseDocs(file string, data []byte) (docs []sourceDoc, single bool, err error) {
	lines := newLineIndex(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	add := func(raw json.RawMessage, off int64) error {
		d := sourceDoc{file: file, line: lines.at(off), raw: raw}
		if len(raw) == 0 || raw[0] != '{' {
			return fmt.Errorf("%s: not a job document (a JSON object)", d.where())
		}
		// The server's rules of JSON text, here so that the message names
		// the line: no key given twice at any depth (the ID read below
		// would be the last of two), UTF-8 only.
		if err := api.CheckJSON(raw); err != nil {
			var de *api.DecodeError
			if errors.As(err, &de) {
				return fmt.Errorf("%s:%d: %w", file, lines.at(off+de.Offset), err)
			}
			return fmt.Errorf("%s: %w", d.where(), err)
		}
		var head struct {
			ID    string          `json:"id"`
			After json.RawMessage `json:"after"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return fmt.Errorf("%s: %w", d.where(), err)
		}
		if head.ID == "" {
			return fmt.Errorf("%s: the job document has no \"id\"", d.where())
		}
		d.id = head.ID
		d.after = len(head.After) > 0 && !bytes.Equal(head.After, []byte("null")) && !bytes.Equal(bytes.TrimSpace(head.After), []byte("[]"))
		if len(raw) > api.DefaultMaxDocumentBytes {
			// The server would refuse the whole request (413) without
			// saying which of its jobs is too large.
			return fmt.Errorf("%s: job %q: the document is %d bytes; a job document takes at most %d", d.where(), d.id, len(raw), api.DefaultMaxDocumentBytes)
		}
		docs = append(docs, d)
		return nil
	}
	values := 0
	for {
		off := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			if values == 0 && looksLikeYAML(data) {
				return nil, false, fmt.Errorf("%s: %s", file, yamlNotJSON)
			}
			return nil, false, fmt.Errorf("%s:%d: not JSON: %w", file, lines.at(skipToValue(data, off)), err)
		}
		values++
		if len(raw) > 0 && raw[0] == '[' {
			arr := json.NewDecoder(bytes.NewReader(raw))
			if _, err := arr.Token(); err != nil {
				return nil, false, err
			}
			for arr.More() {
				elemOff := arr.InputOffset()
				var elem json.RawMessage
				if err := arr.Decode(&elem); err != nil {
					return nil, false, fmt.Errorf("%s:%d: %w", file, lines.at(off+elemOff), err)
				}
				if err := add(elem, skipToValue(data, off+elemOff)); err != nil {
					return nil, false, err
				}
			}
			continue
		}
		if err := add(raw, skipToValue(data, off)); err != nil {
			return nil, false, err
		}
	}
	if len(docs) == 0 {
		return nil, false, fmt.Errorf("%s: no job documents", file)
	}
	seen := map[string]string{}
	for _, d := range docs {
		if first, ok := seen[d.id]; ok {
			return nil, false, fmt.Errorf("%s: job %q is also at %s; each ID may be applied once", d.where(), d.id, first)
		}
		seen[d.id] = d.where()
	}
	return docs, values == 1 && len(docs) == 1 && data[skipToValue(data, 0)] == '{', nil
}

// skipToValue returns the offset of the first byte at or after off that
// is not white space or a comma: where a JSON value starts.
func skipToValue(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,", data[off]) >= 0 {
		off++
	}
	return off
}

// lineIndex maps byte offsets to line numbers (from 1).
type lineIndex struct{ starts []int64 }

func newLineIndex(data []byte) lineIndex {
	li := lineIndex{starts: []int64{0}}
	for i, b := range data {
		if b == '\n' {
			li.starts = append(li.starts, int64(i+1))
		}
	}
	return li
}

func (li lineIndex) at(off int64) int {
	n, found := slices.BinarySearch(li.starts, off)
	if found {
		return n + 1
	}
	return n
}

// batchJob is a batch's document with its index in the report.
type batchJob struct {
	i   int
	doc sourceDoc
}

// sendBatches writes docs in batches of size, parallel at once, and
// reports every document's outcome. Items that failed on their own are
// dropped from their batch, which is sent again without them (a batch is
// written whole or not at all).
func sendBatches(ctx context.Context, c *client.Client, docs []sourceDoc, mode string, size, parallel int, progress io.Writer) applyReport {
	rep := applyReport{Results: make([]applyResult, len(docs))}
	for i, d := range docs {
		rep.Results[i] = applyResult{File: d.file, Line: d.line, ID: d.id}
	}
	batches := make(chan []batchJob)
	var (
		mu   sync.Mutex
		done int
		wg   sync.WaitGroup
	)
	start := time.Now()
	last := start
	var alone []batchJob // documents to save one by one, after the batches
	record := func(b []batchJob, reply api.BatchReply, err error) []batchJob {
		mu.Lock()
		defer mu.Unlock()
		var again []batchJob
		for k, bj := range b {
			r := &rep.Results[bj.i]
			switch {
			case err == nil && k < len(reply.Results) && reply.Results[k].Status == http.StatusCreated:
				r.Result, r.Status = "created", http.StatusCreated
				rep.Created++
			case err == nil && k < len(reply.Results):
				r.Result, r.Status = "replaced", reply.Results[k].Status
				rep.Replaced++
			case k < len(reply.Results) && reply.Results[k].Status == http.StatusFailedDependency:
				again = append(again, bj)
				continue
			case k < len(reply.Results) && !bj.doc.after && strings.HasPrefix(reply.Results[k].Error, "after:"):
				// The stored job has after: a batch cannot replace it,
				// its own write can (and says why if it cannot either).
				bj.doc.after = true
				alone = append(alone, bj)
				continue
			case k < len(reply.Results):
				r.Result, r.Status, r.Error = "failed", reply.Results[k].Status, reply.Results[k].Error
				rep.Failed++
			default:
				r.Result, r.Error = "failed", err.Error()
				var apiErr *client.Error
				if errors.As(err, &apiErr) {
					r.Status = apiErr.StatusCode
				}
				rep.Failed++
			}
			done++
		}
		if now := time.Now(); progress != nil && (now.Sub(last) >= time.Second || done == len(docs)) {
			last = now
			fmt.Fprintf(progress, "applied %d/%d jobs (%d failed), %.0f jobs/s\n", done, len(docs), rep.Failed, float64(done)/now.Sub(start).Seconds())
		}
		return again
	}
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				for len(b) > 0 {
					raws := make([]json.RawMessage, len(b))
					for k, bj := range b {
						raws[k] = bj.doc.raw
					}
					reply, err := writeBatch(ctx, c, mode, raws)
					again := record(b, reply, err)
					if len(again) == len(b) { // nothing failed on its own: no progress to make
						if err == nil {
							err = errors.New("the server wrote none of the batch and named no failure")
						}
						record(again, api.BatchReply{}, err)
						break
					}
					b = again
				}
			}
		}()
	}
	var cur []batchJob
	curBytes := 0
	for i, d := range docs {
		if d.after {
			alone = append(alone, batchJob{i: i, doc: d})
			continue
		}
		// Stored documents of a batch must stay under the server's limit;
		// the stored form adds server fields and the key to each.
		cost := len(d.raw) + 512
		if len(cur) > 0 && (len(cur) == size || curBytes+cost > api.MaxBatchBytes) {
			select {
			case batches <- cur:
			case <-ctx.Done():
			}
			cur, curBytes = nil, 0
		}
		cur = append(cur, batchJob{i: i, doc: d})
		curBytes += cost
	}
	if len(cur) > 0 {
		select {
		case batches <- cur:
		case <-ctx.Done():
		}
	}
	close(batches)
	wg.Wait()
	for _, bj := range alone {
		reply, err := writeAlone(ctx, c, mode, bj.doc)
		record([]batchJob{bj}, reply, err)
	}
	for i := range rep.Results {
		if rep.Results[i].Result == "" {
			rep.Results[i].Result, rep.Results[i].Error = "failed", "not sent: "+context.Cause(ctx).Error()
			rep.Failed++
		}
	}
	return rep
}

// writeAlone saves one document on its own, reported as a batch of one:
// PUT in apply mode, POST /v1/jobs in create mode (an existing ID fails
// with 409). It is tried again as writeBatch is.
func writeAlone(ctx context.Context, c *client.Client, mode string, d sourceDoc) (api.BatchReply, error) {
	var created bool
	err := again(ctx, mode, func() (err error) {
		if mode == client.BatchCreate {
			_, err = c.CreateJobJSON(ctx, d.raw)
			created = err == nil
			return err
		}
		_, created, err = c.PutJobJSON(ctx, d.id, d.raw)
		return err
	})
	var apiErr *client.Error
	switch {
	case err == nil && created:
		return api.BatchReply{Results: []api.BatchResult{{ID: d.id, Status: http.StatusCreated}}}, nil
	case err == nil:
		return api.BatchReply{Results: []api.BatchResult{{ID: d.id, Status: http.StatusOK}}}, nil
	case errors.As(err, &apiErr):
		return api.BatchReply{Results: []api.BatchResult{{ID: d.id, Status: apiErr.StatusCode, Error: apiErr.Message}}}, err
	}
	return api.BatchReply{}, err
}

// writeBatch sends one batch, tried again as again says.
func writeBatch(ctx context.Context, c *client.Client, mode string, raws []json.RawMessage) (reply api.BatchReply, err error) {
	err = again(ctx, mode, func() (err error) {
		reply, err = c.WriteBatch(ctx, mode, raws)
		return err
	})
	return reply, err
}

// again calls write, and again after the server's Retry-After while it
// answers 429 (rate limit: nothing was written), and in apply mode after
// a second while it answers 503 (not ready, etcd without a leader; a
// write whose outcome is unknown is safe to repeat only there), up to 10
// tries. It returns write's last error.
func again(ctx context.Context, mode string, write func() error) error {
	for try := 1; ; try++ {
		err := write()
		var apiErr *client.Error
		if try == 10 || !errors.As(err, &apiErr) ||
			(apiErr.StatusCode != http.StatusTooManyRequests && (apiErr.StatusCode != http.StatusServiceUnavailable || mode != client.BatchApply)) {
			return err
		}
		wait := max(apiErr.RetryAfter, 100*time.Millisecond)
		if apiErr.StatusCode == http.StatusServiceUnavailable {
			wait = time.Second
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
	}
}

// printApplyReport prints the outcome of a batched apply: with -o json
// the report, else a line per failure (FILE:LINE) and a summary. It
// returns an error if any job failed.
func printApplyReport(cmd *cobra.Command, opts *clientOptions, rep applyReport) error {
	w := cmd.OutOrStdout()
	if opts.structured() {
		if err := printDoc(w, opts.output, rep); err != nil {
			return err
		}
	} else {
		for _, r := range rep.Results {
			if r.Result == "failed" {
				fmt.Fprintf(w, "%s:%d: job %s: %s\n", cell(r.File), r.Line, cell(fmt.Sprintf("%q", r.ID)), text(r.Error))
			}
		}
		fmt.Fprintf(w, "%s: %d created, %d replaced, %d failed\n", plural(len(rep.Results), "job"), rep.Created, rep.Replaced, rep.Failed)
	}
	if rep.Failed > 0 {
		return fmt.Errorf("%d of %s failed", rep.Failed, plural(len(rep.Results), "job"))
	}
	return nil
}
