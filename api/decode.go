package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/go-json-experiment/json/jsontext"
)

// This file holds the one strict decoder of the API's request documents:
// every route's body, the job document and the files the CLI reads go
// through Unmarshal (or CheckJSON, which checks text only), so that a
// document is refused for the same reasons, with the same words, wherever
// it arrives.
//
// encoding/json alone accepts, without a word: data after the first value
// (a second document sent in the same body is dropped), keys given twice
// at any depth (the last wins), keys that differ from a field's name only
// in case, bytes that are not UTF-8 and unpaired UTF-16 surrogate escapes
// (both become U+FFFD); and when it refuses something, it names the field
// without its array indices or map keys, or not at all ("EOF"). Unmarshal
// walks the text once with the tokenizer of github.com/go-json-experiment
// (package jsontext, strict about UTF-8 and surrogates) beside the Go type
// it decodes into, refusing all of that with the value's path, and only
// then lets encoding/json fill the value, so that decoding keeps exactly
// encoding/json's meaning.

// ErrInvalidDocument is matched by every error of Unmarshal and CheckJSON
// about the document (rather than about v).
var ErrInvalidDocument = errors.New("invalid document")

// DecodeError is an error of Unmarshal or CheckJSON: what is wrong, and
// where in the document. It matches ErrInvalidDocument.
type DecodeError struct {
	// Path is the value's path in the document's terms: object members
	// joined with '.', array indices and map keys in brackets
	// ("notify[1].headers[X-A]", "executor.command[2]", "payload.a.b",
	// "jobs[3]"); keys inside free-form JSON (payloads) are joined with
	// '.'. "" is the document as a whole.
	Path string
	// Msg says what is wrong.
	Msg string
	// Offset is the byte offset in the document where the problem was
	// found.
	Offset int64
}

// Error returns "path: message", or the message alone for the document
// as a whole.
func (e *DecodeError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Unwrap returns ErrInvalidDocument.
func (e *DecodeError) Unwrap() error { return ErrInvalidDocument }

// Unmarshal decodes the JSON document data into v, a non-nil pointer, as
// encoding/json does, but strictly. It refuses, with a *DecodeError naming
// the value's path:
//
//   - anything but exactly one JSON value (white space around it is
//     fine): an empty document, a second value or other data after the
//     first, and a null document;
//   - a key given twice in one object, at any depth, payloads included
//     (`notify[1].headers: duplicate key "X-A"`);
//   - an object key that names no field of the Go struct it decodes into,
//     including one that differs from a field's name only in case (with
//     the field's name as a suggestion), and fields tagged "-";
//   - bytes that are not UTF-8, and "\u" escapes of unpaired UTF-16
//     surrogates, anywhere in the text;
//   - a value of the wrong JSON kind for its Go type (a number for a
//     string, a fraction or an out-of-range number for an integer), and a
//     value that its type's UnmarshalJSON or UnmarshalText refuses (a
//     duration such as "1 second", a time that is not RFC 3339).
//
// JSON null is accepted for every value but the document itself, and
// leaves the value unchanged, as in encoding/json. Values of type
// json.RawMessage and interface types are free-form: only the rules of
// text (UTF-8, surrogates, duplicate keys) apply inside them.
func Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("api.Unmarshal: want a non-nil pointer, got %T", v)
	}
	if err := check(data, rv.Type().Elem()); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		// The walk above refuses what encoding/json would; this is for
		// what it might not foresee.
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return &DecodeError{Path: typeErr.Field, Msg: fmt.Sprintf("cannot use JSON %s as %s", typeErr.Value, jsonKind(typeErr.Type)), Offset: typeErr.Offset}
		}
		return &DecodeError{Msg: err.Error()}
	}
	return nil
}

// CheckJSON checks that data is exactly one JSON value under the text
// rules of Unmarshal (no data after it, no key given twice at any depth,
// UTF-8 without unpaired surrogate escapes), without decoding it. Errors
// are *DecodeError.
func CheckJSON(data []byte) error { return check(data, nil) }

// check walks data as a document of type t (nil: free-form).
func check(data []byte, t reflect.Type) error {
	w := &walker{data: data, dec: jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true))}
	switch w.dec.PeekKind() {
	case 0:
		_, err := w.dec.ReadToken()
		if err == io.EOF {
			return &DecodeError{Msg: "empty document; want a JSON object"}
		}
		return w.syntax("", err)
	case 'n':
		return &DecodeError{Msg: "the document is null, not a JSON " + jsonNoun(t)}
	}
	if err := w.value(t, "", ""); err != nil {
		return err
	}
	off := w.dec.InputOffset()
	if _, err := w.dec.ReadToken(); err != io.EOF {
		off = skipSpace(data, off)
		if msg := textProblem(data, off); msg != "" {
			return &DecodeError{Msg: fmt.Sprintf("%s at byte %d", msg, off), Offset: off}
		}
		return &DecodeError{Msg: fmt.Sprintf("unexpected data after the document at byte %d: send one JSON value", off), Offset: off}
	}
	return nil
}
