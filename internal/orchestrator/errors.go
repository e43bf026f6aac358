package orchestrator

import "errors"

// Errors returned by this package. Callers compare with errors.Is.
var (
	// ErrInvalidConfig means a Config failed validation (Config.Validate,
	// New).
	ErrInvalidConfig = errors.New("orchestrator: invalid config")
	// ErrNotStarted means the orchestrator does not know the cluster's
	// partition count yet.
	ErrNotStarted = errors.New("orchestrator: not started")
)
