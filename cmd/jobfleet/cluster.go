package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/membership"
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
	timeout     time.Duration
	token       string
	tokenFile   string
	contextName string

	flags  *pflag.FlagSet   // to tell given flags from defaults
	stderr func() io.Writer // where warnings go; nil: none

	prepared bool
	ctx      cliContext // the context in use (zero if none); its ca, cert and key are the TLS client settings
	bearer   string     // the resolved token, "" for none
	client   *http.Client
	// TLS: ca verifies the server (empty: the system's CAs), cert and key
	// are a client certificate: --ca, --cert, --key (or JOBFLEET_CA, ...),
	// else the context's "ca", "cert" and "key".
	ca, cert, key string
}

// defaultServer is --server when none is given.
const defaultServer = "http://127.0.0.1:8080"

func (o *clientOptions) register(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&o.server, "server", defaultServer, "URL of any orchestrator's HTTP API (http://HOST:PORT, https://..., or HOST:PORT for http; default: the context's, else "+defaultServer+")")
	fs.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "request timeout")
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
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output must be table or json, got %q", o.output)
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
	if o.client, err = o.httpClient(); err != nil {
		return err
	}
	o.prepared = true
	return nil
}

// httpClient returns the client of the API requests: the request timeout,
// TLS from the CA, certificate and key options, and the resolved bearer
// token on every request.
func (o *clientOptions) httpClient() (*http.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if o.ca != "" || o.cert != "" || o.key != "" {
		tc, err := clientTLS("--", o.ca, o.cert, o.key)
		if err != nil {
			return nil, err
		}
		t.TLSClientConfig = tc
	}
	return &http.Client{Timeout: o.timeout, Transport: &auth.BearerTransport{Token: o.bearer, Base: t}}, nil
}

// baseURL returns --server as a URL: a bare "HOST:PORT" (or HOST) means
// http://HOST:PORT; otherwise it must be an http or https URL.
func (o *clientOptions) baseURL() (string, error) {
	s := strings.TrimSpace(o.server)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--server %q: want a URL such as http://127.0.0.1:8080 or https://orchestrator:8443, or HOST:PORT", o.server)
	}
	return u.String(), nil
}

// apiURL returns the URL of path on --server.
func (o *clientOptions) apiURL(path string) (string, error) {
	base, err := o.baseURL()
	if err != nil {
		return "", err
	}
	u, err := url.JoinPath(base, path)
	if err != nil {
		return "", fmt.Errorf("--server %q: %w", o.server, err)
	}
	return u, nil
}

