package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jobfleet/jobfleet/bench"
	"github.com/jobfleet/jobfleet/bench/report"
)

// benchCommands builds the subcommands of `jobfleet bench`; each benchmark
// adds its constructor from an init function in its own file.
var benchCommands []func() *cobra.Command

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run jobfleet's benchmarks and fault-injection runs (docs/benchmarks.md, docs/reliability.md)",
	}
	for _, sub := range benchCommands {
		cmd.AddCommand(sub())
	}
	requireSubcommand(cmd)
	return cmd
}

// requireSubcommand makes a command group fail on a missing or unknown
// subcommand instead of printing its help and exiting 0, so a typo in a
// script is not mistaken for success.
func requireSubcommand(cmd *cobra.Command) {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			cmd.Help()
			return fmt.Errorf("%s needs a subcommand", cmd.CommandPath())
		}
		return fmt.Errorf("unknown command %q for %q; see %s --help", args[0], cmd.CommandPath(), cmd.CommandPath())
	}
}

// writeBenchResult prints res's tables to w and writes them, res as JSON
// and the charts that charts draws into dir (report.WriteAll), then a
// line naming how long the run took and every file written.
func writeBenchResult(w io.Writer, dir, name string, res any, tables []*report.Table, charts func(dir string) ([]string, error), took time.Duration) error {
	files, err := report.WriteAll(w, dir, name, res, tables)
	if err != nil {
		return err
	}
	drawn, err := charts(dir)
	if err != nil {
		return err
	}
	files = append(files, drawn...)
	fmt.Fprintf(w, "took %v; wrote %s\n", took.Round(time.Second), strings.Join(files, ", "))
	return nil
}

// benchFlags are the flags the measuring `jobfleet bench` commands share:
// where the results go (--out), whether progress shows (--quiet) and
// whether etcd fsyncs (--no-fsync).
type benchFlags struct {
	out     string
	quiet   bool
	noFsync bool
}

// add registers the flags on fs; files says what --out receives and
// noFsync is --no-fsync's help.
func (b *benchFlags) add(fs *pflag.FlagSet, files, noFsync string) {
	fs.BoolVar(&b.noFsync, "no-fsync", false, noFsync)
	fs.StringVar(&b.out, "out", "bench/results", "directory for "+files)
	fs.BoolVar(&b.quiet, "quiet", false, "no progress on stderr")
}

// progress returns the progress display on stderr, nil with --quiet.
func (b *benchFlags) progress() *bench.Progress {
	if b.quiet {
		return nil
	}
	return bench.NewProgress(os.Stderr)
}

// childSetup returns what a benchmark that starts processes of this binary
// needs: the binary's path, and dir, or a new temporary directory when dir
// is "" that cleanup removes (cleanup does nothing otherwise). Errors: the
// binary cannot be found, or the directory cannot be made.
func childSetup(bench, dir string) (binary, d string, cleanup func(), err error) {
	binary, err = os.Executable()
	if err != nil {
		return "", "", nil, fmt.Errorf("bench %s: the jobfleet binary: %w", bench, err)
	}
	if dir != "" {
		return binary, dir, func() {}, nil
	}
	if d, err = os.MkdirTemp("", "jobfleet-bench-"+bench+"-"); err != nil {
		return "", "", nil, err
	}
	return binary, d, func() { os.RemoveAll(d) }, nil
}
