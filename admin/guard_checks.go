package admin

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// checkLoopbackHost refuses a request to a loopback listener whose Host
// header names anything but a loopback address or "localhost" with the
// port the request arrived on: a web page that rebinds its own DNS name
// to 127.0.0.1 sends its own name as Host.
func checkLoopbackHost(r *http.Request) error {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	ip := net.ParseIP(host)
	if !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("the Host header %q is not a loopback address: this API listens on loopback and answers only requests addressed to 127.0.0.1, [::1] or localhost (DNS rebinding defence)", r.Host)
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		_, lport, err := net.SplitHostPort(la.String())
		if port == "" {
			port = "80"
			if r.TLS != nil {
				port = "443"
			}
		}
		if err == nil && port != lport {
			return fmt.Errorf("the Host header %q names port %s, but this listener is on port %s (DNS rebinding defence)", r.Host, port, lport)
		}
	}
	return nil
}

// checkOrigin refuses a request that a browser sent on behalf of another
// site: an Origin header naming another host than the request's Host, or
// Sec-Fetch-Site: cross-site. The API never sends CORS headers, so a
// browser also keeps other sites from reading replies.
func checkOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if o == "null" || err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Errorf("cross-origin request refused: Origin %q is not this server (%s)", o, r.Host)
		}
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return errors.New("cross-site request refused (Sec-Fetch-Site: cross-site)")
	}
	return nil
}

// checkContentType refuses a request (other than GET and HEAD) whose body
// is not declared application/json: a body without a Content-Type, or any
// Content-Type but application/json (a charset parameter of utf-8
// allowed), even on a request without a body. HTML forms and the simple
// requests any web page may send cross-site carry only text/plain,
// multipart/form-data or application/x-www-form-urlencoded.
func checkContentType(r *http.Request) error {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength != 0 {
			return errors.New("a request body needs Content-Type: application/json")
		}
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("Content-Type %q is not supported: send application/json", ct)
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return fmt.Errorf("Content-Type %q is not supported: send application/json (charset utf-8 at most)", ct)
		}
	}
	return nil
}
