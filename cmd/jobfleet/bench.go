package main

import "github.com/spf13/cobra"

// benchCommands builds the subcommands of `jobfleet bench`; each benchmark
// adds its constructor from an init function in its own file.
var benchCommands []func() *cobra.Command

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run jobfleet's benchmarks and fault-injection runs (see docs/benchmarks.md, docs/reliability.md)",
	}
	for _, sub := range benchCommands {
		cmd.AddCommand(sub())
	}
	return cmd
}
