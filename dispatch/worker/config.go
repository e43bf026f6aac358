package worker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/placement"
	"github.com/jobfleet/jobfleet/egress"
	"github.com/jobfleet/jobfleet/internal/settings"
)

// Errors returned by this package. Callers compare with errors.Is.
var (
	// ErrInvalidConfig means a Config failed validation.
	ErrInvalidConfig = errors.New("worker: invalid config")
	// ErrInvalidHandler means Handle was given a bad name or a nil handler,
	// or a name that is already registered.
	ErrInvalidHandler = errors.New("worker: invalid handler")
	// ErrAlreadyRun means Run was called more than once on a Worker.
	ErrAlreadyRun = errors.New("worker: Run called twice")
	// ErrLabelsRefused is what Run returns when an orchestrator refuses
	// the worker's registration because its labels (Config.Labels) are
	// outside what its credential allows (jobfleet token create
	// --worker-labels): the worker stops at once, saying so, rather than
	// run without the registration its labels need. The error names the
	// orchestrator and its reason.
	ErrLabelsRefused = errors.New("worker: labels refused by the worker's credential")
	// ErrNothingToServe is what Run returns for a worker that serves no
	// executor type: no handler registered (Handle, before Run), and
	// neither Config.ServeHTTP nor Config.AllowShell.
	ErrNothingToServe = errors.New("worker: serves no executor type: register a handler with Handle before Run, or set ServeHTTP (the built-in http executor) or AllowShell")
	// ErrCredentialRefused is what Run returns when the orchestrators
	// refuse the worker's credentials (401 or 403 to its registration,
	// polls or members-list reads) from its start on, for 5 seconds,
	// without ever accepting its registration or a poll (a members-list
	// read that succeeds does not count: a viewer may make one): a worker started without a valid
	// credential stops, saying so, instead of retrying forever. The error
	// names the orchestrator and wraps its *CredentialError. A worker whose
	// credentials were accepted once logs later refusals and keeps
	// retrying (the credential may be restored; a revoked one is refused
	// everywhere, so the worker takes no new attempt).
	ErrCredentialRefused = errors.New("worker: credentials refused")
)

// Limits of the configuration.
const (
	// MaxIDBytes is the longest worker ID.
	MaxIDBytes = 128
	// MaxConcurrency is the largest Config.Concurrency.
	MaxConcurrency = 1024
	// maxHandlerBytes is the longest handler name (as for job executor
	// types).
	maxHandlerBytes = 64
	// maxHandlers is the most handlers a worker registers: with "http"
	// and "shell", what a registration may list.
	maxHandlers = api.MaxRegisterExecutors - 2
)

