package workers

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned by this package. Callers compare with errors.Is (and
// errors.As for *RateError). A request refused with any of them changed
// nothing in etcd, except that a refresh of a live registration renews it
// before anything is written or refused.
//
// Requests also fail with errors wrapping dispatch.ErrBadRequest (a
// malformed request, naming the field; HTTP 400), and with etcd's errors
// classified by store.Classify: store.ErrNoSpace or store.ErrHighWater
// when the store refuses a write (507), store.ErrUnavailable when etcd
// does not answer (503).
var (
	// ErrInvalidConfig: a Config failed validation.
	ErrInvalidConfig = errors.New("workers: invalid config")
	// ErrIDTaken: a registration, deregistration or poll under a worker ID
	// bound to another credential: while its registration lives and for
	// Config.IDGrace after it ended. The message says until when. HTTP
	// 409.
	ErrIDTaken = errors.New("worker ID held by another credential")
	// ErrTooManyWorkers: a registration of a new worker ID by a credential
	// that has Config.MaxPerCredential live registrations already, or
	// holds four times as many IDs (live, or within their grace). HTTP
	// 429.
	ErrTooManyWorkers = errors.New("too many workers registered with this credential")
	// ErrRateLimited: a registration beyond the credential's request or
	// write rate; the error is a *RateError saying when to retry. HTTP 429
	// with Retry-After.
	ErrRateLimited = errors.New("too many registrations")
	// ErrNotLoaded: the registry has not listed etcd yet; retry. HTTP 503.
	ErrNotLoaded = errors.New("the worker registry is not loaded yet; retry")
)

// RateError is a registration refused by a rate limit. It wraps
// ErrRateLimited.
type RateError struct {
	// What names the limit: "requests" or "writes".
	What string
	// Rate and Burst are the limit, per second and credential on this
	// member.
	Rate  float64
	Burst int
	// RetryAfter is when the credential may try again.
	RetryAfter time.Duration
}

func (e *RateError) Error() string {
	what := "registration requests"
	if e.What == "writes" {
		what = "new or changed registrations"
	}
	return fmt.Sprintf("%v: this credential may send this member %g %s a second (bursts of %d); retry in %v",
		ErrRateLimited, e.Rate, what, e.Burst, e.RetryAfter.Round(time.Millisecond))
}

func (e *RateError) Unwrap() error { return ErrRateLimited }
