package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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

// walker walks a document's tokens beside the Go type they decode into.
type walker struct {
	data []byte
	dec  *jsontext.Decoder
}

var (
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType            = reflect.TypeFor[time.Time]()
)

// value consumes the value at path, which decodes into t (nil: free-form).
// opts is the struct field's tag options ("string" for `json:",string"`).
func (w *walker) value(t reflect.Type, path, opts string) error {
	kind := w.dec.PeekKind()
	if kind == 0 || kind == '}' || kind == ']' {
		_, err := w.dec.ReadToken() // fails: no value starts here
		return w.syntax(path, err)
	}
	start := w.dec.InputOffset()
	switch {
	case t == nil || t == rawMessageType || t.Kind() == reflect.Interface:
		return w.raw(path)
	case reflect.PointerTo(t).Implements(unmarshalerType):
		if err := w.raw(path); err != nil {
			return err
		}
		return w.custom(t, path, valueText(w.data[start:w.dec.InputOffset()]), start)
	}
	if kind == 'n' {
		_, err := w.dec.ReadToken()
		return w.syntax(path, err)
	}
	if kind == '"' && reflect.PointerTo(t).Implements(textUnmarshalerType) {
		if err := w.raw(path); err != nil {
			return err
		}
		return w.custom(t, path, valueText(w.data[start:w.dec.InputOffset()]), start)
	}
	if t.Kind() == reflect.Pointer {
		return w.value(t.Elem(), path, opts)
	}
	if opts == "string" && kind == '"' && isScalar(t.Kind()) {
		// `json:",string"`: a number or bool written inside a string.
		return w.raw(path)
	}
	want := wantKind(t)
	if want == 0 || want == kind || (want == 't' && kind == 'f') {
		switch want {
		case '{':
			if t.Kind() == reflect.Map {
				return w.mapping(t, path)
			}
			return w.object(t, path)
		case '[':
			return w.array(t.Elem(), path)
		case '0':
			return w.number(t, path)
		}
		return w.raw(path)
	}
	if path == "" {
		return &DecodeError{Msg: fmt.Sprintf("the document is a JSON %s, not a JSON %s", kindNoun(kind), jsonNoun(t)), Offset: start}
	}
	return &DecodeError{Path: path, Msg: fmt.Sprintf("cannot use JSON %s as %s", kindNoun(kind), jsonKind(t)), Offset: start}
}

// raw consumes a free-form value at path, checking its text.
func (w *walker) raw(path string) error {
	switch w.dec.PeekKind() {
	case '{':
		if _, err := w.dec.ReadToken(); err != nil {
			return w.syntax(path, err)
		}
		seen := make(map[string]struct{})
		for {
			name, done, err := w.name(path, seen)
			if err != nil || done {
				return err
			}
			if err := w.raw(joinPath(path, name)); err != nil {
				return err
			}
		}
	case '[':
		return w.array(nil, path)
	}
	_, err := w.dec.ReadToken()
	return w.syntax(path, err)
}

// name reads the next key of the object at path, or its closing brace
// (done); seen holds the keys read so far.
func (w *walker) name(path string, seen map[string]struct{}) (name string, done bool, err error) {
	before := w.dec.InputOffset()
	if w.dec.PeekKind() == '}' {
		_, err := w.dec.ReadToken()
		return "", true, w.syntax(path, err)
	}
	tok, err := w.dec.ReadToken()
	if err != nil {
		return "", false, w.syntaxAtKey(path, err, before)
	}
	name = tok.String()
	if _, dup := seen[name]; dup {
		return "", false, &DecodeError{Path: path, Msg: fmt.Sprintf("duplicate key %s", quoteClipped(name)), Offset: w.dec.InputOffset()}
	}
	seen[name] = struct{}{}
	return name, false, nil
}

// object consumes an object that decodes into struct type t.
func (w *walker) object(t reflect.Type, path string) error {
	if _, err := w.dec.ReadToken(); err != nil {
		return w.syntax(path, err)
	}
	fields := structFields(t)
	seen := make(map[string]struct{})
	for {
		name, done, err := w.name(path, seen)
		if err != nil || done {
			return err
		}
		field := joinPath(path, name)
		f, ok := fields.byName[name]
		if !ok {
			return &DecodeError{Path: field, Msg: unknownField(name, fields.names), Offset: w.dec.InputOffset()}
		}
		if err := w.value(f.typ, field, f.opts); err != nil {
			return err
		}
	}
}

// unknownField is the message for an unknown key among a struct's names.
func unknownField(name string, names []string) string {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return fmt.Sprintf("unknown field; did you mean %q?", n)
		}
	}
	return "unknown field"
}

