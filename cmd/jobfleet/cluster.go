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

	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/internal/storage"
	"github.com/jobfleet/jobfleet/membership"
)

// clientOptions are the flags of commands that talk to the HTTP API.
type clientOptions struct {
	server  string
	output  string
	timeout time.Duration
	// TLS: ca verifies the server (empty: the system's CAs), cert and key
	// are a client certificate. Set from --ca, --cert, --key (or JOBFLEET_CA,
	// ...); a CLI context's "ca", "cert" and "key" fill the ones not given
	// before httpClient is called (flag > environment > context).
	ca, cert, key string
}

// defaultServer is --server when none is given.
const defaultServer = "http://127.0.0.1:8080"

func (o *clientOptions) register(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&o.server, "server", defaultServer, "URL of any orchestrator's HTTP API (http://HOST:PORT, https://..., or HOST:PORT for http)")
	fs.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "request timeout")
	fs.StringVar(&o.ca, "ca", "", "PEM file of the CAs to verify an https --server against (default: the system's)")
	fs.StringVar(&o.cert, "cert", "", "PEM client certificate file to present to the server (with --key)")
	fs.StringVar(&o.key, "key", "", "PEM private key file of --cert")
}

// httpClient returns the client of the API requests: the request timeout,
// and TLS from the CA, certificate and key options.
func (o *clientOptions) httpClient() (*http.Client, error) {
	c := &http.Client{Timeout: o.timeout}
	if o.ca == "" && o.cert == "" && o.key == "" {
		return c, nil
	}
	tc, err := clientTLS("--", o.ca, o.cert, o.key)
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tc
	c.Transport = t
	return c, nil
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
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output must be table or json, got %q", o.output)
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
	client, err := o.httpClient()
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections() // no connection outlives its command
	resp, err := client.Do(req)
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
			return fmt.Errorf("%s: %s%s", resp.Status, e.Error, e.Reason)
		}
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
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