// Config configures a Worker. New fills every zero field from
// DefaultConfig, then calls Validate. Its settings follow the zero
// convention of package settings: 0 is the default, a negative number or
// duration is refused.
type Config struct {
	// ID identifies the worker in the attempts it takes: 1 to MaxIDBytes
	// bytes of UTF-8 without control characters or spaces. Required; use
	// something stable and unique per process, such as host name and PID.
	ID string
	// Orchestrators says which orchestrators to poll: StaticOrchestrators,
	// MembersFrom (follows GET /v1/cluster/members), etcddiscovery.New, or
	// any other Discovery. Required.
	Orchestrators Discovery
	// Concurrency is the number of attempts the worker runs at once, 1 to
	// MaxConcurrency; default 4. An attempt holds a slot from the poll
	// that returns it until its executor has returned; its result is then
	// reported while the slot serves the next attempt. At most Concurrency
	// results are reported at once: past that, an attempt keeps its slot
	// until its result is reported (or dropped).
	Concurrency int
	// ServeHTTP enables the built-in "http" executor: the worker
	// advertises "http" and takes the fleet's HTTP jobs (within its
	// credential's scope and its labels). Without it, a program embedding
	// the library serves only the handlers it registers (and "shell" with
	// AllowShell), and reports any http attempt it is handed as failed.
	// `jobfleet worker` sets it.
	ServeHTTP bool
	// Labels are the worker's labels, part of its registration: jobs'
	// placement selectors ("pool=gpu,region in (eu-west,eu-central)")
	// match them, and the worker is handed only runs of jobs whose
	// selector they match (or that have none). Keys and values follow
	// Kubernetes' label rules (package dispatch/placement), at most
	// placement.MaxLabels. The worker's credential may be limited to
	// labels (jobfleet token create --worker-labels): a registration with
	// others is refused. Nil: no labels.
	Labels map[string]string
	// AllowShell enables the "shell" executor. Without it the worker does
	// not advertise "shell" and reports any shell attempt it is handed as
	// failed. With it, on Linux, Run makes the whole process non-dumpable
	// (prctl PR_SET_DUMPABLE 0) before it polls, so that commands, which
	// run as the worker's user, cannot read the worker's environment
	// (its token, its secrets) or memory through /proc; root still can.
	// Commands can read whatever else the worker's user can, such as its
	// token file.
	AllowShell bool
	// PollWait is how long each long poll may be held by an orchestrator
	// when it has nothing to hand out; default 15s, at most
	// api.MaxPollWait. Every poll holds at least one slot while it
	// waits, so while the worker polls more orchestrators than it has
	// slots, polls are held at most 1s and the orchestrators take turns;
	// give a worker at least as many slots as there are orchestrators.
	PollWait time.Duration
	// ShutdownTimeout is how long Run, once its context is cancelled, lets
	// in-flight attempts finish before it cancels them and reports them
	// failed ("worker shutting down"); default 30s.
	ShutdownTimeout time.Duration
	// CancelGrace is how long an attempt waits for its executor to return
	// after cancelling it (timeout, cancellation, shutdown) before it
	// reports the attempt without the executor's result; default 5s. The
	// executor's goroutine is still waited for (it keeps its slot), so a
	// handler that ignores its context delays Run's return but never holds
	// an attempt silently.
	CancelGrace time.Duration
	// KillGrace is how long a shell command's process group has between
	// SIGTERM and SIGKILL when its attempt is cancelled; default 2s.
	KillGrace time.Duration
	// ReportTimeout bounds the delivery of one completion, retries and
	// redirects included; default 1m. An undelivered completion is logged;
	// the orchestrator retries the run when the attempt's lease expires.
	ReportTimeout time.Duration
	// OutputPushInterval is how often a running attempt's new output is
	// pushed to the orchestrator (POST /v1/worker/output, best-effort;
	// also as soon as 16 KiB wait). Negative: never (the output still
	// comes with the completion). Default 250ms.
	OutputPushInterval time.Duration
	// RequestTimeout bounds each heartbeat and completion request; default
	// 10s. Polls are bounded by PollWait plus RequestTimeout.
	RequestTimeout time.Duration
	// RetryInitial and RetryMax bound the exponential back-off (with
	// jitter) between failed polls and failed reports; defaults 500ms and
	// 30s.
	RetryInitial time.Duration
	RetryMax     time.Duration
	// Token is the worker's credential: a bearer token sent to the
	// orchestrators ("Authorization: Bearer <token>") with every protocol
	// request and every read of the members list. Empty sends none. It
	// must be printable ASCII without spaces.
	Token string
	// TLS configures HTTPS to the orchestrators: the CA bundle that
	// verifies them (RootCAs) and a client certificate. Nil means Go's
	// defaults (the system's roots, no client certificate). Not used when
	// HTTPClient is set: configure that client's transport instead.
	TLS *tls.Config
	// HTTPClient talks the worker protocol to orchestrators; nil means a
	// client of the worker's own with TLS (idle connections closed when
	// Run returns). Its Timeout should be 0: requests carry their own.
	HTTPClient *http.Client
	// HTTPPolicy says where the "http" executor may connect: by default
	// anywhere but loopback, link-local, unspecified, multicast and
	// broadcast addresses and the fleet's own endpoints. See egress.Policy.
	HTTPPolicy egress.Policy
	// ShellEnv names variables of the worker's environment that shell
	// commands get as well. Without them a command's environment is PATH
	// (a fixed default, unless ShellEnv lists PATH), HOME and LANG (the
	// worker's, if set) and the JOBFLEET_* variables of its run, never the
	// worker's settings or secrets. Names are letters, digits and '_';
	// names starting with JOBFLEET_ are refused (they are the worker's
	// settings, such as JOBFLEET_TOKEN).
	ShellEnv []string
	// SecretEnv names the variables of the worker's environment that
	// secret references ({"secret_env": "NAME"} in header values, payloads
	// and bodies) may name; a reference to any other variable fails the
	// attempt. Same rules for names as ShellEnv.
	SecretEnv []string
	// Clock times heartbeats, attempt timeouts, back-off and shutdown;
	// nil means the real clock.
	Clock clockwork.Clock
	// Logger receives one info line per attempt start and per result,
	// warnings on protocol trouble, and debug lines per poll; nil means no
	// logs.
	Logger *zap.Logger
	// Metrics records attempt counts; nil records nothing. See NewMetrics.
	Metrics *Metrics
}

// DefaultConfig returns a Config with every default set. ID and
// Orchestrators must still be filled in; ServeHTTP and AllowShell are
// off, Labels empty.
func DefaultConfig() Config {
	return Config{
		Concurrency:     4,
		PollWait:        15 * time.Second,
		ShutdownTimeout: 30 * time.Second,
		CancelGrace:     5 * time.Second,
		KillGrace:       2 * time.Second,
		ReportTimeout:   time.Minute,
		RequestTimeout:  10 * time.Second,
		RetryInitial:    500 * time.Millisecond,
		RetryMax:        30 * time.Second,

		OutputPushInterval: 250 * time.Millisecond,
	}
}

