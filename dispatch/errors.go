package dispatch

import (
	"errors"

	"github.com/jobfleet/jobfleet/dispatch/notify"
)

// Errors returned by this package. Callers compare with errors.Is (and
// errors.As for *NotOwnerError).
var (
	// ErrInvalidConfig: a Config failed validation (Config.Validate, New).
	ErrInvalidConfig = errors.New("dispatch: invalid config")
	// ErrStaleAttempt: the reported attempt is not the run's current one
	// (its lease expired and it was retried, the run was replaced or
	// deleted, or it completed already). HTTP 409.
	ErrStaleAttempt = errors.New("stale attempt: the run has moved on")
	// ErrBadRequest: a malformed protocol request. HTTP 400.
	ErrBadRequest = errors.New("bad request")
	// ErrForbidden: a heartbeat or completion of an attempt that was
	// handed to another credential; it changes nothing. HTTP 403.
	ErrForbidden = errors.New("forbidden: the attempt was handed to another credential")
	// ErrNotificationRefused is notify.ErrRefused, kept here for the
	// callers that name it so: wrapped by a notify.Sender's error when no
	// later try can succeed, because the destination policy refuses the
	// URL.
	ErrNotificationRefused = notify.ErrRefused
)
