package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/jobfleet/jobfleet/auth"
	"github.com/jobfleet/jobfleet/store"
)

// docLister is a JobStore that can list jobs as their documents are
// stored (*store.Etcd does). GET /v1/jobs then passes the stored documents
// through instead of decoding each into a store.Job and encoding it again,
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
func (a *jobsAPI) listDocs(ctx context.Context, w http.ResponseWriter, r *http.Request, s docLister, prefix string, limit int) {
	p, _ := auth.FromContext(r.Context())
	docs, next, err := s.ListPrefixDocs(ctx, prefix, r.URL.Query().Get("cursor"), limit)
	if err != nil {
		a.fail(w, r, "", err)
		return
	}
	body, err := jobListBody(docs, next, !p.Role.Allows(auth.AccessWrite))
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
// stored as docs, with next as its cursor, redacted (store.Job.Redacted)
// if redact. A document that passThrough allows is copied with its
// revision added; any other is decoded, redacted if it must be, and
// encoded, as list does. It returns DecodeStoredJob's error for a corrupt
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
		if passThrough(d.Value, redact) {
			body = append(body, d.Value[:len(d.Value)-1]...)
			if len(d.Value) > 2 {
				body = append(body, ',')
			}
			body = append(body, `"revision":`...)
			body = strconv.AppendInt(body, d.Revision, 10)
			body = append(body, '}')
			continue
		}
		j, err := store.DecodeStoredJob(d.Value, d.Revision)
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

// Quoted words whose presence in a stored document sends it through
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
// encoding it. That holds for a valid JSON object in which no quoted
// string is, in any case, one of the words above: encoding/json matches
// object keys to fields ignoring case, so a lower-case search would miss
// "Headers". Escapes (\u0068eaders) invalid UTF-8, and the two non-ASCII letters that
// fold to ASCII ones (the Kelvin sign K, U+212A, and the long s ſ, U+017F)
// could hide such a key from the search, so a document holding them is
// decoded too. Documents are refused, never wrongly accepted: a refused one
// only costs the decoding.
func passThrough(doc []byte, redact bool) bool {
	if len(doc) < 2 || doc[0] != '{' || doc[len(doc)-1] != '}' {
		return false
	}
	if bytes.Contains(doc, []byte(`\u`)) || bytes.Contains(doc, []byte("\u017f")) || bytes.Contains(doc, []byte("\u212a")) {
		return false
	}
	words := serverSetWords
	if redact {
		words = redactedWords
	}
	for i := 0; ; {
		k := bytes.IndexByte(doc[i:], '"')
		if k < 0 {
			break
		}
		i += k + 1
		for _, w := range words {
			if len(doc)-i > len(w) && doc[i+len(w)] == '"' && bytes.EqualFold(doc[i:i+len(w)], w) {
				return false
			}
		}
	}
	return utf8.Valid(doc) && json.Valid(doc)
}
