package auth

import (
	"fmt"
	"strings"

	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// checkWorkerLabels checks a credential request's worker label selector:
// only for a worker credential, and a selector that parses.
func checkWorkerLabels(req CreateRequest) error {
	if strings.TrimSpace(req.WorkerLabels) == "" {
		return nil
	}
	if req.Role != RoleWorker {
		return fmt.Errorf("%w: worker_labels: only a worker credential can be limited to worker labels (this one's role is %s)", ErrInvalid, req.Role)
	}
	if err := checkText("worker_labels", req.WorkerLabels, placement.MaxSelectorBytes); err != nil {
		return err
	}
	if _, err := placement.Parse(req.WorkerLabels); err != nil {
		return fmt.Errorf("%w: worker_labels: %q is not a label selector such as \"pool=gpu\": %s", ErrInvalid, req.WorkerLabels,
			strings.TrimPrefix(err.Error(), placement.ErrInvalid.Error()+": "))
	}
	return nil
}
