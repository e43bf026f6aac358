package dispatch

import "github.com/jobfleet/jobfleet/api"

// Types of the documents that moved to package api.
//
// Deprecated: use the types of package api; these aliases are kept for one release.
type (
	// Deprecated: use api.AttemptGrant; kept for one release.
	AttemptGrant = api.AttemptGrant
	// Deprecated: use api.CompleteRequest; kept for one release.
	CompleteRequest = api.CompleteRequest
	// Deprecated: use api.CompleteResponse; kept for one release.
	CompleteResponse = api.CompleteResponse
	// Deprecated: use api.DeregisterRequest; kept for one release.
	DeregisterRequest = api.DeregisterRequest
	// Deprecated: use api.HeartbeatRequest; kept for one release.
	HeartbeatRequest = api.HeartbeatRequest
	// Deprecated: use api.HeartbeatResponse; kept for one release.
	HeartbeatResponse = api.HeartbeatResponse
	// Deprecated: use api.NotOwner; kept for one release.
	NotOwner = api.NotOwner
	// Deprecated: use api.PollRequest; kept for one release.
	PollRequest = api.PollRequest
	// Deprecated: use api.PollResponse; kept for one release.
	PollResponse = api.PollResponse
	// Deprecated: use api.RegisterRequest; kept for one release.
	RegisterRequest = api.RegisterRequest
	// Deprecated: use api.RegisterResponse; kept for one release.
	RegisterResponse = api.RegisterResponse
)

// Constants that moved to package api.
//
// Deprecated: use the constants of package api; kept for one release.
const (
	// Deprecated: use api.MaxOutputBytes; kept for one release.
	MaxOutputBytes = api.MaxOutputBytes
	// Deprecated: use api.MaxPollWait; kept for one release.
	MaxPollWait = api.MaxPollWait
	// Deprecated: use api.PathComplete; kept for one release.
	PathComplete = api.PathComplete
	// Deprecated: use api.PathDeregister; kept for one release.
	PathDeregister = api.PathDeregister
	// Deprecated: use api.PathHeartbeat; kept for one release.
	PathHeartbeat = api.PathHeartbeat
	// Deprecated: use api.PathPoll; kept for one release.
	PathPoll = api.PathPoll
	// Deprecated: use api.PathRegister; kept for one release.
	PathRegister = api.PathRegister
)