// WithDefaults returns c with its zero settings filled from
// DefaultConfig (the clock and the logger as they are).
func (c Config) WithDefaults() Config {
	clock, lg := c.Clock, c.Logger
	c.setDefaults()
	c.Clock, c.Logger = clock, lg
	return c
}

// setDefaults fills the zero fields of c from DefaultConfig.
func (c *Config) setDefaults() {
	d := DefaultConfig()
	settings.Default(&c.Concurrency, d.Concurrency)
	settings.Default(&c.PollWait, d.PollWait)
	settings.Default(&c.ShutdownTimeout, d.ShutdownTimeout)
	settings.Default(&c.CancelGrace, d.CancelGrace)
	settings.Default(&c.KillGrace, d.KillGrace)
	settings.Default(&c.ReportTimeout, d.ReportTimeout)
	settings.Default(&c.RequestTimeout, d.RequestTimeout)
	settings.Default(&c.RetryInitial, d.RetryInitial)
	settings.Default(&c.RetryMax, d.RetryMax)
	settings.Default(&c.OutputPushInterval, d.OutputPushInterval)
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// AddFlags defines the flags of c's settings in fs, each bound to its
// field with the field's current value as its default (call it on
// DefaultConfig): --concurrency, --allow-shell, --poll-wait,
// --shutdown-timeout, --token (a secret), --http-allow, --http-deny,
// --http-proxy-from-env, --shell-env, --secret-env and --labels. ID,
// Orchestrators and TLS are the command's (derived, or read from files),
// ServeHTTP too (jobfleet worker sets it).
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, fmt.Sprintf("attempts run at once (1 to %d; as many more may be reporting their results); use at least the number of orchestrators", MaxConcurrency))
	fs.Var(&labelsFlag{&c.Labels}, "labels", fmt.Sprintf("the worker's labels, which jobs' placement selectors match: key=value,... (Kubernetes' label rules, at most %d), e.g. pool=gpu,region=eu-west", placement.MaxLabels))
	fs.BoolVar(&c.AllowShell, "allow-shell", c.AllowShell, `run jobs with the "shell" executor (commands run as this process's user)`)
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "on SIGINT/SIGTERM, how long in-flight attempts may finish before they are cancelled and reported failed")
	fs.DurationVar(&c.PollWait, "poll-wait", c.PollWait, fmt.Sprintf("how long an orchestrator may hold a long poll (at most %v)", api.MaxPollWait))
	fs.StringVar(&c.Token, "token", c.Token, "the worker's credential: bearer token sent to the orchestrators (prefer --token-file or JOBFLEET_TOKEN: arguments are visible to other users)")
	settings.Secret(fs, "token")
	fs.StringSliceVar(&c.HTTPPolicy.Allow, "http-allow", c.HTTPPolicy.Allow, "destinations the http executor may reach although denied by default (loopback, link-local, ...): CIDRs, addresses or host names (*.example.com), each with an optional :PORT; comma separated, repeatable")
	fs.StringSliceVar(&c.HTTPPolicy.Deny, "http-deny", c.HTTPPolicy.Deny, "destinations the http executor must never reach, as for --http-allow; beats --http-allow")
	fs.BoolVar(&c.HTTPPolicy.ProxyFromEnvironment, "http-proxy-from-env", c.HTTPPolicy.ProxyFromEnvironment, "send the http executor's requests through HTTP_PROXY/HTTPS_PROXY (the policy then checks destinations by URL, not by resolved address)")
	fs.StringSliceVar(&c.ShellEnv, "shell-env", c.ShellEnv, "variables of this process's environment that shell commands get too (NAME,...; not JOBFLEET_*)")
	fs.StringSliceVar(&c.SecretEnv, "secret-env", c.SecretEnv, `variables of this process's environment that jobs' secret references {"secret_env": "NAME"} may name (NAME,...; not JOBFLEET_*)`)
}

// Validate reports the first problem with c, wrapping ErrInvalidConfig,
// after filling its zero fields from DefaultConfig as New does; a
// setting with a flag is reported as a *settings.Error naming it.
func (c *Config) Validate() error {
	cc := *c
	cc.setDefaults()
	return cc.validate()
}

