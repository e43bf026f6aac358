package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/dispatch/worker"
)

// strayVariable is a JOBFLEET_* variable of the environment that no
// setting of the command reads: most likely a misspelt one, which would
// otherwise be dropped silently.
type strayVariable struct {
	name    string   // JOBFLEET_HISTROY_MAX_RUNS
	nearest string   // the command's variable closest to it: JOBFLEET_HISTORY_MAX_RUNS
	of      []string // the other commands it is a setting of, if any
}

// strayVariables returns the JOBFLEET_* variables of environ (KEY=VALUE
// entries) that no flag of cmd reads, sorted by name. Not stray, in any
// command: the client commands' variables (JOBFLEET_SERVER,
// JOBFLEET_TOKEN, JOBFLEET_CONTEXT, ...: a shell that uses the CLI has
// them) and the variables a worker gives its shell jobs (JOBFLEET_RUN_ID,
// ...: a job may run jobfleet).
func strayVariables(cmd *cobra.Command, environ []string) []strayVariable {
	own := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) { own[envName(f.Name)] = true })
	legitimate := map[string]bool{worker.EnvJobID: true, worker.EnvRunID: true, worker.EnvScheduledAt: true, worker.EnvAttempt: true}
	var client clientOptions
	scratch := &cobra.Command{Use: "client"}
	client.register(scratch)
	scratch.PersistentFlags().VisitAll(func(f *pflag.Flag) { legitimate[envName(f.Name)] = true })
	// Which other commands read each variable, for the warning.
	of := map[string][]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != cmd && c.Runnable() {
			c.Flags().VisitAll(func(f *pflag.Flag) {
				path := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ") // "bench items"
				if name := envName(f.Name); !slices.Contains(of[name], path) {
					of[name] = append(of[name], path)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd.Root())

	var out []strayVariable
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "JOBFLEET_") || own[name] || legitimate[name] {
			continue
		}
		v := strayVariable{name: name, of: of[name]}
		best := -1
		for known := range own {
			if d := editDistance(name, known); best < 0 || d < best || (d == best && known < v.nearest) {
				best, v.nearest = d, known
			}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b strayVariable) int { return strings.Compare(a.name, b.name) })
	return slices.CompactFunc(out, func(a, b strayVariable) bool { return a.name == b.name })
}

// warnStrayVariables logs one warning for each of the environment's
// JOBFLEET_* variables that no setting of cmd reads (see strayVariables).
func warnStrayVariables(cmd *cobra.Command, environ []string, lg *zap.Logger) {
	for _, v := range strayVariables(cmd, environ) {
		fields := []zap.Field{zap.String("variable", v.name), zap.String("nearest", v.nearest)}
		if len(v.of) > 0 {
			fields = append(fields, zap.Strings("setting_of", v.of))
		}
		lg.Warn("environment variable matches no setting of jobfleet "+cmd.Name()+"; ignored (misspelt?)", fields...)
	}
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
