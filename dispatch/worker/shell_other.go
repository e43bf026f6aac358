//go:build !unix

package worker

import (
	"context"
	"errors"

	"github.com/jobfleet/jobfleet/api"
)

// executeShell is not supported on this platform: process groups are
// needed to stop a command's children.
func (w *Worker) executeShell(context.Context, api.AttemptGrant) outcome {
	return outcome{err: errors.New("shell executor not supported on this platform")}
}
