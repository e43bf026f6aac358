// Command jobfleet is the jobfleet binary: fleet members (orchestrator),
// the all-in-one quick start (dev), and client commands over the HTTP API.
//
// It runs on unix systems: it uses signals (SIGTERM, and SIGSTOP/SIGCONT
// in the fault-injection suite), process groups, file locks and the
// open-file limit. Linux is where it is tested; CI checks that it builds
// for macOS. Programs on other platforms embed the worker library
// (dispatch/worker) instead.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"

	"github.com/jobfleet/jobfleet/internal/settings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "jobfleet:", text(err.Error()))
		stop()
		os.Exit(1)
	}
}

// logOptions are the logging settings every long-running command has.
type logOptions struct {
	level  string
	format string
}

// defaultLogOptions returns the defaults: level info, and format.
func defaultLogOptions(format string) logOptions {
	return logOptions{level: "info", format: format}
}

// register defines --log-level and --log-format, bound to o's fields.
func (o *logOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.level, "log-level", o.level, "log level: debug, info, warn or error")
	fs.StringVar(&o.format, "log-format", o.format, "log format: console or json")
}

// validate checks the level and the format.
func (o logOptions) validate() error {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(o.level)); err != nil {
		return settings.Invalid("log-level", o.level, "want debug, info, warn or error")
	}
	if o.format != "json" && o.format != "console" {
		return settings.Invalid("log-format", o.format, "want console or json")
	}
	return nil
}

func (o *logOptions) build() (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(o.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	var cfg zap.Config
	switch o.format {
	case "json":
		cfg = zap.NewProductionConfig()
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.Development = false
		cfg.DisableStacktrace = true
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
		if !term.IsTerminal(int(os.Stderr.Fd())) { // colours only for a terminal (not /dev/null, a file or a pipe)
			cfg.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
		}
	default:
		return nil, fmt.Errorf("--log-format must be console or json, got %q", o.format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	return cfg.Build()
}

// startProcess begins a long-running command (orchestrator, worker, dev):
// its logger from logs, its starting line (with the build; none for ""),
// the warnings of stray JOBFLEET_ variables, and tracing as service. stop
// ends the tracing and flushes the logger: call it when the command
// returns.
func startProcess(cmd *cobra.Command, logs logOptions, starting, service string) (lg *zap.Logger, stop func(), err error) {
	lg, err = logs.build()
	if err != nil {
		return nil, nil, err
	}
	if starting != "" {
		lg.Info(starting, buildFields()...)
	}
	warnStrayVariables(cmd, os.Environ(), lg)
	stopTracing, err := startTracing(cmd.Context(), lg, service)
	if err != nil {
		_ = lg.Sync()
		return nil, nil, err
	}
	return lg, func() { stopTracing(); _ = lg.Sync() }, nil
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "jobfleet",
		Short:         "A distributed job scheduler: a fleet of orchestrators coordinated through etcd",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd)
		},
	}
	root.AddCommand(newOrchestratorCmd(), newDevCmd(), newClusterCmd(), newJobCmd(), newCalendarCmd(), newLimitCmd(), newRunCmd(), newTokenCmd(), newContextCmd(), newBenchCmd(), newWorkerCmd(), newEtcdCmd(), newVersionCmd(), newFlagsCmd(), newCLIDocsCmd())
	return root
}

// bindEnv sets every flag the user did not give from the environment
// variable JOBFLEET_<FLAG_NAME> (upper case, dashes as underscores), e.g.
// --etcd-endpoints from JOBFLEET_ETCD_ENDPOINTS, and marks it so that
// fromFlag and fromEnv can tell the two apart.
func bindEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := envName(f.Name)
		if v, ok := os.LookupEnv(name); ok {
			if serr := cmd.Flags().Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, serr)
				return
			}
			if f.Annotations == nil {
				f.Annotations = map[string][]string{}
			}
			f.Annotations[envAnnotation] = []string{name}
		}
	})
	return err
}

// envAnnotation marks a flag that bindEnv set from the environment.
const envAnnotation = "jobfleet-from-env"

// fromFlag reports whether flag f was given on the command line.
func fromFlag(f *pflag.Flag) bool {
	return f != nil && f.Changed && f.Annotations[envAnnotation] == nil && f.Annotations[fileAnnotation] == nil
}

// fromEnv reports whether flag f was set from its environment variable.
func fromEnv(f *pflag.Flag) bool {
	return f != nil && f.Changed && f.Annotations[envAnnotation] != nil
}

// envName is the environment variable of flag name: JOBFLEET_ and the
// name in upper case with dashes as underscores.
func envName(flag string) string {
	return "JOBFLEET_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}
