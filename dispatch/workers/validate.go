package workers

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch"
	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// validateRegister checks a registration against the protocol's bounds
// (api.MaxRegisterExecutors and the others), so that what one
// registration stores is at most a few kilobytes. Its errors wrap
// dispatch.ErrBadRequest and name the field.
func validateRegister(req api.RegisterRequest) error {
	if err := dispatch.ValidateWorkerID(req.Worker); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", dispatch.ErrBadRequest, fmt.Sprintf(format, args...))
	}
	switch {
	case len(req.Executors) == 0 || len(req.Executors) > api.MaxRegisterExecutors:
		return bad("executors: must list 1 to %d executor types, got %d", api.MaxRegisterExecutors, len(req.Executors))
	case req.Concurrency < 1 || req.Concurrency > api.MaxWorkerConcurrency:
		return bad("concurrency: must be 1 to %d, got %d", api.MaxWorkerConcurrency, req.Concurrency)
	case req.Active < 0 || req.Active > req.Concurrency:
		return bad("active: must be 0 to concurrency (%d), got %d", req.Concurrency, req.Active)
	case len(req.Orchestrators) > api.MaxRegisterOrchestrators:
		return bad("orchestrators: at most %d URLs, got %d", api.MaxRegisterOrchestrators, len(req.Orchestrators))
	}
	seen := make(map[string]int, len(req.Executors))
	for i, e := range req.Executors {
		if err := printable(e, api.MaxExecutorBytes); err != nil {
			return bad("executors[%d]: %v", i, err)
		}
		if j, dup := seen[e]; dup {
			return bad("executors[%d]: %q is listed already (executors[%d])", i, e, j)
		}
		seen[e] = i
	}
	for i, o := range req.Orchestrators {
		if err := printable(o, api.MaxOrchestratorURLBytes); err != nil {
			return bad("orchestrators[%d]: %v", i, err)
		}
	}
	if err := placement.ValidateLabels(req.Labels); err != nil {
		return bad("labels: %s", strings.TrimPrefix(err.Error(), placement.ErrInvalid.Error()+": "))
	}
	return nil
}

// checkLabels refuses a registration whose labels do not satisfy its
// credential's worker label selector. The error wraps
// dispatch.ErrForbidden (HTTP 403) and names the rule.
func checkLabels(req api.RegisterRequest) error {
	if placement.Allows(req.WorkerLabels, req.Labels) {
		return nil
	}
	got := "no labels"
	if len(req.Labels) > 0 {
		got = "labels " + placement.FormatLabels(req.Labels)
	}
	return fmt.Errorf("%w: labels: credential %s lets its workers register only with labels matching %s; worker %s has %s",
		dispatch.ErrForbidden, strconv.Quote(req.Credential), strconv.Quote(req.WorkerLabels), strconv.Quote(req.Worker), got)
}

// printable checks a short display string: 1 to max bytes of UTF-8
// without control characters or spaces.
func printable(s string, max int) error {
	if s == "" || len(s) > max {
		return fmt.Errorf("must be 1 to %d bytes, got %d", max, len(s))
	}
	for i, r := range s {
		if r == unicode.ReplacementChar || unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("invalid character %U at byte %d", r, i)
		}
	}
	return nil
}
