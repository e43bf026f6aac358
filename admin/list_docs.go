package admin

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/jobfleet/jobfleet/api"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/store"
)

// docLister is a JobStore that can list jobs as their documents are
// stored (*store.Etcd does). GET /v1/jobs then passes the stored documents
// through instead of decoding each into a api.Job and encoding it again,
// which was most of what a listing cost the server.
type docLister interface {
	// ListPrefixDocs is JobStore.ListPrefix without decoding: the same
	// page, as stored.
	ListPrefixDocs(ctx context.Context, prefix, cursor string, limit int) ([]store.StoredDoc, string, error)
}

var _ docLister = (*store.Etcd)(nil)

// listDocs serves GET /v1/jobs from s's stored documents of the jobs
// under prefix (the caller's, already combined with ?prefix): the reply is
// the api.JobList that list would write, up to the order of fields.
// after is the position the page starts after, seal what makes the next
// page's cursor.
func (a *jobsAPI) listDocs(ctx context.Context, w http.ResponseWriter, r *http.Request, s docLister, prefix, after string, seal func(string) string, limit int) {
	p, _ := auth.FromContext(r.Context())
	docs, next, err := s.ListPrefixDocs(ctx, prefix, after, limit)
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	body, err := jobListBody(docs, seal(next), !p.Role.Allows(api.AccessWrite))
	if err != nil {
		var encode *encodeError
		if !errors.As(err, &encode) {
			a.fail(w, r, "", err)
			return
		}
		writeEncodeFailure(w)
		a.lg.Error("job reply failed", zap.String("method", r.Method), zap.String("path", clip(r.URL.Path)), zap.Error(err))
		return
	}
	writeJSONBody(w, http.StatusOK, body)
}

// encodeError is a job that was stored but cannot be encoded as JSON.
type encodeError struct{ err error }

func (e *encodeError) Error() string { return "encode the reply: " + e.err.Error() }
func (e *encodeError) Unwrap() error { return e.err }

// jobListBody returns the compact JSON of the api.JobList of the jobs
// stored as docs, with next as its cursor, redacted (api.Job.Redacted)
// if redact. A document that passThrough allows is copied with its
// revision added; any other is decoded, redacted if it must be, and
// encoded, as list does; so is a document whose pause key applies
// (store.StoredDoc.Pause). It returns DecodeStoredJob's error for a corrupt
// document and an *encodeError for a job that cannot be encoded.
func jobListBody(docs []store.StoredDoc, next string, redact bool) ([]byte, error) {
	size := 64 + len(next)
	for _, d := range docs {
		size += len(d.Value) + 32
	}
	body := make([]byte, 0, size)
	body = append(body, `{"jobs":[`...)
	for i, d := range docs {
		if i > 0 {
			body = append(body, ',')
		}
		if d.Pause.Revision == 0 && passThrough(d.Value, redact) {
			body = append(body, d.Value[:len(d.Value)-1]...)
			if len(d.Value) > 2 {
				body = append(body, ',')
			}
			body = append(body, `"revision":`...)
			body = strconv.AppendInt(body, d.Revision, 10)
			body = append(body, '}')
			continue
		}
		j, err := d.Job()
		if err != nil {
			return nil, err
		}
		if redact {
			j = j.Redacted()
		}
		enc, err := json.Marshal(j)
		if err != nil {
			return nil, &encodeError{err}
		}
		body = append(body, enc...)
	}
	body = append(body, `],"next_cursor":`...)
	enc, err := json.Marshal(next)
	if err != nil {
		return nil, &encodeError{err}
	}
	body = append(body, enc...)
	return append(body, '}'), nil
}

// Words whose presence as a string of a stored document sends it through
// decoding: "revision" and "state" are server-set fields that decoding
// replaces or drops (the store never stores them, but a payload may hold
// such a key), and "headers" are what a viewer's reply redacts.
var (
	serverSetWords = [][]byte{[]byte("revision"), []byte("state")}
	redactedWords  = [][]byte{[]byte("revision"), []byte("state"), []byte("headers")}
)

// passThrough reports whether stored document doc may be copied into a
// reply as it is, with only its revision added, giving the same JSON value
// as decoding it with store.DecodeStoredJob (redacted if redact) and
// encoding it. That holds for a valid JSON object in which no string is,
// in any case, one of the words above: encoding/json matches object keys
// to fields ignoring case, so a lower-case search would miss "Headers".
// Escapes (\u0068eaders), invalid UTF-8, and the two non-ASCII letters that
// fold to ASCII ones (the Kelvin sign K, U+212A, and the long s ſ, U+017F)
// could hide such a key from the search, so a document holding them is
// decoded too, and so is one with white space or control bytes outside
// its strings (the store writes compact JSON). Documents are refused,
// never wrongly accepted: a refused one only costs the decoding.
//
// It reads doc in one pass (scanObject), several times faster than
// json.Valid, which was most of what a listing cost the server.
func passThrough(doc []byte, redact bool) bool {
	if len(doc) < 2 || doc[0] != '{' || doc[len(doc)-1] != '}' {
		return false
	}
	if hasControl(doc) || bytes.Contains(doc, []byte("\u017f")) || bytes.Contains(doc, []byte("\u212a")) {
		return false
	}
	words := serverSetWords
	if redact {
		words = redactedWords
	}
	return scanObject(doc, words) && utf8.Valid(doc)
}