// mapping consumes an object that decodes into map type t: keys are
// named in brackets.
func (w *walker) mapping(t reflect.Type, path string) error {
	if _, err := w.dec.ReadToken(); err != nil {
		return w.syntax(path, err)
	}
	seen := make(map[string]struct{})
	for {
		name, done, err := w.name(path, seen)
		if err != nil || done {
			return err
		}
		if err := w.value(t.Elem(), path+"["+name+"]", ""); err != nil {
			return err
		}
	}
}

// array consumes an array whose elements decode into elem (nil:
// free-form).
func (w *walker) array(elem reflect.Type, path string) error {
	if _, err := w.dec.ReadToken(); err != nil {
		return w.syntax(path, err)
	}
	for i := 0; ; i++ {
		if w.dec.PeekKind() == ']' {
			_, err := w.dec.ReadToken()
			return w.syntax(path, err)
		}
		if err := w.value(elem, path+"["+strconv.Itoa(i)+"]", ""); err != nil {
			return err
		}
	}
}

// number consumes a number that decodes into the numeric type t,
// refusing fractions and out-of-range values for integers.
func (w *walker) number(t reflect.Type, path string) error {
	start := w.dec.InputOffset()
	if _, err := w.dec.ReadToken(); err != nil {
		return w.syntax(path, err)
	}
	text := string(valueText(w.data[start:w.dec.InputOffset()]))
	var err error
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		_, err = strconv.ParseInt(text, 10, t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		_, err = strconv.ParseUint(text, 10, t.Bits())
	default:
		_, err = strconv.ParseFloat(text, t.Bits())
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return &DecodeError{Path: path, Msg: fmt.Sprintf("%s is out of range for %s", clipText(text), jsonKind(t)), Offset: start}
	}
	return &DecodeError{Path: path, Msg: fmt.Sprintf("cannot use JSON number %s as %s", clipText(text), jsonKind(t)), Offset: start}
}

// custom decodes raw with t's own UnmarshalJSON (or UnmarshalText, for a
// string), so that what it refuses is reported at path.
func (w *walker) custom(t reflect.Type, path string, raw []byte, off int64) error {
	p := reflect.New(t).Interface()
	var err error
	if u, ok := p.(json.Unmarshaler); ok {
		err = u.UnmarshalJSON(raw)
	} else {
		var s string
		if err = json.Unmarshal(raw, &s); err == nil {
			err = p.(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
		}
	}
	if err == nil {
		return nil
	}
	return &DecodeError{Path: path, Msg: customMessage(t, raw, err), Offset: off}
}

// customMessage words the error of a type's own decoding.
func customMessage(t reflect.Type, raw []byte, err error) string {
	var typeErr *json.UnmarshalTypeError
	isTypeErr := errors.As(err, &typeErr)
	switch {
	case t == durationType && isTypeErr:
		return fmt.Sprintf("invalid duration %s; want a string such as \"30s\", \"5m\" or \"1h30m\"", clipText(typeErr.Value))
	case t == headerValueType:
		return fmt.Sprintf("want a string or a secret reference {%q: \"NAME\"}, not a JSON %s", SecretEnvKey, describeJSON(raw))
	case t == timeType && len(raw) > 0 && raw[0] == '"':
		return fmt.Sprintf("invalid time %s; want RFC 3339, such as \"2026-12-01T00:00:00Z\"", clipText(string(raw)))
	case t == timeType:
		return fmt.Sprintf("want an RFC 3339 time string, not a JSON %s", describeJSON(raw))
	case isTypeErr:
		return fmt.Sprintf("cannot use JSON %s as %s", clipText(typeErr.Value), jsonKind(t))
	}
	return err.Error()
}

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

// structInfo is what the walker needs of a struct type: its JSON names,
// as encoding/json decodes them (exported fields, tag names, embedded
// structs inlined), with their types and tag options.
type structInfo struct {
	byName map[string]fieldInfo
	names  []string // in declaration order, for suggestions
}

type fieldInfo struct {
	typ  reflect.Type
	opts string // "string" for `json:",string"`, else ""
}

var structCache sync.Map // reflect.Type -> *structInfo

func structFields(t reflect.Type) *structInfo {
	if info, ok := structCache.Load(t); ok {
		return info.(*structInfo)
	}
	info := &structInfo{byName: map[string]fieldInfo{}}
	addStructFields(info, t, 0)
	structCache.Store(t, info)
	return info
}

func addStructFields(info *structInfo, t reflect.Type, depth int) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct && depth < 8 {
				addStructFields(info, et, depth+1)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := info.byName[name]; dup {
			continue // the shallower field wins, as in encoding/json
		}
		fi := fieldInfo{typ: f.Type}
		if strings.Contains(","+opts+",", ",string,") {
			fi.opts = "string"
		}
		info.byName[name] = fi
		info.names = append(info.names, name)
	}
}
