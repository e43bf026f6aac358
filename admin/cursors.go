package admin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/internal/cursor"
)

// maxCursorBytes bounds ?cursor: the sealed form of the longest position
// of any listing (api.MaxCursorBytes).
var maxCursorBytes = cursor.MaxBytes(api.MaxCursorBytes)

// listCursors opens the ?cursor of a listing and seals its next_cursor
// with the fleet's cursor key (package internal/cursor): a listing takes
// back only the cursors it issued, for the same parameters.
type listCursors struct {
	codec func() (*cursor.Codec, error) // Member.Cursors
}

// open returns the position of the request's ?cursor in listing l ("" for
// the first page) and the function that seals the position of the next
// page; or it writes the reply (400 naming the cursor, 503 before the
// member knows the fleet's key) and returns ok false.
func (c listCursors) open(w http.ResponseWriter, r *http.Request, l cursor.Listing) (pos string, seal func(string) string, ok bool) {
	s := r.URL.Query().Get("cursor")
	if len(s) > maxCursorBytes {
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("cursor: %d bytes long; no cursor is longer than %d", len(s), maxCursorBytes))
		return "", nil, false
	}
	codec, err := c.codec()
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, "listings are not available on this member yet: "+unavailable(err, "it"))
		return "", nil, false
	}
	pos, err = codec.Open(l, s)
	if err != nil {
		WriteError(w, http.StatusBadRequest, cursorMessage(s, err))
		return "", nil, false
	}
	return pos, func(next string) string { return codec.Seal(l, next) }, true
}

// cursorMessage is the 400 message of a cursor the listing refuses.
func cursorMessage(s string, err error) string {
	why := "it is not one"
	switch {
	case errors.Is(err, cursor.ErrOtherListing):
		why = "it was issued for another listing, or for this one with other parameters (prefix, status, since, paused, or a credential of another prefix)"
	case errors.Is(err, cursor.ErrForeign):
		why = "it was not issued by this fleet, or was changed"
	case errors.Is(err, cursor.ErrMalformed):
		why = "it is malformed"
	}
	return fmt.Sprintf("cursor: %s is not a cursor of this listing: %s; pass the next_cursor of the previous page of the same request, or none for the first page", quoteClip(s), why)
}
