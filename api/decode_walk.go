package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

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
		if !strings.ContainsRune(`"0tfn{[`, rune(kind)) { // not JSON at all: PeekKind gives the byte
			if bytes.HasPrefix(w.data, []byte{0x1f, 0x8b}) {
				return &DecodeError{Msg: "the body is not JSON: it starts as gzip data does; send it uncompressed (Content-Encoding is not read)"}
			}
			_, err := w.dec.ReadToken()
			return w.syntax(path, err)
		}
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