// do sends a request and decodes a 2xx JSON reply into out; a non-2xx reply
// becomes an error carrying the server's message.
func (o *clientOptions) do(method, path string, body io.Reader, out any) error {
	if err := o.prepare(); err != nil {
		return err
	}
	u, err := o.apiURL(path)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	defer o.client.CloseIdleConnections() // no connection outlives its command
	resp, err := o.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error  string `json:"error"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal(data, &e) == nil && (e.Error != "" || e.Reason != "") {
			return fmt.Errorf("%s: %s%s%s", resp.Status, e.Error, e.Reason, authHint(resp.StatusCode))
		}
		return fmt.Errorf("%s: %s%s", resp.Status, strings.TrimSpace(string(data)), authHint(resp.StatusCode))
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = data
		return nil
	}
	return json.Unmarshal(data, out)
}

// authHint says how to give a credential, after a 401.
func authHint(code int) string {
	if code != http.StatusUnauthorized {
		return ""
	}
	return " (give a credential: --token, --token-file or JOBFLEET_TOKEN, or a context: jobfleet context ls)"
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newClusterCmd() *cobra.Command {
	var opts clientOptions
	cmd := &cobra.Command{Use: "cluster", Short: "Inspect and operate the fleet over the HTTP API"}
	requireSubcommand(cmd)
	opts.register(cmd)

	cmd.AddCommand(&cobra.Command{
		Use: "members", Short: "List the live members", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var v membership.View
			if err := opts.do("GET", "/v1/cluster/members", nil, &v); err != nil {
				return err
			}
			if opts.output == "json" {
				return printJSON(cmd.OutOrStdout(), v)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tADDR\tLEASE\tSTARTED")
			for _, m := range v.Members {
				fmt.Fprintf(tw, "%s\t%s\t%x\t%s\n", cell(m.ID), cell(m.Addr), m.LeaseID, m.StartedAt.Format(time.RFC3339))
			}
			fmt.Fprintf(tw, "(revision %d)\n", v.Revision)
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "partitions", Short: "Show each partition's owner, epoch and ring target, and a per-member summary", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var t orchestrator.PartitionTable
			if err := opts.do("GET", "/v1/cluster/partitions", nil, &t); err != nil {
				return err
			}
			if opts.output == "json" {
				return printJSON(cmd.OutOrStdout(), t)
			}
			owned := map[string]int{}
			targeted := map[string]int{}
			unowned, misplaced := 0, 0
			for _, a := range t.Assignments {
				owned[a.Owner]++
				targeted[a.Target]++
				if a.Owner == "" {
					unowned++
				} else if a.Owner != a.Target {
					misplaced++
				}
			}
			ids := map[string]bool{}
			for id := range owned {
				ids[id] = true
			}
			for id := range targeted {
				ids[id] = true
			}
			sorted := make([]string, 0, len(ids))
			for id := range ids {
				if id != "" {
					sorted = append(sorted, id)
				}
			}
			sort.Strings(sorted)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MEMBER\tOWNED\tTARGET")
			for _, id := range sorted {
				fmt.Fprintf(tw, "%s\t%d\t%d\n", cell(id), owned[id], targeted[id])
			}
			fmt.Fprintf(tw, "%d partitions, %d without owner, %d not yet on their target (revision %d)\n", t.Partitions, unowned, misplaced, t.Revision)
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "storage", Short: "Show etcd's database size, quota, high-water mark, revisions, the fleet's last compaction, key counts and alarms", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var r storage.Report
			if err := opts.do("GET", "/v1/cluster/storage", nil, &r); err != nil {
				return err
			}
			if opts.output == "json" {
				return printJSON(cmd.OutOrStdout(), r)
			}
			return printStorage(cmd.OutOrStdout(), r)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "drain --server URL", Short: "Ask the member at --server (which must be given) to hand its partitions over and leave", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Draining stops a member: it must be named, never taken from
			// the default.
			if !cmd.Flags().Changed("server") {
				return errors.New("drain stops the member it is sent to: name it with --server URL (or JOBFLEET_SERVER)")
			}
			if err := opts.do("POST", "/v1/cluster/drain", nil, nil); err != nil {
				return err
			}
			base, _ := opts.baseURL() // do checked it
			if opts.output == "json" {
				return printJSON(cmd.OutOrStdout(), map[string]string{"status": "draining", "server": base})
			}
			fmt.Fprintln(cmd.OutOrStdout(), "draining", base)
			return nil
		},
	})
	return cmd
}

// printStorage writes the storage report as a two-column table, then one
// row per etcd endpoint.
func printStorage(w io.Writer, r storage.Report) error {
	size := func(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "DATABASE\t%s (in use %s)\n", size(r.DBSize), size(r.DBSizeInUse))
	fmt.Fprintf(tw, "QUOTA\t%s (%s)\n", size(r.Quota), map[string]string{
		storage.QuotaFromFlag: "from --etcd-quota-bytes", storage.QuotaFromEtcd: "as etcd reports it", storage.QuotaFromDefault: "etcd's default",
	}[r.QuotaSource])
	state := "below: accepting new work"
	if r.AboveHighWater {
		state = "ABOVE: new jobs, larger replacements and triggers are refused (507)"
	}
	fmt.Fprintf(tw, "HIGH WATER\t%s (%g%% of the quota), %s\n", size(r.HighWaterBytes), r.HighWater*100, state)
	fmt.Fprintf(tw, "REVISION\t%d\n", r.Revision)
	switch {
	case r.Compaction != nil:
		fmt.Fprintf(tw, "COMPACTED\t%d (%d revisions kept), by %s at %s\n", r.CompactedRevision, r.Revision-r.CompactedRevision,
			r.Compaction.Member, r.Compaction.At.Format(time.RFC3339))
	case r.CompactionInterval == 0:
		fmt.Fprintf(tw, "COMPACTED\tunknown: compaction is left to etcd (--compaction-interval=0)\n")
	default:
		fmt.Fprintf(tw, "COMPACTED\tnot yet (the fleet compacts every %v)\n", r.CompactionInterval)
	}
	if r.CompactionInterval > 0 {
		fmt.Fprintf(tw, "COMPACTION\tevery %v, keeping that much history\n", r.CompactionInterval)
	}
	fmt.Fprintf(tw, "KEYS\t%d jobs (with pending triggers), %d runs (%d active), %d in all\n", r.Keys.Jobs, r.Keys.Runs, r.Keys.ActiveRuns, r.Keys.Total)
	if h := r.History; h != nil {
		fmt.Fprintf(tw, "HISTORY\t%s in %d runs on %s's %d partitions (their budget share %s); the fleet's is the sum over the members\n",
			size(h.Bytes), h.Runs, h.Member, h.Partitions, size(h.BudgetBytes))
	}
	alarms := "none"
	if len(r.Alarms) > 0 {
		var as []string
		for _, a := range r.Alarms {
			as = append(as, a.Alarm+" on etcd member "+a.Member)
		}
		alarms = strings.Join(as, ", ")
	}
	fmt.Fprintf(tw, "ALARMS\t%s\n", alarms)
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "ENDPOINT\tDATABASE\tIN USE\tERROR")
	for _, e := range r.Endpoints {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Endpoint, size(e.DBSize), size(e.DBSizeInUse), e.Error)
	}
	return tw.Flush()
}
