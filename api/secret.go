package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
)

// Secret references. A job document never needs to hold a secret: an
// "http" executor's header value, or any value inside the payload or the
// executor's body, may instead be the object
//
//	{"secret_env": "NAME"}
//
// which the worker that runs the attempt replaces by the value of its own
// environment variable NAME, provided NAME is on that worker's allow-list
// (`jobfleet worker --secret-env NAME,...`). The value is resolved for each
// attempt, only on the worker, and is never stored in etcd or returned by
// the API. An object is a reference only if "secret_env" is its only key;
// its value must then be a string that is a valid variable name.

// SecretEnvKey is the key of a secret reference object.
const SecretEnvKey = "secret_env"

// RedactedValue replaces a literal header value in Job.Redacted.
const RedactedValue = "<redacted>"

// maxSecretNameBytes bounds the variable name of a secret reference.
const maxSecretNameBytes = 256

// HeaderValue is the value of an "http" executor's header: either a
// literal, written in JSON as a plain string, or a secret reference,
// written as {"secret_env": "NAME"}. The zero value is the empty literal.
// It marshals back to exactly the form it was read from.
type HeaderValue struct {
	// Value is the literal value; ignored when SecretEnv is set.
	Value string
	// SecretEnv names the worker's environment variable that holds the
	// value; empty for a literal.
	SecretEnv string
}

// Literal returns a HeaderValue that is the literal s.
func Literal(s string) HeaderValue { return HeaderValue{Value: s} }

// SecretEnv returns a HeaderValue that refers to the worker's environment
// variable name.
func SecretEnv(name string) HeaderValue { return HeaderValue{SecretEnv: name} }

// IsSecret reports whether v is a secret reference.
func (v HeaderValue) IsSecret() bool { return v.SecretEnv != "" }

// String returns the literal value, or "{secret_env: NAME}" for a
// reference; never a secret.
func (v HeaderValue) String() string {
	if v.IsSecret() {
		return "{" + SecretEnvKey + ": " + v.SecretEnv + "}"
	}
	return v.Value
}

// MarshalJSON writes a literal as a JSON string and a reference as
// {"secret_env": "NAME"}.
func (v HeaderValue) MarshalJSON() ([]byte, error) {
	if v.IsSecret() {
		return json.Marshal(map[string]string{SecretEnvKey: v.SecretEnv})
	}
	return json.Marshal(v.Value)
}

// UnmarshalJSON reads a JSON string (a literal) or an object whose only
// key is "secret_env" with a string value (a reference). Anything else is
// a *json.UnmarshalTypeError, which DecodeJob turns into a *FieldError
// naming the header.
func (v *HeaderValue) UnmarshalJSON(data []byte) error {
	bad := &json.UnmarshalTypeError{Value: describeJSON(data), Type: headerValueType}
	switch {
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return bad
		}
		*v = HeaderValue{Value: s}
		return nil
	case len(data) > 0 && data[0] == '{':
		name, ok, err := parseSecretRef(data)
		if err != nil || !ok {
			return bad
		}
		*v = HeaderValue{SecretEnv: name}
		return nil
	}
	return bad
}

var headerValueType = reflect.TypeFor[HeaderValue]()

// describeJSON names the kind of a JSON value for error messages, without
// repeating it (it may be a secret).
func describeJSON(data []byte) string {
	switch b := bytes.TrimSpace(data); {
	case len(b) == 0:
		return "nothing"
	case b[0] == '{':
		return "object"
	case b[0] == '[':
		return "array"
	case b[0] == '"':
		return "string"
	case b[0] == 't' || b[0] == 'f':
		return "bool"
	case b[0] == 'n':
		return "null"
	default:
		return "number"
	}
}

// parseSecretRef reports whether the JSON object data is a secret
// reference (its only key is "secret_env"), and returns the name it holds.
// A reference whose value is not a string, or whose key is repeated, is an
// error.
func parseSecretRef(data []byte) (name string, ok bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false, errors.New("not an object")
	}
	tok, err := dec.Token()
	if err != nil {
		return "", false, err
	}
	if tok != SecretEnvKey {
		return "", false, nil
	}
	tok, err = dec.Token()
	if err != nil {
		return "", false, err
	}
	s, isString := tok.(string)
	if end, err := dec.Token(); err != nil || end != json.Delim('}') {
		return "", false, nil // more keys: an ordinary object
	}
	if !isString {
		return "", true, fmt.Errorf("%q must be a string naming an environment variable", SecretEnvKey)
	}
	return s, true, nil
}

