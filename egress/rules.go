package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// rule is one parsed entry of a policy list.
type rule struct {
	text   string       // as given, for messages
	prefix netip.Prefix // address rules; invalid for name rules
	name   string       // name rules: lower case, without a trailing dot; a leading '.' matches names under it
	port   uint16       // 0: any port
}

// parseRule parses one entry of Policy.Allow or Deny.
func parseRule(s string) (rule, error) {
	s = strings.TrimSpace(s)
	r := rule{text: s}
	if s == "" {
		return r, errors.New("empty entry")
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		r.prefix = canonicalPrefix(p)
		return r, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		r.prefix = canonicalPrefix(netip.PrefixFrom(a.WithZone(""), a.BitLen()))
		return r, nil
	}
	host, port := s, ""
	if strings.Contains(s, ":") {
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return r, fmt.Errorf("%q is not a CIDR, an address or a host name, with an optional :PORT", s)
		}
		host, port = h, p
		// The rule of api.ParsePort (which this level may not import).
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 || strconv.FormatUint(n, 10) != port {
			return r, fmt.Errorf("%q: bad port %q: want 1 to 65535, without leading zeros", s, port)
		}
		r.port = uint16(n)
	}
	if p, err := netip.ParsePrefix(host); err == nil {
		r.prefix = canonicalPrefix(p)
		return r, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		r.prefix = canonicalPrefix(netip.PrefixFrom(a.WithZone(""), a.BitLen()))
		return r, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		if !validHostName(rest) {
			return r, fmt.Errorf("%q is not a CIDR, an address or a host name", s)
		}
		r.name = "." + rest
		return r, nil
	}
	if !validHostName(name) {
		return r, fmt.Errorf("%q is not a CIDR, an address or a host name", s)
	}
	r.name = name
	return r, nil
}

// canonicalPrefix maps an IPv4-mapped IPv6 prefix to its IPv4 form, and
// masks it.
func canonicalPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

// validHostName reports whether s is a plausible DNS name: dot-separated
// labels of letters, digits, '-' and '_'.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func (r rule) matchAddr(a netip.Addr, port uint16) bool {
	return r.prefix.IsValid() && (r.port == 0 || r.port == port) && r.prefix.Contains(a)
}

func (r rule) matchName(name string, port uint16) bool {
	if r.name == "" || (r.port != 0 && r.port != port) {
		return false
	}
	if strings.HasPrefix(r.name, ".") {
		return strings.HasSuffix(name, r.name)
	}
	return name == r.name
}

// defaultDenials are rule 4 of Policy, with their names.
var defaultDenials = []struct {
	what   string
	prefix netip.Prefix
}{
	{"loopback address", netip.MustParsePrefix("127.0.0.0/8")},
	{"loopback address", netip.MustParsePrefix("::1/128")},
	{"link-local address", netip.MustParsePrefix("169.254.0.0/16")},
	{"link-local address", netip.MustParsePrefix("fe80::/10")},
	{"unspecified address", netip.MustParsePrefix("0.0.0.0/8")},
	{"unspecified address", netip.MustParsePrefix("::/128")},
	{"multicast address", netip.MustParsePrefix("224.0.0.0/4")},
	{"multicast address", netip.MustParsePrefix("ff00::/8")},
	{"broadcast address", netip.MustParsePrefix("255.255.255.255/32")},
}

// endpoint is one address of the fleet: a literal address or a host name,
// and a port.
type endpoint struct {
	what string // "orchestrator http://…" or "fleet endpoint http://…"
	host string // lower case; a literal address in its canonical form
	addr netip.Addr
	port uint16
}

// parseEndpoint parses a URL ("http://host:port", the port defaulting to
// the scheme's) or HOST:PORT.
func parseEndpoint(s, what string) (endpoint, error) {
	hostport := s
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return endpoint{}, err
		}
		hostport = u.Host
		if u.Port() == "" {
			switch u.Scheme {
			case "https":
				hostport = net.JoinHostPort(u.Hostname(), "443")
			default:
				hostport = net.JoinHostPort(u.Hostname(), "80")
			}
		}
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return endpoint{}, fmt.Errorf("%q: want a URL or HOST:PORT", s)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return endpoint{}, fmt.Errorf("%q: bad port %q", s, port)
	}
	e := endpoint{what: what + " " + s, host: strings.TrimSuffix(strings.ToLower(host), "."), port: uint16(n)}
	if a, err := netip.ParseAddr(host); err == nil {
		e.addr = a.WithZone("").Unmap()
		e.host = e.addr.String()
	}
	return e, nil
}
