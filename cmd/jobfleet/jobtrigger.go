package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
	"github.com/jobfleet/jobfleet/store"
)

func newJobTriggerCmd(opts *clientOptions) *cobra.Command {
	var payload string
	cmd := &cobra.Command{
		Use:   "trigger ID [--payload JSON|@FILE]",
		Short: "Fire a job now, and print the ID its run will have; --payload runs it with that payload instead of the job's",
		Example: `  jobfleet job trigger nightly-report
  jobfleet job trigger nightly-report --payload '{"day": "2026-05-31"}'
  jobfleet job trigger nightly-report --payload @params.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var raw json.RawMessage
			if cmd.Flags().Changed("payload") {
				var err error
				if raw, err = readPayload(payload); err != nil {
					return err
				}
			}
			var t api.Triggered
			if err := opts.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				t.RunID, err = c.TriggerJobWith(ctx, args[0], raw)
				return err
			}); err != nil {
				return err
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, t)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "triggered job %q: run %s\n", args[0], cell(t.RunID))
			return err
		},
	}
	cmd.Flags().StringVar(&payload, "payload", "", "the run's payload instead of the job's: JSON, or @FILE to read it from a file (@- for standard input)")
	return cmd
}

// readPayload returns --payload's JSON: the text itself, or the contents
// of the file after '@'. The server checks it as a job's payload; here it
// must be one JSON value.
func readPayload(arg string) (json.RawMessage, error) {
	data := []byte(arg)
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		var r io.Reader = os.Stdin
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				return nil, fmt.Errorf("--payload: %w", err)
			}
			defer f.Close()
			r = f
		}
		// The server refuses a payload over its limit with a clear
		// message; read a little more than that so it can.
		data, err = io.ReadAll(io.LimitReader(r, 2*store.MaxTriggerPayloadBytes))
		if err != nil {
			return nil, fmt.Errorf("--payload: %w", err)
		}
	}
	if err := api.CheckJSON(data); err != nil {
		return nil, fmt.Errorf("--payload: %w", err)
	}
	return json.RawMessage(data), nil
}
