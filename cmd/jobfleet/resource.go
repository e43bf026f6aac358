package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/client"
)

// resourceDocument returns the document a `set` command sends: the file
// given with -f (- for standard input), or, without one, what fromFlags
// builds. flagNames are the flags that describe the document, which -f
// does not combine with; combined says so in the command's words.
func resourceDocument(cmd *cobra.Command, file string, flagNames []string, combined func(given []string) error, fromFlags func() ([]byte, error)) ([]byte, error) {
	if file == "" {
		return fromFlags()
	}
	if given := changed(cmd, flagNames); len(given) > 0 {
		return nil, combined(given)
	}
	return readDocument(cmd, file)
}

// putResource sends a `set` command's document with put and says whether
// the server created the resource or replaced one ("created" or
// "replaced").
func putResource[T any](cmd *cobra.Command, opts *clientOptions, put func(ctx context.Context, c *client.Client) (T, bool, error)) (stored T, verb string, err error) {
	var created bool
	err = opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
		stored, created, err = put(ctx, c)
		return err
	})
	verb = "replaced"
	if created {
		verb = "created"
	}
	return stored, verb, err
}

// listResources reads every page of a resource list within prefix (and
// the credential's), in the server's order.
func listResources[T any](cmd *cobra.Command, opts *clientOptions, prefix string, list func(ctx context.Context, c *client.Client, o client.ListOptions) ([]T, string, error)) (all []T, err error) {
	err = opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
		all, err = readPages(ctx, prefix, func(ctx context.Context, o client.ListOptions) ([]T, string, error) {
			return list(ctx, c, o)
		})
		return err
	})
	return all, err
}

// newRemoveCmd returns an `rm NAME` command (alias delete) that deletes
// one resource of a kind ("calendar", "limit") with del and prints
// `deleted KIND "NAME"`.
func newRemoveCmd(opts *clientOptions, use, short, kind string, del func(ctx context.Context, c *client.Client, name string) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Aliases: []string{"delete"}, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) error {
				return del(ctx, c, args[0])
			}); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "deleted %s %q\n", kind, args[0])
			return err
		},
	}
}

// newClientGroupCmd returns a command group whose subcommands share one
// set of client flags (--server, --token, --output, ...).
func newClientGroupCmd(use, short string, subs ...func(*clientOptions) *cobra.Command) *cobra.Command {
	opts := new(clientOptions)
	cmd := &cobra.Command{Use: use, Short: short}
	requireSubcommand(cmd)
	opts.register(cmd)
	for _, sub := range subs {
		cmd.AddCommand(sub(opts))
	}
	return cmd
}