func (c *Config) validate() error {
	bad, invalid := settings.Refusals(ErrInvalidConfig)
	if err := validateID(c.ID); err != nil {
		return invalid("id", c.ID, "%v", err)
	}
	if c.Orchestrators == nil {
		return bad("no orchestrator source: set Orchestrators (StaticOrchestrators, MembersFrom or etcddiscovery.New)")
	}
	if v, ok := c.Orchestrators.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return bad("orchestrators: %v", err)
		}
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		return invalid("concurrency", c.Concurrency, "want 1 to %d (0: the default, %d)", MaxConcurrency, DefaultConfig().Concurrency)
	}
	if c.PollWait <= 0 || c.PollWait > api.MaxPollWait {
		return invalid("poll-wait", c.PollWait, "want a positive duration of at most %v (0: the default, %v)", api.MaxPollWait, DefaultConfig().PollWait)
	}
	if c.ShutdownTimeout <= 0 {
		return invalid("shutdown-timeout", c.ShutdownTimeout, "want a positive duration (0: the default, %v)", DefaultConfig().ShutdownTimeout)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"cancel grace", c.CancelGrace},
		{"kill grace", c.KillGrace},
		{"report timeout", c.ReportTimeout},
		{"request timeout", c.RequestTimeout},
		{"retry initial", c.RetryInitial},
		{"retry max", c.RetryMax},
	} {
		if d.v <= 0 {
			return bad("%s must be positive, got %v", d.name, d.v)
		}
	}
	if c.RetryMax < c.RetryInitial {
		return bad("retry max %v is below retry initial %v", c.RetryMax, c.RetryInitial)
	}
	if c.ReportTimeout < c.RequestTimeout {
		return bad("report timeout %v is below request timeout %v: not even one report could complete", c.ReportTimeout, c.RequestTimeout)
	}
	if err := placement.ValidateLabels(c.Labels); err != nil {
		return invalid("labels", placement.FormatLabels(c.Labels), "%s", strings.TrimPrefix(err.Error(), placement.ErrInvalid.Error()+": "))
	}
	for i, r := range c.Token {
		if r <= ' ' || r >= 0x7f {
			return invalid("token", settings.Redacted, "character %d is not printable ASCII (a space, a newline, a control character?)", i)
		}
	}
	if _, err := egress.NewGuard(egress.Policy{Allow: c.HTTPPolicy.Allow}); err != nil {
		return invalid("http-allow", c.HTTPPolicy.Allow, "%v", err)
	}
	if _, err := egress.NewGuard(egress.Policy{Deny: c.HTTPPolicy.Deny}); err != nil {
		return invalid("http-deny", c.HTTPPolicy.Deny, "%v", err)
	}
	if _, err := egress.NewGuard(c.HTTPPolicy); err != nil {
		return bad("%v", err)
	}
	for _, list := range []struct {
		key   string
		names []string
	}{{"shell-env", c.ShellEnv}, {"secret-env", c.SecretEnv}} {
		for _, name := range list.names {
			if err := validateEnvName(name); err != nil {
				return invalid(list.key, list.names, "%v", err)
			}
		}
	}
	return nil
}

// validateEnvName checks a name of ShellEnv or SecretEnv.
func validateEnvName(name string) error {
	if name == "" || len(name) > 256 {
		return fmt.Errorf("variable name %q must be 1 to 256 bytes", name)
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return fmt.Errorf("variable name %q: want letters, digits and '_', not starting with a digit", name)
		}
	}
	if strings.HasPrefix(strings.ToUpper(name), "JOBFLEET_") {
		return fmt.Errorf("variable %s is refused: JOBFLEET_* variables are the worker's own settings and secrets", name)
	}
	return nil
}

func validateID(id string) error {
	if id == "" || len(id) > MaxIDBytes {
		return fmt.Errorf("worker ID must be 1 to %d bytes, got %d", MaxIDBytes, len(id))
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("worker ID %q is not valid UTF-8", id)
	}
	for _, r := range id {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("worker ID %q contains a space or control character", id)
		}
	}
	return nil
}

// validHandlerName reports whether name can be a handler's executor type:
// letters, digits, '-', '_', '.' and ':', starting with a letter, at most
// 64 bytes, and neither "http" nor "shell".
func validHandlerName(name string) bool {
	if name == "" || len(name) > maxHandlerBytes || name == "http" || name == "shell" {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i == 0:
			return false
		case r >= '0' && r <= '9', r == '-', r == '_', r == '.', r == ':':
		default:
			return false
		}
	}
	return true
}

// labelsFlag is the --labels flag: "key=value,...", parsed and checked by
// placement.ParseLabels, bound to a Config's Labels.
type labelsFlag struct{ m *map[string]string }

func (f *labelsFlag) String() string {
	if f.m == nil {
		return ""
	}
	return placement.FormatLabels(*f.m)
}

func (f *labelsFlag) Set(s string) error {
	l, err := placement.ParseLabels(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), placement.ErrInvalid.Error()+": "))
	}
	if len(l) == 0 {
		l = nil
	}
	*f.m = l
	return nil
}

func (f *labelsFlag) Type() string { return "labels" }