// hasControl reports whether doc holds a byte below 0x20 (JSON allows
// none in strings, and the store's compact JSON none outside them), eight
// bytes at a time.
func hasControl(doc []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(doc); i += 8 {
		x := binary.LittleEndian.Uint64(doc[i:])
		// A byte b < 0x20 makes b - 0x20 borrow into its high bit while
		// b's own high bit is clear; bytes ≥ 0x80 are excluded by ^x.
		if (x-0x20*ones)&^x&highs != 0 {
			return true
		}
	}
	for ; i < len(doc); i++ {
		if doc[i] < 0x20 {
			return true
		}
	}
	return false
}

// maxScanDepth is the deepest nesting scanObject follows; a deeper
// document is refused (decoded instead).
const maxScanDepth = 64

// scanObject reports whether doc, which holds no byte below 0x20, is one
// JSON object as json.Valid has it, with no white space outside strings,
// no \u escape, and no string without escapes equal, ignoring case, to
// one of words (escapes other than \u stand for characters that are not
// letters, so a string holding one cannot equal a word).
func scanObject(doc []byte, words [][]byte) bool {
	const (
		wantValue = iota
		wantKey   // a member's name, then ':'
		wantNext  // ',' or the end of the container, after a value
	)
	var objects [maxScanDepth]bool // objects[d]: the container at depth d is an object
	depth, i, state, ok := 0, 0, wantValue, false
	n := len(doc)
	for {
		switch state {
		case wantValue:
			if i >= n {
				return false
			}
			switch c := doc[i]; c {
			case '{', '[':
				if depth == maxScanDepth {
					return false
				}
				objects[depth] = c == '{'
				depth++
				i++
				switch {
				case i < n && doc[i] == c+2: // '{'+2 is '}', '['+2 is ']'
					i++
					depth--
					state = wantNext
				case c == '{':
					state = wantKey
				}
				continue
			case '"':
				if i, ok = scanString(doc, i+1, words); !ok {
					return false
				}
			case 't':
				if i, ok = scanLiteral(doc, i, "true"); !ok {
					return false
				}
			case 'f':
				if i, ok = scanLiteral(doc, i, "false"); !ok {
					return false
				}
			case 'n':
				if i, ok = scanLiteral(doc, i, "null"); !ok {
					return false
				}
			default:
				if i, ok = scanNumber(doc, i); !ok {
					return false
				}
			}
			state = wantNext
		case wantKey:
			if i >= n || doc[i] != '"' {
				return false
			}
			if i, ok = scanString(doc, i+1, words); !ok || i >= n || doc[i] != ':' {
				return false
			}
			i++
			state = wantValue
		case wantNext:
			if depth == 0 {
				return i == n
			}
			if i >= n {
				return false
			}
			obj := objects[depth-1]
			switch c := doc[i]; {
			case c == ',':
				state = wantValue
				if obj {
					state = wantKey
				}
			case c == '}' && obj, c == ']' && !obj:
				depth--
			default:
				return false
			}
			i++
		}
	}
}

// scanString returns the index after the string whose content starts at
// doc[i] (after its opening quote), and false if the string does not end,
// holds an escape other than \" \\ \/ \b \f \n \r \t, or, without
// escapes, equals one of words ignoring case.
func scanString(doc []byte, i int, words [][]byte) (int, bool) {
	start, escaped := i, false
	for {
		q := bytes.IndexByte(doc[i:], '"')
		if q < 0 {
			return i, false
		}
		b := bytes.IndexByte(doc[i:i+q], '\\')
		if b < 0 {
			i += q
			break
		}
		escaped = true
		i += b + 1
		if i >= len(doc) {
			return i, false
		}
		switch doc[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i++
		default:
			return i, false
		}
	}
	if s := doc[start:i]; !escaped {
		for _, w := range words {
			if len(s) == len(w) && bytes.EqualFold(s, w) {
				return i, false
			}
		}
	}
	return i + 1, true
}

// scanLiteral returns the index after literal lit at doc[i], and false if
// it is not there.
func scanLiteral(doc []byte, i int, lit string) (int, bool) {
	if !bytes.HasPrefix(doc[i:], []byte(lit)) {
		return i, false
	}
	return i + len(lit), true
}

// scanNumber returns the index after the JSON number at doc[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and false if there is
// none.
func scanNumber(doc []byte, i int) (int, bool) {
	n := len(doc)
	digits := func() bool {
		start := i
		for i < n && '0' <= doc[i] && doc[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < n && doc[i] == '-' {
		i++
	}
	switch {
	case i < n && doc[i] == '0':
		i++
	case !digits():
		return i, false
	}
	if i < n && doc[i] == '.' {
		i++
		if !digits() {
			return i, false
		}
	}
	if i < n && (doc[i] == 'e' || doc[i] == 'E') {
		i++
		if i < n && (doc[i] == '+' || doc[i] == '-') {
			i++
		}
		if !digits() {
			return i, false
		}
	}
	return i, true
}
