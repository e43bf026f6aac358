package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/client"
)

// clientOptions are the flags of commands that talk to the HTTP API.
// Where the API is and which credential to send are resolved once per
// command by prepare, in this order: a flag, its JOBFLEET_* environment
// variable, the context (--context, JOBFLEET_CONTEXT, or the current
// one), the default; each setting on its own (a --server flag with the
// context's token sends that token to the flag's server, as for kubectl).
type clientOptions struct {
	server      string
	output      string
	timeout     time.Duration // --request-timeout
	token       string
	tokenFile   string
	contextName string

	flags  *pflag.FlagSet   // to tell given flags from defaults
	stderr func() io.Writer // where warnings go; nil: none

	prepared bool
	ctx      cliContext // the context in use (zero if none); its ca, cert and key are the TLS client settings
	bearer   string     // the resolved token, "" for none
	api      *client.Client
	// TLS: ca verifies the server (empty: the system's CAs), cert and key
	// are a client certificate: --ca, --cert, --key (or JOBFLEET_CA, ...),
	// else the context's "ca", "cert" and "key".
	ca, cert, key string
}

// defaultRequestTimeout is --request-timeout's default.
const defaultRequestTimeout = 10 * time.Second

// requestTimeout is --request-timeout: a duration, 0 for the default,
// never negative.
type requestTimeout time.Duration

func (d *requestTimeout) String() string { return time.Duration(*d).String() }
func (d *requestTimeout) Type() string   { return "duration" }
func (d *requestTimeout) Set(s string) error {
	v, err := time.ParseDuration(s)
	switch {
	case err != nil || v < 0:
		return fmt.Errorf("want a positive duration such as 30s, or 0 for the default (%v)", defaultRequestTimeout)
	case v == 0:
		v = defaultRequestTimeout
	}
	*d = requestTimeout(v)
	return nil
}

// ambiguousFlag is --timeout, which no client command takes: it refuses
// any value, saying which flag to give instead.
type ambiguousFlag struct{}

func (ambiguousFlag) String() string { return "" }
func (ambiguousFlag) Type() string   { return "duration" }
func (ambiguousFlag) Set(string) error {
	return errors.New("the client commands take no --timeout: --request-timeout is the time limit of this command's requests, --job-timeout a job's time limit of one attempt (job create, job import-crontab)")
}

// defaultServer is the server when neither --server (JOBFLEET_SERVER)
// nor the context names one. It is not the flag's default, which would
// show in the help as a second, contradicting default.
const defaultServer = "http://127.0.0.1:8080"

func (o *clientOptions) register(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&o.server, "server", "", "URL of any orchestrator's HTTP API (http://HOST:PORT, https://..., or HOST:PORT for http; default: the context's, else "+defaultServer+")")
	fs.StringVarP(&o.output, "output", "o", "table", "output format: table, wide (a table with every column and whole texts), json or yaml (the JSON document's fields, as YAML)")
	o.timeout = defaultRequestTimeout
	fs.Var((*requestTimeout)(&o.timeout), "request-timeout", "time limit of each request this command sends to the API, e.g. 30s (0: the default)")
	// --timeout was the request's time limit, which a job-defining
	// command's reader takes for the job's: it is refused, naming both.
	fs.Var(ambiguousFlag{}, "timeout", "")
	_ = fs.MarkHidden("timeout")
	fs.StringVar(&o.token, "token", "", "bearer token of a credential (default: the context's)")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token")
	fs.StringVar(&o.contextName, "context", "", "named context to use (jobfleet context ls; default: the current one)")
	fs.StringVar(&o.ca, "ca", "", "PEM file of the CAs to verify an https --server against (default: the context's, else the system's)")
	fs.StringVar(&o.cert, "cert", "", "PEM client certificate file to present to the server (with --key)")
	fs.StringVar(&o.key, "key", "", "PEM private key file of --cert")
	o.flags = fs
	o.stderr = cmd.ErrOrStderr
}

