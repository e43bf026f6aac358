package main

import (
	"fmt"

	"github.com/spf13/cobra"
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
