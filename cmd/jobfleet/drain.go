package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/client"
)

// drainPoll is how often `cluster drain --wait` looks whether the member
// has left.
const drainPoll = 250 * time.Millisecond

func newClusterDrainCmd(opts *clientOptions) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "drain --server URL",
		Short: "Ask the member at --server (which must be given) to hand its partitions over and leave",
		Long: `Ask the member at --server (which must be given) to hand its partitions over
and leave; the process then exits 0.

With --wait, the command returns once the member has left: its registration
is gone and every partition has an owner among the other members (as the
first of them that answers shows it), or, for the last member of a fleet,
once nothing listens at --server any more (or a new registration answers
there: the member restarted). It fails if that has not happened within the
duration given, saying what it saw last.`,
		Example: `  jobfleet cluster drain --server https://orchestrator-2:8443
  jobfleet cluster drain --server https://orchestrator-2:8443 --wait 1m   # then restart or remove it`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Draining stops a member: it must be named, never taken from
			// the default.
			if !cmd.Flags().Changed("server") {
				return errors.New("drain stops the member it is sent to: name it with --server URL (or JOBFLEET_SERVER)")
			}
			if wait < 0 {
				return fmt.Errorf("--wait %v: want a duration of 0 (do not wait) or more", wait)
			}
			var leaver api.Member
			var others []string
			err := opts.call(cmd, func(ctx context.Context, c *client.Client) error {
				if wait > 0 {
					var err error
					if leaver, others, err = drainTarget(ctx, c); err != nil {
						return err
					}
				}
				return c.Drain(ctx)
			})
			if err != nil {
				return err
			}
			base, _ := opts.baseURL() // call checked it
			if wait == 0 {
				if opts.structured() {
					return printDoc(cmd.OutOrStdout(), opts.output, map[string]string{"status": "draining", "server": base})
				}
				fmt.Fprintln(cmd.OutOrStdout(), "draining", base)
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			if err := waitLeft(ctx, opts, leaver, others); err != nil {
				return fmt.Errorf("drain %s (member %s): %w", base, leaver.ID, err)
			}
			if opts.structured() {
				return printDoc(cmd.OutOrStdout(), opts.output, map[string]string{"status": "drained", "server": base, "member": leaver.ID})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "drained %s: member %s has left\n", base, leaver.ID)
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for the member to have left (its registration gone, every partition owned by another member), e.g. 1m; 0: return once the drain is accepted")
	return cmd
}

// drainTarget returns the registration of the member c talks to, and the
// addresses of the other members, as that member sees them.
func drainTarget(ctx context.Context, c *client.Client) (api.Member, []string, error) {
	ov, err := c.Overview(ctx)
	if err != nil {
		return api.Member{}, nil, err
	}
	v, err := c.Members(ctx)
	if err != nil {
		return api.Member{}, nil, err
	}
	self, ok := v.Get(ov.Member)
	if !ok {
		return api.Member{}, nil, fmt.Errorf("member %s is not registered (starting, or leaving already)", ov.Member)
	}
	var others []string
	for _, m := range v.Members {
		if m.ID != self.ID {
			others = append(others, m.Addr)
		}
	}
	return self, others, nil
}

// waitLeft waits until leaver has left: as the first of others that
// answers shows it, its registration (with the lease it had) is gone and
// every partition has an owner, none of them leaver unless it registered
// anew (restarted). Without others, until nothing listens at --server
// any more, or the member there answers with another registration. It returns why
// not when ctx ends first.
func waitLeft(ctx context.Context, opts *clientOptions, leaver api.Member, others []string) error {
	clients := make([]*client.Client, 0, len(others))
	for _, addr := range others {
		c, err := opts.clientOf(addr)
		if err != nil {
			return err
		}
		defer c.Close()
		clients = append(clients, c)
	}
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	why := "not looked yet"
	for {
		left, reason := leftAt(ctx, opts.api, clients, leaver)
		if left {
			return nil
		}
		why = reason
		select {
		case <-ctx.Done():
			return fmt.Errorf("not left yet: %s", why)
		case <-tick.C:
		}
	}
}

// leftAt reports whether leaver has left, as the first of clients that
// answers shows it (self, the member's own client, without others), and
// why not.
func leftAt(ctx context.Context, self *client.Client, clients []*client.Client, leaver api.Member) (bool, string) {
	if len(clients) == 0 {
		v, err := self.Members(ctx)
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return true, "" // nothing listens there: the process has exited
		case err != nil:
			return false, err.Error() // an answer, or none yet (a slow or paused member)
		}
		if m, ok := v.Get(leaver.ID); ok && m.LeaseID == leaver.LeaseID {
			return false, "its registration is still live"
		}
		return true, ""
	}
	var last error
	for _, c := range clients {
		v, err := c.Members(ctx)
		if err != nil {
			last = err
			continue
		}
		m, registered := v.Get(leaver.ID)
		if registered && m.LeaseID == leaver.LeaseID {
			return false, "its registration is still live"
		}
		pt, err := c.Partitions(ctx)
		if err != nil {
			last = err
			continue
		}
		held, ownerless := 0, 0
		for _, r := range pt.Rows {
			switch {
			case r.Owner == "":
				ownerless++
			case r.Owner == leaver.ID && !registered:
				held++
			}
		}
		switch {
		case held > 0:
			return false, fmt.Sprintf("%d partitions still owned by it", held)
		case ownerless > 0:
			return false, fmt.Sprintf("%d partitions without an owner yet", ownerless)
		}
		return true, ""
	}
	return false, fmt.Sprintf("no other member answers: %v", last)
}
