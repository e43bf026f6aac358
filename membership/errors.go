package membership

import "errors"

// Errors returned by this package. Callers compare with errors.Is.
var (
	// ErrInvalidConfig means a Config or SessionConfig failed validation.
	ErrInvalidConfig = errors.New("membership: invalid config")
	// ErrLeaseLost means the server reported the session's lease as
	// expired or revoked.
	ErrLeaseLost = errors.New("membership: lease lost")
	// ErrRenewDeadline means no keepalive succeeded within the renew
	// deadline, so the session fenced itself; the lease may still be alive
	// on the server for a short while.
	ErrRenewDeadline = errors.New("membership: lease not renewed within the renew deadline")
	// ErrSessionClosed means Close or Orphan ended the session.
	ErrSessionClosed = errors.New("membership: session closed")
)
