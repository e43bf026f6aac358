package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/client"
)

// editFile runs the user's editor on path, attached to the command's
// standard streams. Tests replace it.
var editFile = func(cmd *cobra.Command, path string) error {
	editor := os.Getenv("VISUAL")
	if editor == "" {
		editor = os.Getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	// Through the shell, so that an editor with arguments ("code --wait")
	// works; the path goes as an argument, never into the command line.
	c := exec.CommandContext(cmd.Context(), "/bin/sh", "-c", editor+` "$1"`, "jobfleet-edit", path)
	c.Stdin, c.Stdout, c.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	if err := c.Run(); err != nil {
		return fmt.Errorf("editor %q: %w", editor, err)
	}
	return nil
}

// editable returns job j as the document to edit: what job get -o json
// shows, without the fields the server sets and ignores, but with the
// revision, so that saving replaces only the version edited.
func editable(j api.Job) ([]byte, error) {
	j.State, j.Partition = nil, 0
	var doc map[string]json.RawMessage
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	for _, k := range []string{"partition", "created_at", "updated_at", "state"} {
		delete(doc, k)
	}
	b, err = json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), err
}

func newJobEditCmd(opts *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "edit ID",
		Short: "Edit a job's document in $VISUAL or $EDITOR (default vi) and save it, unless someone changed the job meanwhile",
		Long: `Fetch the job, open its document in $VISUAL, else $EDITOR, else vi (a
temporary file readable by you only), check the edited document here, and
save it with the revision it was read at: if the job changed meanwhile,
nothing is saved and the edited file is kept (its path is printed), so
the edit is not lost. An edit that is not a valid job document is kept
the same way. Nothing is written if the document is unchanged.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			j, err := fetch(cmd, opts, func(ctx context.Context, c *client.Client) (api.Job, error) { return c.GetJob(ctx, id) })
			if err != nil {
				return err
			}
			before, err := editable(j)
			if err != nil {
				return err
			}
			f, err := os.CreateTemp("", "jobfleet-edit-*.json") // mode 0600
			if err != nil {
				return err
			}
			path := f.Name()
			keep := false
			defer func() {
				if !keep {
					os.Remove(path)
				}
			}()
			_, err = f.Write(before)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := editFile(cmd, path); err != nil {
				keep = true
				return fmt.Errorf("%w\n(the document is in %s)", err, path)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			edited, unchanged, err := checkEdit(id, j, before, after)
			if err != nil {
				keep = true
				return fmt.Errorf("%w\nnothing was saved; your edit is kept in %s (fix it and run: jobfleet job apply -f %s)", err, path, path)
			}
			if unchanged {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "job %q unchanged; nothing saved\n", id)
				return err
			}
			var stored api.Job
			err = opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				stored, _, err = c.PutJobJSON(ctx, id, edited)
				return err
			})
			if err != nil {
				keep = true
				if errors.Is(err, client.ErrConflict) {
					return fmt.Errorf("%w\nthe job changed since you opened it (you edited revision %d); nothing was saved, your edit is kept in %s\ncompare it with: jobfleet job get %q -o json; then set its \"revision\" to the current one and run: jobfleet job apply -f %s",
						err, j.Revision, path, id, path)
				}
				return fmt.Errorf("%w\nnothing was saved; your edit is kept in %s", err, path)
			}
			return printJobResult(cmd, opts, "edited", stored)
		},
	}
}

// checkEdit checks the edited document after (of job id, read as j and
// shown as before) here, as the server would: it must be a valid job
// document of the same ID. unchanged reports an edit that changes
// nothing the server stores. edited is the document to send.
func checkEdit(id string, j api.Job, before, after []byte) (edited []byte, unchanged bool, err error) {
	if bytes.Equal(bytes.TrimSpace(before), bytes.TrimSpace(after)) {
		return nil, true, nil
	}
	e, err := api.DecodeJob(bytes.NewReader(after), 0)
	if err != nil {
		return nil, false, err
	}
	if e.ID != id {
		return nil, false, fmt.Errorf("id: the edited document names job %q; edit only job %q here (create others with jobfleet job create)", e.ID, id)
	}
	if e.Revision == 0 {
		// Saved without a revision it would replace whatever is stored:
		// an edit is always of the version read.
		e.Revision = j.Revision
	}
	n := e
	n.Normalize()
	if err := n.Validate(api.DefaultLimits()); err != nil {
		return nil, false, err
	}
	old := j
	old.Normalize()
	if sameJob(old, n) {
		return nil, true, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(e); err != nil {
		return nil, false, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), false, nil
}

// sameJob reports whether a and b (normalized) define the same job: every
// field a client sets.
func sameJob(a, b api.Job) bool {
	clear := func(j api.Job) api.Job {
		j.Partition, j.CreatedAt, j.UpdatedAt, j.Revision, j.State = 0, time.Time{}, time.Time{}, 0, nil
		return j
	}
	ja, errA := json.Marshal(clear(a))
	jb, errB := json.Marshal(clear(b))
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
