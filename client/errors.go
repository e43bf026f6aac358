package client

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Error is a reply other than 2xx.
type Error struct {
	// StatusCode is the HTTP status code; Status the status line's text
	// ("404 Not Found").
	StatusCode int
	Status     string
	// Message is the server's message ({"error": ...}), or the body's text
	// if it was not a JSON error document.
	Message string
	// RetryAfter is the Retry-After delay of a 429 or 503 reply, 0 if it
	// had none.
	RetryAfter time.Duration
	// Owner and OwnerAddr name the partition's owner in a 421 reply of the
	// worker protocol (resend there), empty if it has none right now.
	Owner, OwnerAddr string
}

// Error returns the status line and the server's message, e.g.
// `404 Not Found: no job "nightly"`.
func (e *Error) Error() string {
	status := e.Status
	if status == "" {
		status = strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode)
	}
	if e.Message == "" {
		return status
	}
	return status + ": " + e.Message
}

// Is reports whether target is the sentinel of e's status code, so that
// errors.Is(err, client.ErrNotFound) holds for a 404.
func (e *Error) Is(target error) bool {
	s, ok := target.(*statusError)
	return ok && s.code == e.StatusCode
}

// statusError is a sentinel matching every *Error of one status code.
type statusError struct {
	code int
	text string
}

func (s *statusError) Error() string { return s.text }

// Sentinels for errors.Is, one per status code the API answers with.
var (
	// ErrBadRequest: 400, the request or document is malformed (the
	// message names the field); nothing changed.
	ErrBadRequest error = &statusError{http.StatusBadRequest, "bad request"}
	// ErrUnauthorized: 401, no valid credential was sent.
	ErrUnauthorized error = &statusError{http.StatusUnauthorized, "unauthorized"}
	// ErrForbidden: 403, the credential may not do this (role or prefix).
	ErrForbidden error = &statusError{http.StatusForbidden, "forbidden"}
	// ErrNotFound: 404, no such job, run or credential.
	ErrNotFound error = &statusError{http.StatusNotFound, "not found"}
	// ErrConflict: 409, the job exists already, the revision is stale, or
	// (worker protocol) the attempt is stale.
	ErrConflict error = &statusError{http.StatusConflict, "conflict"}
	// ErrNotOwner: 421, worker protocol: this orchestrator does not own the
	// run's partition; Error.Owner and OwnerAddr say who does.
	ErrNotOwner error = &statusError{http.StatusMisdirectedRequest, "not the owner"}
	// ErrTooManyRequests: 429, a rate limit; Error.RetryAfter says when to
	// retry.
	ErrTooManyRequests error = &statusError{http.StatusTooManyRequests, "too many requests"}
	// ErrUnavailable: 503, the orchestrator cannot answer now (starting,
	// etcd unreachable); retry later.
	ErrUnavailable error = &statusError{http.StatusServiceUnavailable, "unavailable"}
	// ErrInsufficientStorage: 507, etcd's storage is above its high-water
	// mark or full; new work is refused until space is freed.
	ErrInsufficientStorage error = &statusError{http.StatusInsufficientStorage, "insufficient storage"}
)

// StatusCode returns the status code of an *Error in err's chain, 0 if
// there is none.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}
