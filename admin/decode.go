package admin

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/jobfleet/jobfleet/api"
)

// readBody reads the request's body to its end, at most max bytes. Its
// errors are *http.MaxBytesError beyond max (413), or errBodyRead when the
// client stopped sending (400).
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errBodyRead, err)
	}
	return body, nil
}

// decodeBody reads the request's JSON document, at most max bytes, into
// v with api.Unmarshal: every route's body is decoded by the same strict
// rules (one value, no key twice at any depth, no unknown fields, errors
// naming the path). Errors: those of readBody, or a *api.DecodeError
// (400).
func decodeBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	body, err := readBody(w, r, max)
	if err != nil {
		return err
	}
	return api.Unmarshal(body, v)
}

// bodyStatus is the status code of an error of decodeBody: 413 for a body
// over its limit, 400 otherwise.
func bodyStatus(err error) int {
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// bodyMessage is the message of an error of decodeBody.
func bodyMessage(err error) string {
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return fmt.Sprintf("request body larger than %d bytes", maxErr.Limit)
	case errors.Is(err, errBodyRead):
		return "the request body was not received to its end"
	}
	return err.Error()
}
