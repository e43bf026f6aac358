package worker

import (
	"fmt"

	"github.com/jobfleet/jobfleet/egress"
)

// The HTTP destination policy moved to package egress, which the
// orchestrators' notification delivery uses too.
type (
	// HTTPPolicy is egress.Policy.
	//
	// Deprecated: use egress.Policy; kept for one release.
	HTTPPolicy = egress.Policy
	// DestinationError is egress.DestinationError.
	//
	// Deprecated: use egress.DestinationError; kept for one release.
	DestinationError = egress.DestinationError
	// Resolver is egress.Resolver.
	//
	// Deprecated: use egress.Resolver; kept for one release.
	Resolver = egress.Resolver
	// PolicyTransport is egress.Transport.
	//
	// Deprecated: use egress.Transport; kept for one release.
	PolicyTransport = egress.Transport
)

// ErrDestinationDenied is egress.ErrDestinationDenied.
//
// Deprecated: use egress.ErrDestinationDenied; kept for one release.
var ErrDestinationDenied = egress.ErrDestinationDenied

// NewPolicyTransport calls egress.NewTransport; its error wraps
// ErrInvalidConfig as well as egress.ErrInvalidPolicy.
//
// Deprecated: use egress.NewTransport; kept for one release.
func NewPolicyTransport(p HTTPPolicy) (*PolicyTransport, error) {
	t, err := egress.NewTransport(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return t, nil
}