// prepare resolves the server, the credential and the HTTP client.
func (o *clientOptions) prepare() error {
	if o.prepared {
		return nil
	}
	if err := o.checkOutput(); err != nil {
		return err
	}
	flag := func(name string) *pflag.Flag {
		if o.flags == nil {
			return nil
		}
		return o.flags.Lookup(name)
	}
	// The context: --context or JOBFLEET_CONTEXT, else the current one.
	cfg, err := loadConfig()
	name := o.contextName
	if name == "" && err == nil {
		name = cfg.CurrentContext
	}
	if name != "" {
		if err != nil {
			return err
		}
		c, ok := cfg.Contexts[name]
		if !ok {
			return fmt.Errorf("no context %q (jobfleet context ls lists them)", name)
		}
		o.ctx = c
	}
	for _, f := range []struct {
		name string
		dst  *string
		ctx  string
	}{{"server", &o.server, o.ctx.Server}, {"ca", &o.ca, o.ctx.CA}, {"cert", &o.cert, o.ctx.Cert}, {"key", &o.key, o.ctx.Key}} {
		if fl := flag(f.name); (fl == nil || !fl.Changed) && f.ctx != "" {
			*f.dst = f.ctx
		}
	}
	if o.server == "" {
		o.server = defaultServer
	}
	switch {
	case fromFlag(flag("token")) && fromFlag(flag("token-file")):
		return errors.New("give --token or --token-file, not both")
	case fromFlag(flag("token")):
		o.bearer = o.token
	case fromFlag(flag("token-file")):
		o.bearer, err = auth.ReadTokenFile(o.tokenFile)
	case fromEnv(flag("token")):
		o.bearer = o.token
	case fromEnv(flag("token-file")):
		o.bearer, err = auth.ReadTokenFile(o.tokenFile)
	case o.ctx.Token != "":
		o.bearer = o.ctx.Token
	case o.ctx.TokenFile != "":
		o.tokenFile = o.ctx.TokenFile
		o.bearer, err = auth.ReadTokenFile(o.tokenFile)
	case o.token != "": // set by code (tests), not by a flag
		o.bearer = o.token
	}
	if err != nil {
		return err
	}
	if perm, open := auth.OpenToOthers(o.tokenFile); o.tokenFile != "" && o.bearer != "" && open && o.stderr != nil {
		// Kubernetes mounts secrets 0644 unless told otherwise: warn,
		// do not refuse.
		fmt.Fprintf(o.stderr(), "warning: token file %s can be read by other users (mode %04o): chmod 600 %s\n", o.tokenFile, perm, o.tokenFile)
	}
	if o.api, err = o.newClient(); err != nil {
		return err
	}
	o.prepared = true
	return nil
}

// newClient returns the client of the API requests: --server, the
// request timeout, TLS from the CA, certificate and key options, and the
// resolved bearer token on every request.
func (o *clientOptions) newClient() (*client.Client, error) {
	base, err := o.baseURL()
	if err != nil {
		return nil, err
	}
	cfg := client.Config{Server: base, Token: o.bearer, Timeout: o.timeout}
	if o.ca != "" || o.cert != "" || o.key != "" {
		if cfg.TLS, err = clientTLS("--", o.ca, o.cert, o.key); err != nil {
			return nil, err
		}
	}
	return client.New(cfg)
}

// baseURL returns --server as a URL: a bare "HOST:PORT" (or HOST) means
// http://HOST:PORT; otherwise it must be an http or https URL.
func (o *clientOptions) baseURL() (string, error) {
	u, err := client.ParseServer(o.server)
	if err != nil {
		return "", fmt.Errorf("--server %q: want a URL such as http://127.0.0.1:8080 or https://orchestrator:8443, or HOST:PORT", o.server)
	}
	return u.String(), nil
}

// call runs fn with the API client under cmd's context. Idle connections
// are closed after it, so that no connection outlives its command; a 401
// gets a hint on how to give a credential.
func (o *clientOptions) call(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	if err := o.prepare(); err != nil {
		return err
	}
	defer o.api.Close()
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	err := fn(ctx, o.api)
	if errors.Is(err, client.ErrUnauthorized) {
		return fmt.Errorf("%w%s", err, o.authHint())
	}
	return err
}

// fetch is call for a read of one value: it runs read with the API
// client under cmd's context and returns what read returned, with call's
// errors (a 401 with its hint).
func fetch[T any](cmd *cobra.Command, o *clientOptions, read func(ctx context.Context, c *client.Client) (T, error)) (T, error) {
	var v T
	err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
		v, err = read(ctx, c)
		return err
	})
	return v, err
}

// authHint says what to do after a 401: how to give a credential when
// none was sent, how to find or replace the one refused otherwise.
func (o *clientOptions) authHint() string {
	if o.bearer == "" {
		return " (give a credential: --token, --token-file or JOBFLEET_TOKEN, or a context: jobfleet context ls)"
	}
	return " (the token sent was refused: wrong, revoked or of another fleet; jobfleet context show shows the context's, --token, --token-file or JOBFLEET_TOKEN give another)"
}

// checkOutput checks --output.
func (o *clientOptions) checkOutput() error {
	switch o.output {
	case "table", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output must be table, wide, json or yaml, got %q", o.output)
}

// structured reports whether --output asks for the document (json or
// yaml) rather than a table.
func (o *clientOptions) structured() bool { return o.output == "json" || o.output == "yaml" }

// printDoc writes v as format asks: YAML for "yaml" (the JSON document
// converted, so field names and values are the JSON ones), else indented
// JSON.
func printDoc(w io.Writer, format string, v any) error {
	if format != "yaml" {
		return printJSON(w, v)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(data)
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
