package storage

import "errors"

// Errors returned by this package. Callers compare with errors.Is.
var (
	// ErrInvalidConfig means a Config failed validation (Config.Validate,
	// NewCompactor, NewMonitor).
	ErrInvalidConfig = errors.New("storage: invalid config")
)
