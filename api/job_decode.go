package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"
)

// DecodeJob reads one job document, a JSON object, from r. It reads at
// most maxBytes bytes (DefaultMaxDocumentBytes if maxBytes <= 0) and fails
// with an error matching ErrTooLarge beyond that. It rejects, with a
// *FieldError, fields the document does not define, including those that
// differ only in case (encoding/json would accept "ID" for "id") and
// fields given twice; and values of the wrong type, such as a duration
// that is not a string like "30s". It rejects anything but white space
// after the object, and text that is not Unicode: bytes that are not
// UTF-8 and escapes of unpaired UTF-16 surrogates, which encoding/json
// would silently turn into U+FFFD (a *FieldError naming the field). It
// does not call Normalize or Validate.
func DecodeJob(r io.Reader, maxBytes int64) (Job, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxDocumentBytes
	}
	data, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return Job{}, fmt.Errorf("read job: %w", err)
	}
	if int64(len(data)) > maxBytes {
		return Job{}, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	// encoding/json would turn invalid UTF-8 into U+FFFD without a word.
	if off, msg := checkJSONText(data, 0); off >= 0 {
		if field := fieldAt(data, off); field != "" {
			return Job{}, fieldErr(field, "%s", msg)
		}
		return Job{}, fmt.Errorf("%w: %s at byte %d", ErrInvalidJob, msg, off)
	}
	if err := checkKeys(data); err != nil {
		return Job{}, err
	}
	var j Job
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Job{}, decodeError(err)
	}
	return j, nil
}

// decodeError converts an encoding/json error into one that names the
// field and matches ErrInvalidJob.
func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Type == durationType {
			return fieldErr(typeErr.Field, "invalid duration %s; want a string such as \"30s\", \"5m\" or \"1h30m\"", typeErr.Value)
		}
		if typeErr.Type == headerValueType {
			return fieldErr(typeErr.Field, "cannot use a JSON %s as a header value; want a string or a secret reference {\"secret_env\": \"NAME\"}", typeErr.Value)
		}
		return fieldErr(typeErr.Field, "cannot use JSON %s as %s", typeErr.Value, jsonKind(typeErr.Type))
	}
	return fmt.Errorf("%w: %v", ErrInvalidJob, err)
}

// jsonKind describes a Go type in the JSON document's terms.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// The exact keys of each object of the job document whose keys are fixed,
// taken from the struct tags so they cannot drift.
var (
	jobKeys      = jsonKeys(reflect.TypeFor[Job]())
	executorKeys = jsonKeys(reflect.TypeFor[Executor]())
	retryKeys    = jsonKeys(reflect.TypeFor[RetryPolicy]())
	historyKeys  = jsonKeys(reflect.TypeFor[HistoryPolicy]())
	placeKeys    = jsonKeys(reflect.TypeFor[PlacementPolicy]())
)

func jsonKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// checkKeys walks the document's tokens: it must be exactly one JSON
// object, whose keys (and those of "executor" and "retry") are spelled
// exactly as in the document and appear once.
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err == io.EOF {
		return fmt.Errorf("%w: empty document", ErrInvalidJob)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidJob, err)
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("%w: document is not a JSON object", ErrInvalidJob)
	}
	if err := checkObject(dec, "", jobKeys); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: unexpected data after the job object", ErrInvalidJob)
	}
	return nil
}

// checkObject checks the keys of an object whose '{' has been read, up to
// and including its '}'. prefix is the object's path ("" or "executor.").
func checkObject(dec *json.Decoder, prefix string, allowed []string) error {
	seen := make(map[string]bool)
	for {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidJob, err)
		}
		if tok == json.Delim('}') {
			return nil
		}
		key := tok.(string) // Token only returns strings as object keys
		field := prefix + key
		if !slices.Contains(allowed, key) {
			for _, a := range allowed {
				if strings.EqualFold(a, key) {
					return fieldErr(field, "unknown field; did you mean %q?", a)
				}
			}
			return fieldErr(field, "unknown field")
		}
		if seen[key] {
			return fieldErr(field, "given more than once")
		}
		seen[key] = true
		if err := checkValue(dec, field); err != nil {
			return err
		}
	}
}

// checkValue consumes the value of field, checking the keys of nested
// objects with fixed keys and the format of times.
func checkValue(dec *json.Decoder, field string) error {
	switch field {
	case "executor":
		return skipValue(dec, field, executorKeys)
	case "retry":
		return skipValue(dec, field, retryKeys)
	case "history":
		return skipValue(dec, field, historyKeys)
	case "placement":
		return skipValue(dec, field, placeKeys)
	case "run_at", "created_at", "updated_at":
		return checkTime(dec, field)
	case "executor.headers":
		return checkHeaders(dec, field)
	default:
		return skipValue(dec, field, nil)
	}
}

// checkTime consumes a value that must be null or an RFC 3339 time, which
// encoding/json would otherwise reject without naming the field.
func checkTime(dec *json.Decoder, field string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidJob, err)
	}
	switch v := tok.(type) {
	case nil:
		return nil
	case string:
		var t time.Time
		if err := t.UnmarshalText([]byte(v)); err != nil {
			return fieldErr(field, "invalid time %q; want RFC 3339, such as \"2026-12-01T00:00:00Z\"", v)
		}
		return nil
	case json.Delim:
		return fieldErr(field, "want an RFC 3339 time string, not a JSON %s", map[json.Delim]string{'{': "object", '[': "array"}[v])
	default:
		return fieldErr(field, "want an RFC 3339 time string, not %v", v)
	}
}

// skipValue consumes one value; if it is an object and nested is not nil,
// its keys are checked against nested.
func skipValue(dec *json.Decoder, field string, nested []string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidJob, err)
	}
	delim, ok := tok.(json.Delim)
	if !ok || delim == '}' || delim == ']' {
		return nil
	}
	if delim == '{' && nested != nil {
		return checkObject(dec, field+".", nested)
	}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidJob, err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// checkHeaders consumes the executor's headers, which must be null or an
// object whose values are strings or secret references, so that a bad
// value is reported with its header's name (encoding/json names only the
// map).
func checkHeaders(dec *json.Decoder, field string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidJob, err)
	}
	if tok == nil {
		return nil
	}
	if tok != json.Delim('{') {
		return skipRest(dec, tok, fieldErr(field, "want an object of header names and values"))
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidJob, err)
		}
		if tok == json.Delim('}') {
			return nil
		}
		name := tok.(string) // Token only returns strings as object keys
		hfield := field + "[" + name + "]"
		bad := fieldErr(hfield, "want a string or a secret reference {%q: \"NAME\"}", SecretEnvKey)
		tok, err = dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidJob, err)
		}
		switch tok {
		case json.Delim('{'):
			key, err := dec.Token()
			if err != nil || key != SecretEnvKey {
				return bad
			}
			if v, err := dec.Token(); err != nil {
				return bad
			} else if _, ok := v.(string); !ok {
				return bad
			}
			if end, err := dec.Token(); err != nil || end != json.Delim('}') {
				return bad
			}
		default:
			if _, ok := tok.(string); !ok {
				return bad
			}
		}
	}
}

// skipRest consumes the rest of the value that tok starts, then returns
// err (or a decoding error).
func skipRest(dec *json.Decoder, tok json.Token, err error) error {
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		for depth := 1; depth > 0; {
			t, derr := dec.Token()
			if derr != nil {
				return fmt.Errorf("%w: %v", ErrInvalidJob, derr)
			}
			switch t {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
		}
	}
	return err
}
