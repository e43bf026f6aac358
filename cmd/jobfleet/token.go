package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jobfleet/jobfleet/api"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
)

func newTokenCmd() *cobra.Command {
	var opts clientOptions
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage credentials (admin): create, list and revoke bearer tokens",
		Long: `A credential has a role (viewer, worker, operator or admin) and, except for
admin, an optional job-ID prefix that limits it to one team's jobs; a
worker credential may also be limited to worker labels (--worker-labels,
a label selector the labels of its workers must satisfy). Its token is
shown once, when it is created; the fleet keeps only a hash.
Revoking a credential takes effect on every member within a second.
These commands need an admin credential (see jobfleet context), except
token create --etcd-endpoints, which writes to etcd directly: the way back
in when no admin credential is left.`,
	}
	requireSubcommand(cmd)
	opts.register(cmd)
	cmd.AddCommand(newTokenCreateCmd(&opts))
	cmd.AddCommand(&cobra.Command{
		Use: "ls", Short: "List the credentials (never their secrets)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list api.TokenList
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				list.Tokens, err = c.ListTokens(ctx)
				return err
			}); err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tROLE\tPREFIX\tWORKER LABELS\tEXPIRES\tCREATED BY\tDESCRIPTION")
			now := time.Now()
			for _, t := range list.Tokens {
				exp := "never"
				if !t.ExpiresAt.IsZero() {
					exp = t.ExpiresAt.Format(time.RFC3339)
					if !now.Before(t.ExpiresAt) {
						exp += " (expired)"
					}
				}
				by := t.CreatedBy
				if by == "" {
					by = "(etcd)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Role, t.Prefix, t.WorkerLabels, exp, by, t.Description)
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "revoke ID", Short: "Revoke credential ID; every member refuses it within a second", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) error { return c.DeleteToken(ctx, args[0]) }); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", args[0])
			return nil
		},
	})
	return cmd
}

func newTokenCreateCmd(opts *clientOptions) *cobra.Command {
	var (
		req       api.CreateRequest
		role      string
		etcd      etcdOptions // none: through the API
		namespace string
	)
	cmd := &cobra.Command{
		Use:   "create --role ROLE",
		Short: "Create a credential and print its token (shown once)",
		Example: `  jobfleet token create --role operator --prefix billing/ --ttl 720h --description "billing CI"
  jobfleet token create --role worker -o json
  jobfleet token create --role worker --worker-labels pool=gpu --description "gpu pool workers"
  jobfleet token create --role admin --etcd-endpoints=http://127.0.0.1:2379   # recovery: straight into etcd`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req.Role = api.Role(role)
			if err := auth.ValidateRequest(req); err != nil {
				return fmt.Errorf("%w (flags --role, --prefix, --worker-labels, --ttl, --description)", err)
			}
			var c api.Created
			if cmd.Flags().Changed("etcd-endpoints") {
				if err := opts.checkOutput(); err != nil {
					return err
				}
				if !strings.HasSuffix(namespace, "/") {
					return fmt.Errorf("--namespace %q must end in '/'", namespace)
				}
				client, err := etcd.client(zap.NewNop())
				if err != nil {
					return err
				}
				defer client.Close()
				ctx, cancel := context.WithTimeout(cmd.Context(), opts.timeout)
				defer cancel()
				c, _, err = auth.NewStore(client, namespace, nil).Create(ctx, req, "")
				if err != nil {
					return err
				}
			} else {
				if err := opts.call(cmd, func(ctx context.Context, ac *client.Client) (err error) {
					c, err = ac.CreateToken(ctx, req)
					return err
				}); err != nil {
					return err
				}
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, c)
			}
			return printCreated(cmd.OutOrStdout(), cmd.ErrOrStderr(), c)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&role, "role", "", "viewer, worker, operator or admin (required)")
	fs.StringVar(&req.Prefix, "prefix", "", "limit the credential to jobs whose ID starts with this (not for admin)")
	fs.StringVar(&req.WorkerLabels, "worker-labels", "", `worker credentials only: a label selector (e.g. "pool=gpu") the labels of every worker registering with it must satisfy, so that its workers cannot claim another pool's runs`)
	fs.StringVar(&req.TTL, "ttl", "", `lifetime, e.g. "720h" (default: no expiry)`)
	fs.StringVar(&req.Description, "description", "", "what the credential is for")
	etcd.register(fs)
	fs.StringVar(&namespace, "namespace", orchestrator.DefaultNamespace, "etcd key prefix of the cluster (with --etcd-endpoints)")
	fs.Lookup("etcd-endpoints").Usage += ": write the credential to etcd directly instead of through the API (recovery, when no admin credential is at hand)"
	for _, name := range []string{"etcd-cert", "etcd-key", "etcd-ca", "etcd-username", "etcd-password"} {
		fs.Lookup(name).Usage += " (with --etcd-endpoints)"
	}
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

// printCreated prints a new credential: the token alone on standard
// output (so that `jobfleet token create ... > file` stores just the
// token), what it is on standard error.
func printCreated(out, info io.Writer, c api.Created) error {
	scope := "all jobs"
	if c.Prefix != "" {
		scope = fmt.Sprintf("jobs starting with %q", c.Prefix)
	}
	exp := "never expires"
	if !c.ExpiresAt.IsZero() {
		exp = "expires " + c.ExpiresAt.Format(time.RFC3339)
	}
	if c.WorkerLabels != "" {
		scope += fmt.Sprintf(", workers with labels matching %q", c.WorkerLabels)
	}
	fmt.Fprintf(info, "created credential %s: role %s, %s, %s. The token below is shown only now:\n", c.ID, c.Role, scope, exp)
	_, err := fmt.Fprintln(out, c.Secret)
	return err
}
