package api

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// httpMethods are the methods an "http" executor may use.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

func (e *Executor) validate(limits Limits) error {
	switch e.Type {
	case "":
		return fieldErr("executor.type", "required; want %q, %q or a registered handler name", ExecutorHTTP, ExecutorShell)
	case ExecutorHTTP:
		if err := e.only("url", "method", "headers", "body", "follow_redirects"); err != nil {
			return err
		}
		if e.URL == "" {
			return fieldErr("executor.url", "required for executor type %q", ExecutorHTTP)
		}
		if err := ValidateURL("executor.url", e.URL); err != nil {
			return err
		}
		if e.Method != "" && !slices.Contains(httpMethods, strings.ToUpper(e.Method)) {
			return fieldErr("executor.method", "unsupported method %s; want one of %s", quoteClipped(e.Method), strings.Join(httpMethods, ", "))
		}
		if len(e.Headers) > MaxHeaders {
			return fieldErr("executor.headers", "%d headers; want at most %d", len(e.Headers), MaxHeaders)
		}
		for _, name := range slices.Sorted(maps.Keys(e.Headers)) {
			if err := validateHeader(name, e.Headers[name]); err != nil {
				return err
			}
		}
		if err := checkHeaderCase("executor.headers", e.Headers); err != nil {
			return err
		}
		if err := validateJSON("executor.body", e.Body, limits.MaxPayloadBytes); err != nil {
			return err
		}
		_, err := SecretRefs("executor.body", e.Body)
		return err
	case ExecutorShell:
		if err := e.only("command"); err != nil {
			return err
		}
		if len(e.Command) == 0 || e.Command[0] == "" {
			return fieldErr("executor.command", "required: the program and its arguments")
		}
		if len(e.Command) > MaxCommandArgs {
			return fieldErr("executor.command", "%d words; want at most %d", len(e.Command), MaxCommandArgs)
		}
		total := 0
		for i, arg := range e.Command {
			if !utf8.ValidString(arg) || strings.ContainsRune(arg, 0) {
				return fieldErr(fmt.Sprintf("executor.command[%d]", i), "must be valid UTF-8 without NUL bytes")
			}
			if total += len(arg); total > MaxCommandBytes {
				return fieldErr("executor.command", "more than %d bytes in all", MaxCommandBytes)
			}
		}
		return nil
	default:
		if builtin := nearBuiltinType(e.Type); builtin != "" {
			hint := ""
			if builtin == ExecutorHTTP {
				hint = " (it sends to http and https URLs)"
			}
			return fieldErr("executor.type", "unknown type %s; did you mean %q%s? Built-in types are lower case", quoteClipped(e.Type), builtin, hint)
		}
		if err := validateHandlerName(e.Type); err != nil {
			return err
		}
		return e.only()
	}
}

// nearBuiltinType returns the built-in executor type that name is
// probably a misspelling of ("Shell", "HTTP", "https", "shel", "sh"), or
// "". Handlers registered by Go code cannot take such names.
func nearBuiltinType(name string) string {
	lower := strings.ToLower(name)
	switch lower {
	case "sh", "bash":
		return ExecutorShell
	}
	for _, builtin := range []string{ExecutorHTTP, ExecutorShell} {
		if lower == builtin || editDistanceAtMost1(lower, builtin) {
			return builtin
		}
	}
	return ""
}

// editDistanceAtMost1 reports whether a becomes b with at most one
// insertion, deletion, substitution or swap of adjacent bytes.
func editDistanceAtMost1(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(b)-len(a) > 1 {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	if len(a) == len(b) {
		if i >= len(a)-1 {
			return true
		}
		return a[i+1:] == b[i+1:] || (a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:])
	}
	return a[i:] == b[i+1:]
}

// only reports the first set field of e that is not among allowed.
func (e *Executor) only(allowed ...string) error {
	set := []struct {
		name  string
		isSet bool
	}{
		{"url", e.URL != ""},
		{"method", e.Method != ""},
		{"headers", len(e.Headers) > 0},
		{"body", len(e.Body) > 0},
		{"command", len(e.Command) > 0},
		{"follow_redirects", e.FollowRedirects},
	}
	for _, f := range set {
		if f.isSet && !slices.Contains(allowed, f.name) {
			return fieldErr("executor."+f.name, "not used by executor type %q", e.Type)
		}
	}
	return nil
}

