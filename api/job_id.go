package api

import (
	"fmt"
	"net/url"
)

// Bounds of the identifiers that reach the store through URLs, so that
// an absurd one is refused before it reaches etcd.
const (
	// MaxRunIDBytes bounds a run ID: an escaped job ID (at most three
	// bytes per byte of the ID), '@' and a time.
	MaxRunIDBytes = 3*MaxIDBytes + 1 + len(TimeFormat)
	// MaxCursorBytes bounds a cursor of List: a partition number and an
	// escaped job ID.
	MaxCursorBytes = 3*MaxIDBytes + 32
)

// EscapeID returns id in a form that is safe as one segment of an etcd key:
// it contains no '/' and only printable ASCII. It percent-encodes like
// url.PathEscape: ASCII letters, digits and "-._~$&+=:@" stay as they are,
// so ordinary IDs are unchanged and keys stay readable; every other byte,
// including '/', '%', space and all non-ASCII bytes, becomes %XX. It is defined for
// every string, valid job ID or not, and UnescapeID reverses it.
func EscapeID(id string) string { return url.PathEscape(id) }

// UnescapeID reverses EscapeID. It accepts only the exact form EscapeID
// produces (upper-case hex digits, nothing escaped that need not be), so
// each ID has one key; anything else is an error matching ErrInvalidJob.
func UnescapeID(s string) (string, error) {
	id, err := url.PathUnescape(s)
	if err != nil {
		return "", fmt.Errorf("%w: escaped id %q: %v", ErrInvalidJob, s, err)
	}
	if EscapeID(id) != s {
		return "", fmt.Errorf("%w: escaped id %q is not in canonical form", ErrInvalidJob, s)
	}
	return id, nil
}

// ValidateID checks that id is a valid job ID (see Job.ID for the rules);
// the error matches ErrInvalidJob and names the field "id".
func ValidateID(id string) error { return validateID(id) }
