package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/internal/buildinfo"
)

// newVersionCmd is `jobfleet version`: the build's version, commit and Go
// version.
func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Get()
			switch output {
			case "json", "yaml":
				return printDoc(cmd.OutOrStdout(), output, info)
			case "table":
				commit := info.Commit
				if info.Modified {
					commit += " (modified)"
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "version  %s\ncommit   %s\ngo       %s %s\n", info.Version, commit, info.GoVersion, info.Platform)
				return err
			default:
				return fmt.Errorf("--output must be table, json or yaml, got %q", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	return cmd
}

// buildFields are the log fields naming the running build.
func buildFields() []zap.Field {
	info := buildinfo.Get()
	return []zap.Field{zap.String("version", info.Version), zap.String("commit", info.Commit), zap.String("go_version", info.GoVersion)}
}

// flagInfo describes one flag of one command in `jobfleet flags`.
type flagInfo struct {
	// Name is the flag's long name, without dashes.
	Name string `json:"name"`
	// Shorthand is its one-letter form, or "".
	Shorthand string `json:"shorthand,omitempty"`
	// Type is pflag's name of the value type: string, bool, int,
	// duration, stringSlice, float64, …
	Type string `json:"type"`
	// Default is the default value as --help prints it.
	Default string `json:"default"`
	// Env is the environment variable the flag is also read from.
	Env string `json:"env"`
	// Usage is the flag's help text.
	Usage string `json:"usage"`
}

// commandFlags is one command of `jobfleet flags`.
type commandFlags struct {
	// Command is the command's path below jobfleet ("orchestrator",
	// "job create").
	Command string `json:"command"`
	// Hidden is true for commands --help does not list.
	Hidden bool       `json:"hidden,omitempty"`
	Flags  []flagInfo `json:"flags"`
}

// newFlagsCmd is the hidden `jobfleet flags`: every command with
// its flags and their environment variables, as JSON, so that tests and
// tools check deployment files (unit files, manifests, compose files)
// against the flags this binary really has.
func newFlagsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "flags",
		Short:  "Print every command's flags and environment variables as JSON (for tools)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printJSON(cmd.OutOrStdout(), listFlags(cmd.Root()))
		},
	}
}

// listFlags returns the commands below root that do something (runnable,
// without subcommands) with their flags, sorted by command path.
func listFlags(root *cobra.Command) []commandFlags {
	var out []commandFlags
	var walk func(c *cobra.Command, hidden bool)
	walk = func(c *cobra.Command, hidden bool) {
		hidden = hidden || c.Hidden
		if c.Runnable() && !c.HasSubCommands() && c != root {
			cf := commandFlags{Command: strings.TrimPrefix(c.CommandPath(), root.Name()+" "), Hidden: hidden, Flags: []flagInfo{}}
			seen := map[string]bool{}
			add := func(f *pflag.Flag) {
				if seen[f.Name] || f.Name == "help" {
					return
				}
				seen[f.Name] = true
				cf.Flags = append(cf.Flags, flagInfo{
					Name: f.Name, Shorthand: f.Shorthand, Type: f.Value.Type(), Default: f.DefValue,
					Env: envName(f.Name), Usage: f.Usage,
				})
			}
			c.LocalFlags().VisitAll(add)
			c.InheritedFlags().VisitAll(add)
			sort.Slice(cf.Flags, func(i, j int) bool { return cf.Flags[i].Name < cf.Flags[j].Name })
			out = append(out, cf)
		}
		for _, sub := range c.Commands() {
			walk(sub, hidden)
		}
	}
	walk(root, false)
	sort.Slice(out, func(i, j int) bool { return out[i].Command < out[j].Command })
	return out
}