// ValidateURL checks raw as every URL field of the API takes it
// (executor.url, notify[i].url, a worker registration's orchestrators):
// at most MaxURLBytes, an absolute http or https URL with a host, a port
// from 1 to 65535 if it names one (CheckPort), and no user information.
// Errors are *FieldError naming field, and quote the URL only when it
// holds no password.
func ValidateURL(field, raw string) error {
	if raw == "" {
		return fieldErr(field, "required: an http or https URL")
	}
	if len(raw) > MaxURLBytes {
		return fieldErr(field, "%d bytes long; want at most %d", len(raw), MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fieldErr(field, "invalid URL %s: %v", quoteClipped(raw), errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fieldErr(field, "%s is not an absolute http or https URL", quoteClipped(raw))
	}
	if u.User != nil {
		// Not repeated: the URL holds a password.
		return fieldErr(field, "must not carry a user name or password (user:password@host); send credentials in a header, for example as a secret reference {\"secret_env\": \"NAME\"}")
	}
	if u.Host == "" || u.Hostname() == "" {
		return fieldErr(field, "%s has no host", quoteClipped(raw))
	}
	if err := CheckPort(u); err != nil {
		return fieldErr(field, "%s: %v", quoteClipped(raw), err)
	}
	return nil
}

// CheckPort checks the port of u, if it names one: a decimal number from
// 1 to 65535. A host ending in ':' with no port is refused too, so that
// what was meant is never guessed. (net/url accepts any digits: port 0,
// which no server listens on, and 99999, which does not exist.)
func CheckPort(u *url.URL) error {
	host := u.Host
	if i := strings.LastIndexByte(host, ']'); i >= 0 {
		host = host[i+1:] // an IPv6 literal: its colons are not a port's
	}
	if !strings.Contains(host, ":") {
		return nil
	}
	p := u.Port()
	n, err := strconv.Atoi(p)
	switch {
	case p == "":
		return errors.New("the host ends with ':' but names no port; give a port from 1 to 65535, or none")
	case err != nil || n < 1 || n > 65535:
		return fmt.Errorf("port %s is out of range; want 1 to 65535", p)
	}
	return nil
}

// connectionHeaders are the header names a job may not set, in lower
// case: those the HTTP client derives from the request (Host,
// Content-Length) and the hop-by-hop ones (RFC 9110 section 7.6.1), which
// would change how the request is framed or routed rather than what it
// says.
var connectionHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "keep-alive",
	"proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer", "upgrade"}

func validateHeader(name string, hv HeaderValue) error {
	return validateHeaderIn("executor.headers", name, hv)
}

// validateHeaderIn checks header name: value of the headers at field.
func validateHeaderIn(headers, name string, hv HeaderValue) error {
	if len(name) > MaxHeaderNameBytes {
		return fieldErr(headers, "header name %s is longer than %d bytes", quoteClipped(name), MaxHeaderNameBytes)
	}
	field := fmt.Sprintf("%s[%s]", headers, name)
	if len(hv.Value) > MaxHeaderValueBytes {
		return fieldErr(field, "value of %d bytes; want at most %d", len(hv.Value), MaxHeaderValueBytes)
	}
	if name == "" || strings.IndexFunc(name, func(r rune) bool { return !isTokenChar(r) }) >= 0 {
		return fieldErr(field, "invalid header name %q", name)
	}
	if strings.HasPrefix(strings.ToLower(name), "jobfleet-") {
		return fieldErr(field, "header names starting with \"Jobfleet-\" are reserved")
	}
	if slices.Contains(connectionHeaders, strings.ToLower(name)) {
		return fieldErr(field, "%s is set by the HTTP client from the URL and body, or concerns one connection only; it cannot be set", name)
	}
	if hv.IsSecret() {
		if !validSecretName(hv.SecretEnv) {
			return fieldErr(field, "secret reference %s is not a valid environment variable name (letters, digits and '_', not starting with a digit, at most %d bytes)", quoteClipped(hv.SecretEnv), maxSecretNameBytes)
		}
		return nil
	}
	value := hv.Value
	for _, r := range value {
		if (r < ' ' && r != '\t') || r == 0x7f {
			return fieldErr(field, "value contains control character %U", r)
		}
	}
	if !utf8.ValidString(value) {
		return fieldErr(field, "value is not valid UTF-8")
	}
	return nil
}

// checkHeaderCase refuses headers whose names differ only in case: HTTP
// header names are case-insensitive, so the two would be one header, and
// which value is sent would depend on map order.
func checkHeaderCase(field string, h map[string]HeaderValue) error {
	seen := make(map[string]string, len(h))
	for _, name := range slices.Sorted(maps.Keys(h)) {
		lower := strings.ToLower(name)
		if first, ok := seen[lower]; ok {
			return fieldErr(field, "duplicate key %s: %s names the same header (header names are case-insensitive); give it once",
				quoteClipped(name), quoteClipped(first))
		}
		seen[lower] = name
	}
	return nil
}

// isTokenChar reports whether r may appear in an HTTP header name (RFC 9110
// "token").
func isTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

func validateHandlerName(name string) error {
	valid := func(i int, r rune) bool {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			return true
		case i == 0:
			return false
		case r >= '0' && r <= '9':
			return true
		}
		return strings.ContainsRune("-_.:", r)
	}
	ok := len(name) <= maxHandlerBytes
	for i, r := range name {
		ok = ok && valid(i, r)
	}
	if !ok {
		return fieldErr("executor.type", "invalid handler name %s; want %q, %q or a name of letters, digits, '-', '_', '.' and ':' starting with a letter, at most %d bytes",
			quoteClipped(name), ExecutorHTTP, ExecutorShell, maxHandlerBytes)
	}
	return nil
}
