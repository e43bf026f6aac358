package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// syntax converts an error of the tokenizer at path into a *DecodeError
// (nil for nil).
func (w *walker) syntax(path string, err error) error {
	if err == nil {
		return nil
	}
	var se *jsontext.SyntacticError
	off := w.dec.InputOffset()
	if errors.As(err, &se) {
		off = se.ByteOffset
	}
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), err == io.EOF:
		return &DecodeError{Path: path, Msg: "the document ends before this value does (truncated?)", Offset: off}
	case se == nil:
		return &DecodeError{Path: path, Msg: err.Error(), Offset: off}
	}
	if isTextError(se) {
		if msg := textProblem(w.data, off); msg != "" {
			return &DecodeError{Path: path, Msg: msg, Offset: off}
		}
	}
	return &DecodeError{Path: path, Msg: fmt.Sprintf("not valid JSON: %v at byte %d", se.Err, off), Offset: off}
}

// syntaxAtKey converts an error met reading a key of the object at path,
// whose text starts after byte before: a key that is not valid text is
// named as "key (a key)".
func (w *walker) syntaxAtKey(path string, err error, before int64) error {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && isTextError(se) {
		if msg := textProblem(w.data, se.ByteOffset); msg != "" {
			key := rawKey(w.data, before)
			return &DecodeError{Path: joinPath(path, key) + " (a key)", Msg: msg, Offset: se.ByteOffset}
		}
	}
	return w.syntax(path, err)
}

// isTextError reports whether the tokenizer refused text rather than
// JSON: bytes that are not UTF-8, or an unpaired surrogate escape. (Its
// errors for these are not exported.)
func isTextError(se *jsontext.SyntacticError) bool {
	msg := se.Err.Error()
	return strings.Contains(msg, "UTF-8") || strings.Contains(msg, "surrogate")
}

// textProblem describes what is wrong with the text at data[off:] if it is
// a problem of text rather than of JSON: a byte that is not UTF-8, or an
// unpaired surrogate escape. It returns "" otherwise.
func textProblem(data []byte, off int64) string {
	if off < 0 || off >= int64(len(data)) {
		return ""
	}
	rest := data[off:]
	if rest[0] >= utf8.RuneSelf {
		if r, size := utf8.DecodeRune(rest); r == utf8.RuneError && size == 1 {
			return fmt.Sprintf("byte 0x%02X is not valid UTF-8", rest[0])
		}
	}
	// The tokenizer reports a string's problem at the string's start or at
	// the offending byte: look for the first problem from there to the
	// string's end.
	if i, msg := checkJSONText(stringAt(rest), 0); i >= 0 {
		return msg
	}
	return ""
}

// stringAt returns the JSON string starting at s[0] (with its quotes) if
// s starts with one, or the escape or byte s starts with.
func stringAt(s []byte) []byte {
	if len(s) == 0 || s[0] != '"' {
		end := min(len(s), 12)
		return append([]byte(`"`), s[:end]...)
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return s[:i+1]
		}
	}
	return s
}

// rawKey returns the key whose quoted text is the first after data[off]
// (past white space and a ','), with bytes that are not UTF-8 shown as
// U+FFFD.
func rawKey(data []byte, off int64) string {
	s := stringAt(valueText(data[off:]))
	s = bytes.TrimPrefix(s, []byte(`"`))
	s = bytes.TrimSuffix(s, []byte(`"`))
	return strings.ToValidUTF8(string(s), "\uFFFD")
}

// joinPath names member key of the object at path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// valueText trims what precedes a value in the text between two tokens:
// white space, ':' and ','.
func valueText(b []byte) []byte {
	return bytes.TrimLeft(b, " \t\r\n:,")
}

// skipSpace returns the offset of the first byte at or after off that is
// not JSON white space.
func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n", data[off]) >= 0 {
		off++
	}
	return off
}

// clipText cuts a value quoted in a message to 64 bytes.
func clipText(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// wantKind is the JSON kind a value of Go type t must have ('t' for a
// boolean, '0' for a number), 0 for any.
func wantKind(t reflect.Type) jsontext.Kind {
	switch t.Kind() {
	case reflect.String:
		return '"'
	case reflect.Bool:
		return 't'
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return '0'
	case reflect.Struct, reflect.Map:
		return '{'
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return '"' // base64
		}
		return '['
	case reflect.Array:
		return '['
	}
	return 0
}

func isScalar(k reflect.Kind) bool {
	switch k {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface, reflect.Pointer:
		return false
	}
	return true
}

// kindNoun names a JSON kind.
func kindNoun(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

// jsonNoun names the JSON kind Go type t is written as ("value" if any).
func jsonNoun(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return kindNoun(wantKind(t))
}
