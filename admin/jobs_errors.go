package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/store"
)

// fail writes the error reply for err, a decoding or store error about job
// id ("" if unknown): its status code comes from the store's sentinel
// errors (see status), and its message names the field for invalid input.
// Server-side failures are logged, with the details the reply leaves out;
// a client that stopped sending its body is logged at debug level.
func (a *jobsAPI) fail(w http.ResponseWriter, r *http.Request, id string, err error) {
	code, msg := status(err)
	switch {
	case code == http.StatusNotFound && id != "":
		msg = fmt.Sprintf("job %s not found", quoteClip(id))
	case code >= 500:
		a.lg.Warn("job request failed", zap.String("method", r.Method), zap.String("path", clip(r.URL.Path)),
			zap.String("job_id", clip(id)), zap.Int("status", code), zap.Error(err))
	case errors.Is(err, errBodyRead):
		a.lg.Debug("job request body not read to its end", zap.String("method", r.Method), zap.String("path", clip(r.URL.Path)),
			zap.String("remote", r.RemoteAddr), zap.Error(err))
	}
	WriteError(w, code, msg)
}

// status maps an error of a job request onto its HTTP status code and the
// message of the {"error": ...} reply:
//
//	body over the limit (http.MaxBytesError), api.ErrTooLarge  413
//	*api.FieldError, api.ErrInvalidJob                        400 "field: message"
//	*api.DecodeError (a body that is not one strict JSON document) 400 "path: message"
//	a body the client did not send to its end                     400
//	store.ErrNotFound                                             404
//	store.ErrExists, ErrConflict, ErrStaleRevision                409
//	store.ErrNoSpace, store.ErrHighWater                          507
//	store.ErrUnavailable, context deadline or cancellation        503
//	anything else                                                 500
//
// Messages of 5xx replies are fixed sentences: the error's own text may
// hold etcd's or gRPC's wording, which is for the log, not for clients.
// The exception is store.ErrHighWater, which only the fleet's space guard
// returns, naming the database size, the mark and the quota.
func status(err error) (code int, msg string) {
	var maxErr *http.MaxBytesError
	var fieldErr *api.FieldError
	switch {
	case errors.As(err, &maxErr):
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", maxErr.Limit)
	case errors.Is(err, api.ErrTooLarge): // before ErrInvalidJob, which it matches
		return http.StatusRequestEntityTooLarge, err.Error()
	case errors.As(err, &fieldErr):
		return http.StatusBadRequest, fieldErr.Error()
	case errors.Is(err, api.ErrInvalidJob), errors.Is(err, api.ErrInvalidDocument):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, errBodyRead):
		return http.StatusBadRequest, "the request body was not received to its end"
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, store.ErrExists), errors.Is(err, store.ErrConflict), errors.Is(err, api.ErrStaleRevision):
		return http.StatusConflict, err.Error()
	case errors.Is(err, store.ErrNoSpace):
		return http.StatusInsufficientStorage, store.ErrNoSpace.Error() + "; writes resume once an operator frees space"
	case errors.Is(err, store.ErrHighWater):
		// The fleet's own words (size, mark, quota), not etcd's.
		return http.StatusInsufficientStorage, err.Error()
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled): // the member stopping cancels what it has in flight
		return http.StatusServiceUnavailable, store.ErrUnavailable.Error() + ": etcd did not answer in time or has no leader; retry later"
	}
	return http.StatusInternalServerError, "internal error (logged by the server)"
}

// maxLogBytes bounds a request's path or ID in a log line.
const maxLogBytes = 256

// clip cuts s to maxLogBytes (on a character boundary) for a log line.
func clip(s string) string {
	if len(s) <= maxLogBytes {
		return s
	}
	cut := maxLogBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes)", len(s))
}

// quoteClip quotes an ID for a reply, cut to 64 bytes.
func quoteClip(s string) string {
	if len(s) <= 64 {
		return strconv.Quote(s)
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}