// validSecretName reports whether name can name an environment variable of
// a secret reference: a letter or '_', then letters, digits and '_', at
// most 256 bytes.
func validSecretName(name string) bool {
	if name == "" || len(name) > maxSecretNameBytes {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// SecretRefs returns the variable names of the secret references in the
// JSON value raw (a payload or an executor body), in document order. It
// fails with a *FieldError, naming the reference's path under field (such
// as "payload.auth.token"), on a reference whose value is not a string
// that is a valid variable name. raw must be valid JSON.
func SecretRefs(field string, raw json.RawMessage) ([]string, error) {
	var names []string
	_, err := rewriteSecretRefs(field, raw, func(path, name string) (string, error) {
		if !validSecretName(name) {
			return "", fieldErr(path, "secret reference %q is not a valid environment variable name (letters, digits and '_', not starting with a digit, at most %d bytes)", name, maxSecretNameBytes)
		}
		names = append(names, name)
		return "", nil
	})
	return names, err
}

// ResolveSecretRefs returns raw with every secret reference replaced by the
// JSON string of lookup(name). The rest of raw is kept byte for byte, and
// raw itself is returned when it holds no reference. An error of lookup is
// returned prefixed with the reference's path under field ("payload.token:
// ..."); lookup's errors must not carry the value.
func ResolveSecretRefs(field string, raw json.RawMessage, lookup func(name string) (string, error)) (json.RawMessage, error) {
	return rewriteSecretRefs(field, raw, func(path, name string) (string, error) {
		v, err := lookup(name)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return v, nil
	})
}

// rewriteSecretRefs walks the JSON value raw and calls f for each secret
// reference with its path (field, then ".key" and "[i]" steps) and name;
// it splices the JSON string of f's result in place of the reference. A
// reference whose value is not a string is a *FieldError.
func rewriteSecretRefs(field string, raw json.RawMessage, f func(path, name string) (string, error)) (json.RawMessage, error) {
	if len(raw) == 0 || !bytes.Contains(raw, []byte(`"`+SecretEnvKey+`"`)) {
		return raw, nil // fast path: cannot hold a reference
	}
	w := &refWalker{dec: json.NewDecoder(bytes.NewReader(raw)), raw: raw, f: f}
	w.dec.UseNumber()
	tok, err := w.dec.Token()
	if err != nil {
		return nil, fieldErr(field, "not valid JSON")
	}
	if err := w.value(tok, field); err != nil {
		return nil, err
	}
	if w.out == nil {
		return raw, nil
	}
	w.out = append(w.out, raw[w.copied:]...)
	return w.out, nil
}

// refWalker walks a JSON document token by token, copying it to out with
// references replaced. out stays nil until the first replacement.
type refWalker struct {
	dec    *json.Decoder
	raw    []byte
	f      func(path, name string) (string, error)
	out    []byte
	copied int // raw[:copied] is in out (once out is non-nil)
}

// value consumes the rest of the value that starts with tok, at path.
func (w *refWalker) value(tok json.Token, path string) error {
	malformed := func(err error) error { return fieldErr(path, "not valid JSON: %v", err) }
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	if d == '[' {
		for i := 0; ; i++ {
			tok, err := w.dec.Token()
			if err != nil {
				return malformed(err)
			}
			if tok == json.Delim(']') {
				return nil
			}
			if err := w.value(tok, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	// An object: its '{' has just been read.
	start := int(w.dec.InputOffset()) - 1
	var (
		keys      int
		firstKey  string
		firstName string
		isString  bool
	)
	for {
		tok, err := w.dec.Token()
		if err != nil {
			return malformed(err)
		}
		if tok == json.Delim('}') {
			break
		}
		key := tok.(string) // object keys are strings
		if tok, err = w.dec.Token(); err != nil {
			return malformed(err)
		}
		keys++
		if keys == 1 {
			firstKey = key
			firstName, isString = tok.(string)
		}
		if err := w.value(tok, path+"."+key); err != nil {
			return err
		}
	}
	if keys != 1 || firstKey != SecretEnvKey {
		return nil // an ordinary object
	}
	if !isString {
		return fieldErr(path, "a secret reference's %q must be a string naming an environment variable", SecretEnvKey)
	}
	return w.replace(start, int(w.dec.InputOffset()), path, firstName)
}

// replace splices the JSON string of f(path, name) over raw[start:end].
func (w *refWalker) replace(start, end int, path, name string) error {
	v, err := w.f(path, name)
	if err != nil {
		return err
	}
	var enc bytes.Buffer
	e := json.NewEncoder(&enc)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return err
	}
	if w.out == nil {
		w.out = make([]byte, 0, len(w.raw)+enc.Len())
	}
	w.out = append(w.out, w.raw[w.copied:start]...)
	w.out = append(w.out, bytes.TrimSuffix(enc.Bytes(), []byte("\n"))...)
	w.copied = end
	return nil
}

// Redacted returns a copy of j for readers who may not see secrets: every
// literal header value of its executor and of its notify entries is
// replaced by RedactedValue, while
// secret references are kept (they name a variable on the workers, not its
// value). Values in the payload and body are returned as they are: keep
// secrets out of them with references. The copy's Headers map is its own;
// j is not modified.
func (j Job) Redacted() Job {
	j.Executor.Headers = redactHeaders(j.Executor.Headers)
	if len(j.Notify) > 0 {
		j.Notify = slices.Clone(j.Notify)
		for i := range j.Notify {
			j.Notify[i].Headers = redactHeaders(j.Notify[i].Headers)
		}
	}
	return j
}

// redactHeaders returns a copy of h with literal values replaced by
// RedactedValue (h itself if it is empty).
func redactHeaders(h map[string]HeaderValue) map[string]HeaderValue {
	if len(h) == 0 {
		return h
	}
	h = maps.Clone(h)
	for k, v := range h {
		if !v.IsSecret() {
			h[k] = Literal(RedactedValue)
		}
	}
	return h
}
