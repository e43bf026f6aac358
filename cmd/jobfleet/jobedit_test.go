package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// withEditor makes job edit run edit on the file instead of an editor.
func withEditor(t *testing.T, edit func(path string) error) {
	t.Helper()
	old := editFile
	editFile = func(_ *cobra.Command, path string) error { return edit(path) }
	t.Cleanup(func() { editFile = old })
}

// replaceInFile replaces old with new in the file at path.
func replaceInFile(path, old, new string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o600)
}

var keptPath = regexp.MustCompile(`kept in (\S+)`)

func TestJobEditCommand(t *testing.T) {
	c := newCLIEnv(t)
	c.mustRun("create", "--id", "e/1", "--schedule", "@hourly", "--shell", "true")
	orig, err := c.get("e/1")
	if err != nil {
		t.Fatal(err)
	}
	var opened string
	withEditor(t, func(path string) error {
		opened = path
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("the file to edit has mode %v, want 0600", st.Mode().Perm())
		}
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), `"state"`) || !strings.Contains(string(b), `"revision"`) {
			t.Errorf("the document to edit: got\n%s\nwant the revision and no state", b)
		}
		return nil
	})
	if out := c.mustRun("edit", "e/1"); !strings.Contains(out, "unchanged") {
		t.Errorf("edit without a change: got %q", out)
	}
	if j, _ := c.get("e/1"); j.Revision != orig.Revision {
		t.Errorf("an unchanged edit wrote: revision %d, want %d", j.Revision, orig.Revision)
	}
	if _, err := os.Stat(opened); !os.IsNotExist(err) {
		t.Errorf("the temporary file %s stays after an unchanged edit (%v)", opened, err)
	}

	// Only white space changed: nothing to save.
	withEditor(t, func(path string) error {
		return replaceInFile(path, `"schedule": "@hourly"`, `"schedule":    "@hourly"`)
	})
	if out := c.mustRun("edit", "e/1"); !strings.Contains(out, "unchanged") {
		t.Errorf("edit of white space: got %q", out)
	}

	// An edit is saved; the file goes.
	withEditor(t, func(path string) error {
		opened = path
		return replaceInFile(path, `"@hourly"`, `"@daily"`)
	})
	if out := c.mustRun("edit", "e/1"); !strings.HasPrefix(out, `edited job "e/1"`) {
		t.Errorf("edit: got %q", out)
	}
	edited, _ := c.get("e/1")
	if edited.Schedule != "@daily" || !edited.CreatedAt.Equal(orig.CreatedAt) {
		t.Errorf("after edit: got schedule %q created %v", edited.Schedule, edited.CreatedAt)
	}
	if _, err := os.Stat(opened); !os.IsNotExist(err) {
		t.Errorf("the temporary file %s stays after a saved edit", opened)
	}

	// Invalid edits and concurrent changes save nothing and keep the file.
	for _, tc := range []struct {
		name  string
		edit  func(path string) error
		wants []string
	}{
		{"invalid", func(path string) error { return replaceInFile(path, `"@daily"`, `"61 * * * *"`) }, []string{"schedule:", "nothing was saved"}},
		{"not JSON", func(path string) error { return replaceInFile(path, `{`, `{{`) }, []string{"nothing was saved"}},
		{"other ID", func(path string) error { return replaceInFile(path, `"e/1"`, `"e/2"`) }, []string{`names job "e/2"`}},
		{"changed meanwhile", func(path string) error {
			j, err := c.get("e/1")
			if err != nil {
				return err
			}
			j.Paused = true
			if _, _, err := c.store.Put(context.Background(), j); err != nil {
				return err
			}
			return replaceInFile(path, `"@daily"`, `"@weekly"`)
		}, []string{"changed since you opened it", "stale revision"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withEditor(t, tc.edit)
			before, _ := c.get("e/1")
			out, err := c.run("", "edit", "e/1")
			if err == nil {
				t.Fatalf("got success %q, want an error", out)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
			m := keptPath.FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("the error %q does not say where the edit is kept", err)
			}
			if _, err := os.Stat(m[1]); err != nil {
				t.Errorf("the kept edit %s: %v", m[1], err)
			}
			os.Remove(m[1])
			if after, _ := c.get("e/1"); after.Schedule != before.Schedule || after.Paused != before.Paused && tc.name != "changed meanwhile" {
				t.Errorf("a refused edit changed the job: %+v", after)
			}
		})
	}
	if j, _ := c.get("e/1"); j.Schedule != "@daily" || !j.Paused {
		t.Errorf("the concurrent change was lost: schedule %q paused %v", j.Schedule, j.Paused)
	}
}

// TestJobEditRunsTheEditor: $VISUAL, with its arguments, edits the file.
func TestJobEditRunsTheEditor(t *testing.T) {
	// The edit a failed editor leaves is kept in $TMPDIR: the test's own.
	t.Setenv("TMPDIR", t.TempDir())
	c := newCLIEnv(t)
	c.mustRun("create", "--id", "e/2", "--schedule", "@hourly", "--shell", "true")
	t.Setenv("VISUAL", `sed -i 's/@hourly/@weekly/'`)
	if out := c.mustRun("edit", "e/2"); !strings.HasPrefix(out, `edited job "e/2"`) {
		t.Errorf("edit: got %q", out)
	}
	if j, _ := c.get("e/2"); j.Schedule != "@weekly" {
		t.Errorf("after edit with $VISUAL: schedule %q", j.Schedule)
	}
	t.Setenv("VISUAL", "false")
	c.mustFail([]string{"edit", "e/2"}, `editor "false"`)
}
