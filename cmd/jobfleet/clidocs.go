package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

//go:generate go run . cli-docs ../../docs/cli

// cliDocsDir is where the CLI reference lives, from the repository's root.
const cliDocsDir = "docs/cli"

// newCLIDocsCmd is the hidden `jobfleet cli-docs DIR`: it writes the
// command-line reference (one markdown file per command, from the
// commands' own help) into DIR, replacing the markdown files there.
// `go generate ./cmd/jobfleet` runs it for docs/cli; TestCLIReference
// fails when the committed reference differs from what it writes.
func newCLIDocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "cli-docs DIR",
		Short:  "Write the command-line reference as markdown into DIR (docs/cli)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeCLIDocs(newRootCmd(), args[0])
		},
	}
}

// writeCLIDocs writes the reference of root's visible commands into dir
// (made if missing), removing markdown files there that no command
// generates any more. The output depends only on the commands: flag
// defaults that come from the machine (its temporary folder, host name)
// are written as the help says they are computed, not as their value
// here.
func writeCLIDocs(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	root.DisableAutoGenTag = true // no date: the output must be reproducible
	machineDefaults(root)
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("write the CLI reference into %s: %w", dir, err)
	}
	return nil
}

// machineDefaults replaces, in root's flags, default values that depend on
// the machine the reference is generated on (the temporary folder, as in
// dev's --data-dir) by how they are computed.
func machineDefaults(root *cobra.Command) {
	tmp := filepath.Clean(os.TempDir())
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if rest, ok := strings.CutPrefix(f.DefValue, tmp+string(filepath.Separator)); ok {
				f.DefValue = "$TMPDIR/" + rest
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
