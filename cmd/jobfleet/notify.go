package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/egress"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
	"github.com/jobfleet/jobfleet/store"
)

// notifyOptions are an orchestrator's run notification flags.
type notifyOptions struct {
	url        string
	on         []string
	allow      []string
	deny       []string
	secretEnv  []string
	maxAge     time.Duration
	maxPending int
	inFlight   int
}

func (n *notifyOptions) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&n.url, "notify-url", "", "URL told of the runs of jobs without notify entries of their own (POST of the run document)")
	fs.StringSliceVar(&n.on, "notify-on", []string{"dead"}, "outcomes --notify-url is told of: failed, dead, succeeded (comma separated)")
	fs.StringSliceVar(&n.allow, "notify-allow", nil, "destinations notifications may reach although denied by default, as the worker's --http-allow")
	fs.StringSliceVar(&n.deny, "notify-deny", nil, "destinations notifications must never reach, as the worker's --http-deny")
	fs.StringSliceVar(&n.secretEnv, "notify-secret-env", nil, "variables of this process's environment that notify headers' secret references may name (NAME,...)")
	fs.IntVar(&n.maxPending, "notify-max-pending", 64, "pending notifications kept per job: beyond it the oldest are dropped (counted in jobfleet_notifications_total{result=\"dropped\"}); negative: no bound")
	fs.IntVar(&n.inFlight, "notify-in-flight", 32, "notification deliveries in flight at once on this member (at most 4 to one destination, 2 for one job); negative: no bound")
	fs.DurationVar(&n.maxAge, "notify-max-age", 24*time.Hour, "how long an undelivered notification is retried before it is given up (counted in jobfleet_notifications_total{result=\"given_up\"})")
}

func (n *notifyOptions) config() orchestrator.NotifyConfig {
	on := make([]store.RunStatus, len(n.on))
	for i, s := range n.on {
		on[i] = store.RunStatus(s)
	}
	return orchestrator.NotifyConfig{
		URL: n.url, On: on, SecretEnv: n.secretEnv, MaxAge: n.maxAge, MaxPendingPerJob: n.maxPending, Concurrency: n.inFlight,
		Policy: egress.Policy{Allow: n.allow, Deny: n.deny, AllowFlag: "--notify-allow"},
	}
}
