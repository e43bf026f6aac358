package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/jobfleet/jobfleet/admin"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/internal/orchestrator"
)

// retentionOptions are a member's flags that bound what the fleet stores:
// run history, finished one-off jobs, and triggers.
type retentionOptions struct {
	historyMaxRuns int
	historyMaxAge  time.Duration
	historyBudget  string
	historyFloor   int
	deleteAfter    string
	triggerRate    float64
	triggerBurst   int
}

func (o *retentionOptions) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.IntVar(&o.historyMaxRuns, "history-max-runs", 100, "runs kept per job (active ones included) unless the job's history.max_runs says otherwise")
	fs.DurationVar(&o.historyMaxAge, "history-max-age", dispatch.DefaultHistoryMaxAge, "how long final runs are kept after their scheduled time unless the job's history.max_age says otherwise; 0 keeps them whatever their age")
	fs.StringVar(&o.historyBudget, "history-budget", "1GiB", "bytes of run documents the whole fleet keeps (each partition's owner keeps its share, trimming the job that stores the most first, its oldest final runs first); every member must be given the same value")
	fs.IntVar(&o.historyFloor, "history-floor", dispatch.DefaultHistoryFloor, "newest final runs of each job (with its newest dead run) the history budget never trims, whatever the job's neighbours store")
	fs.StringVar(&o.deleteAfter, "delete-after", "168h", `how long a finished one-off job is kept, with its runs, unless its delete_after says otherwise; "never" keeps them`)
	fs.Float64Var(&o.triggerRate, "trigger-rate", admin.DefaultTriggerRate, "manual triggers accepted per second per job on this member (beyond: 429); negative: no limit")
	fs.IntVar(&o.triggerBurst, "trigger-burst", admin.DefaultTriggerBurst, "manual triggers of one job this member accepts at once")
}

// apply sets the orchestrator's and the API's bounds from the flags.
func (o *retentionOptions) apply(oc *orchestrator.Config, ac *admin.Config) error {
	if o.historyMaxRuns < 1 {
		return fmt.Errorf("--history-max-runs %d: want at least 1", o.historyMaxRuns)
	}
	if o.historyMaxAge < 0 {
		return fmt.Errorf("--history-max-age %v is negative", o.historyMaxAge)
	}
	if o.historyFloor < 1 {
		return fmt.Errorf("--history-floor %d: want at least 1", o.historyFloor)
	}
	oc.HistoryFloor = o.historyFloor
	budget, err := humanize.ParseBytes(o.historyBudget)
	if err != nil || budget == 0 || budget > 1<<50 {
		return fmt.Errorf("--history-budget %q: want a size such as 1GiB or 500MB", o.historyBudget)
	}
	oc.HistoryMaxRuns = o.historyMaxRuns
	oc.HistoryMaxAge = o.historyMaxAge
	if o.historyMaxAge == 0 {
		oc.HistoryMaxAge = -1 // no age limit (0 would mean the default)
	}
	oc.HistoryBudget = int64(budget)
	switch d := strings.TrimSpace(o.deleteAfter); d {
	case "never":
		oc.DeleteAfter = -1
	default:
		v, err := time.ParseDuration(d)
		if err != nil || v < 0 {
			return fmt.Errorf(`--delete-after %q: want a duration such as 168h, or "never"`, o.deleteAfter)
		}
		oc.DeleteAfter = v
		if v == 0 {
			oc.DeleteAfter = time.Nanosecond // at once (0 would mean the default)
		}
	}
	if o.triggerBurst < 1 {
		return fmt.Errorf("--trigger-burst %d: want at least 1", o.triggerBurst)
	}
	if o.triggerRate == 0 {
		return fmt.Errorf("--trigger-rate 0: want a positive rate, or a negative one for no limit")
	}
	ac.TriggerRate, ac.TriggerBurst = o.triggerRate, o.triggerBurst
	return nil
}
