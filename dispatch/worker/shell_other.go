//go:build !unix

package worker

import (
	"context"
	"errors"

	"github.com/jobfleet/jobfleet/dispatch"
)

// executeShell is not supported on this platform: process groups are
// needed to stop a command's children.
func (w *Worker) executeShell(context.Context, dispatch.AttemptGrant) outcome {
	return outcome{err: errors.New("shell executor not supported on this platform")}
}
