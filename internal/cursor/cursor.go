package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Errors of Open. Each matches ErrInvalid.
var (
	// ErrInvalid: the string is not a cursor this listing issued.
	ErrInvalid = errors.New("not a cursor of this listing")
	// ErrMalformed: the string is not a cursor at all (not the encoding,
	// too short, an unknown version).
	ErrMalformed = fmt.Errorf("%w: malformed", ErrInvalid)
	// ErrForeign: a well-formed cursor, but not sealed with this fleet's
	// key (another fleet's, made by hand, or changed).
	ErrForeign = fmt.Errorf("%w: not issued by this fleet", ErrInvalid)
	// ErrOtherListing: a cursor of this fleet, but of another listing, or
	// of the same listing with other parameters.
	ErrOtherListing = fmt.Errorf("%w: issued for another listing", ErrInvalid)
)

// version is the first byte of every cursor.
const version = 1

// Sizes of a cursor's parts, in bytes.
const (
	digestBytes = 8
	macBytes    = 16
)

// MinKeyBytes is the shortest key a Codec takes.
const MinKeyBytes = 16

// MaxBytes returns the length of the longest cursor of a position of at
// most pos bytes.
func MaxBytes(pos int) int {
	return base64.RawURLEncoding.EncodedLen(1 + digestBytes + pos + macBytes)
}

// Codec seals and opens cursors with one key. Safe for concurrent use.
type Codec struct {
	key []byte
}

// New returns the codec of key, at least MinKeyBytes long.
func New(key []byte) (*Codec, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("cursor: key of %d bytes; want at least %d", len(key), MinKeyBytes)
	}
	return &Codec{key: append([]byte(nil), key...)}, nil
}

// Listing names a listing and its parameters: Kind ("jobs", "runs",
// "tokens") and, in a fixed order, the values of every parameter that
// selects what it lists (a prefix, a filter). Its cursors are valid only
// for the same Listing.
type Listing struct {
	Kind   string
	Params []string
}

// digest returns the first digestBytes of SHA-256 over l, each part
// length-prefixed so that no two listings encode alike.
func (l Listing) digest() []byte {
	h := sha256.New()
	for _, p := range append([]string{l.Kind}, l.Params...) {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return h.Sum(nil)[:digestBytes]
}

// Seal returns the cursor of position pos in listing l; "" for "" (the
// last page has no next cursor).
func (c *Codec) Seal(l Listing, pos string) string {
	if pos == "" {
		return ""
	}
	b := make([]byte, 0, 1+digestBytes+len(pos)+macBytes)
	b = append(b, version)
	b = append(b, l.digest()...)
	b = append(b, pos...)
	b = append(b, c.mac(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Open returns the position of cursor s, which Seal made for listing l
// with this codec's key; "" for "" (the first page). Errors match
// ErrInvalid (see the package's errors).
func (c *Codec) Open(l Listing, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) < 1+digestBytes+1+macBytes || b[0] != version {
		return "", ErrMalformed
	}
	body, mac := b[:len(b)-macBytes], b[len(b)-macBytes:]
	if !hmac.Equal(mac, c.mac(body)) {
		return "", ErrForeign
	}
	if !hmac.Equal(body[1:1+digestBytes], l.digest()) {
		return "", ErrOtherListing
	}
	return string(body[1+digestBytes:]), nil
}

func (c *Codec) mac(b []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write(b)
	return h.Sum(nil)[:macBytes]
}
