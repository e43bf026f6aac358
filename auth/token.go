package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// Shape of credential IDs and bearer tokens.
const (
	// MaxIDBytes is the longest credential ID.
	MaxIDBytes = 63
	// tokenPrefix starts every bearer token the store issues, so that a
	// token is recognisable in a leaked log or file (secret scanners) and
	// cannot be confused with the bootstrap secret.
	tokenPrefix = "jf_"
	// secretBytes is the size of a token's random secret: 256 bits.
	secretBytes = 32
	// MinBootstrapBytes is the shortest secret a bootstrap file may hold.
	MinBootstrapBytes = 32
)

// ValidateID checks a credential ID: 1 to MaxIDBytes of lower-case ASCII
// letters, digits, '-' and '.', starting with a letter or digit. IDs are
// public: they appear in audit lines, in attempts and as the Subject
// CommonName of client certificates. The error wraps ErrInvalid.
func ValidateID(id string) error {
	if id == "" || len(id) > MaxIDBytes {
		return fmt.Errorf("%w: id: must be 1 to %d bytes, got %d", ErrInvalid, MaxIDBytes, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '.') && i > 0:
		default:
			return fmt.Errorf("%w: id: %q may hold only a-z, 0-9, '-' and '.', starting with a letter or digit", ErrInvalid, id)
		}
	}
	return nil
}

// newID returns a random credential ID: 12 hex digits (48 bits; the store
// refuses a collision and draws again).
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// newSecret returns a random 256-bit secret, base64url without padding.
func newSecret() string {
	var b [secretBytes]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// FormatToken returns the bearer token of credential id with secret:
// "jf_<id>_<secret>". The ID travels in the token so that the server finds
// the credential's record by ID and compares one hash, instead of
// searching all of them.
func FormatToken(id, secret string) string { return tokenPrefix + id + "_" + secret }

// ParseToken splits a bearer token made by FormatToken into its credential
// ID and secret. The error wraps ErrUnauthenticated and never quotes the
// token.
func ParseToken(token string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: malformed bearer token", ErrUnauthenticated)
	}
	id, secret, ok = strings.Cut(rest, "_")
	if !ok || ValidateID(id) != nil || len(secret) != base64.RawURLEncoding.EncodedLen(secretBytes) {
		return "", "", fmt.Errorf("%w: malformed bearer token", ErrUnauthenticated)
	}
	return id, secret, nil
}

// hashSecret returns the SHA-256 of secret, hex encoded: what the store
// keeps instead of the secret.
//
// A fast hash is the right tool here, unlike for passwords: the secrets
// are 256 random bits, so there is no dictionary to try and a brute force
// of the hash is as hopeless as one of the secret itself; a deliberately
// slow hash (bcrypt, argon2) would only make every API request expensive.
// What the hash buys is that a reader of etcd (a backup, a snapshot, an
// etcd user with read access) learns no usable credential.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// hashMatches compares secret's hash with a stored hash in constant time.
func hashMatches(secret, stored string) bool {
	got := hashSecret(secret)
	return subtle.ConstantTimeCompare([]byte(got), []byte(stored)) == 1
}

// ReadBootstrapFile reads the bootstrap admin secret from path (surrounding
// white space removed). It refuses a file that the group or others may
// read or write, and a secret shorter than MinBootstrapBytes, saying how
// to fix either.
func ReadBootstrapFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("admin token file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("admin token file %s has mode %04o: group or others may read it; make it private (chmod 600 %s)", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("admin token file: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if len(secret) < MinBootstrapBytes {
		return "", fmt.Errorf("admin token file %s holds a secret of %d bytes; it needs at least %d (make one with: openssl rand -hex 32 > %s)", path, len(secret), MinBootstrapBytes, path)
	}
	return secret, nil
}

// OpenToOthers reports whether the file at path may be read by its group
// or by others (permission bits 0044), and its permission bits: a token
// file should be its owner's alone (0600 or 0400). It reports false when
// the file cannot be examined.
func OpenToOthers(path string) (perm os.FileMode, open bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	return fi.Mode().Perm(), fi.Mode().Perm()&0o044 != 0
}

// ReadTokenFile reads a bearer token from path, without surrounding white
// space (a trailing newline from `echo` or an editor). It refuses an empty
// file.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}
