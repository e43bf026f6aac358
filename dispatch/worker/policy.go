package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrDestinationDenied is matched (errors.Is) by every *DestinationError:
// the "http" executor refused to connect to a destination.
var ErrDestinationDenied = errors.New("destination denied by the worker's HTTP policy")

// DestinationError says that the "http" executor refused a destination,
// and by which rule. Nothing was sent to it.
type DestinationError struct {
	// Dest is the destination as checked: "169.254.169.254:80", or a host
	// name and port before resolution ("metadata.internal:80").
	Dest string
	// Rule says which rule refused it, such as "link-local address
	// (169.254.0.0/16), denied by default".
	Rule string
}

func (e *DestinationError) Error() string {
	return fmt.Sprintf("destination %s refused: %s", e.Dest, e.Rule)
}

// Is makes errors.Is(err, ErrDestinationDenied) true.
func (e *DestinationError) Is(target error) bool { return target == ErrDestinationDenied }

// Resolver resolves host names to addresses; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// HTTPPolicy says where the "http" executor may connect. Every connection
// is checked when it is made, on the address a host name resolved to (so
// that a name cannot be re-pointed, DNS rebinding, past the check), and
// host names are checked as written in the URL before that. The rules, in
// the order they are applied (the first that matches decides):
//
//  1. Deny: a destination on the deny list is refused.
//  2. The fleet: the orchestrators the worker polls (kept current as
//     discovery reports them), the Fleet endpoints (etcd) and the etcd
//     endpoints the orchestrators name in their poll replies are refused,
//     by address and port; no allow rule overrides this.
//  3. etcd's ports: 2379 and 2380 (etcd's registered client and peer
//     ports) are refused on every host, unless an Allow entry that names
//     the port explicitly ("10.0.0.9:2379", "store.internal:2380")
//     permits the destination; an entry without a port does not.
//  4. Allow: a destination on the allow list is permitted.
//  5. Default denials: loopback (127.0.0.0/8, ::1), link-local
//     (169.254.0.0/16, fe80::/10, where cloud metadata services live),
//     unspecified and "this network" addresses (0.0.0.0/8, ::), multicast
//     and broadcast are refused.
//  6. Anything else is permitted.
//
// IPv4-mapped IPv6 addresses (::ffff:127.0.0.1) are checked as the IPv4
// address they map. A host name permitted by an Allow entry is permitted
// whatever it resolves to, except by rules 1 to 3.
//
// Entries of Allow and Deny are, each optionally followed by ":PORT" to
// match that port only: a CIDR ("10.0.0.0/8", "fd00::/8"), an address
// ("169.254.169.254", "[::1]:8443" with a port), or a host name
// ("metadata.google.internal"; "*.internal" matches every name under
// internal). Names match the URL's host as written, case-insensitively;
// addresses and CIDRs match the address connected to.
type HTTPPolicy struct {
	// Allow lists destinations permitted although a default denial (rules
	// 3 and 5) covers them, e.g. "127.0.0.1" for a receiver on the worker's own
	// host.
	Allow []string
	// Deny lists destinations never connected to (rule 1).
	Deny []string
	// Fleet lists further endpoints of the fleet never connected to (rule
	// 2), as URLs ("http://10.0.0.1:2379") or HOST:PORT: give etcd's
	// client and peer endpoints. The orchestrators the worker polls need
	// not be listed. A host name is resolved at each check.
	Fleet []string
	// ProxyFromEnvironment sends the executor's requests through the proxy
	// that HTTP_PROXY, HTTPS_PROXY and NO_PROXY name. Off by default: a
	// proxy connects to the destination itself, so the policy can check a
	// destination's host as written in the URL (its name, or its address
	// if it is one) but not the address a name resolves to; the proxy's
	// own address must pass the policy too.
	ProxyFromEnvironment bool
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
}

// rule is one parsed entry of a policy list.
type rule struct {
	text   string       // as given, for messages
	prefix netip.Prefix // address rules; invalid for name rules
	name   string       // name rules: lower case, without a trailing dot; a leading '.' matches names under it
	port   uint16       // 0: any port
}

// parseRule parses one entry of HTTPPolicy.Allow or Deny.
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
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return r, fmt.Errorf("%q: bad port %q", s, port)
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

// defaultDenials are rule 4 of HTTPPolicy, with their names.
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

// destPolicy enforces an HTTPPolicy. Safe for concurrent use.
type destPolicy struct {
	allow, deny []rule
	fixed       []endpoint // HTTPPolicy.Fleet
	resolver    Resolver

	mu            sync.Mutex // guards orchestrators and etcd
	orchestrators []endpoint // from discovery
	etcd          []endpoint // from poll replies; only grows, up to maxLearnedEtcd
}

// maxLearnedEtcd bounds the etcd endpoints a worker keeps from poll
// replies.
const maxLearnedEtcd = 64

// etcdPorts are etcd's registered client and peer ports, denied on every
// host unless allowed explicitly (rule 3).
var etcdPorts = []uint16{2379, 2380}

// newDestPolicy parses p; errors name the bad entry.
func newDestPolicy(p HTTPPolicy) (*destPolicy, error) {
	d := &destPolicy{resolver: p.Resolver}
	if d.resolver == nil {
		d.resolver = net.DefaultResolver
	}
	for _, s := range p.Allow {
		r, err := parseRule(s)
		if err != nil {
			return nil, fmt.Errorf("HTTP allow list: %w", err)
		}
		d.allow = append(d.allow, r)
	}
	for _, s := range p.Deny {
		r, err := parseRule(s)
		if err != nil {
			return nil, fmt.Errorf("HTTP deny list: %w", err)
		}
		d.deny = append(d.deny, r)
	}
	for _, s := range p.Fleet {
		e, err := parseEndpoint(strings.TrimSpace(s), "fleet endpoint")
		if err != nil {
			return nil, fmt.Errorf("fleet endpoints: %w", err)
		}
		d.fixed = append(d.fixed, e)
	}
	return d, nil
}

// setOrchestrators replaces the orchestrators' endpoints with those of
// the base URLs addrs; unparsable ones are skipped (discovery validated
// them).
func (d *destPolicy) setOrchestrators(addrs []string) {
	eps := make([]endpoint, 0, len(addrs))
	for _, a := range addrs {
		if e, err := parseEndpoint(a, "orchestrator"); err == nil {
			eps = append(eps, e)
		}
	}
	d.mu.Lock()
	d.orchestrators = eps
	d.mu.Unlock()
}

// learnEtcd adds the etcd endpoints an orchestrator named (URLs) to the
// denied fleet endpoints, and returns how many were new. They are never
// removed: an endpoint the fleet stopped using is still etcd's.
// Unparsable entries are skipped.
func (d *destPolicy) learnEtcd(urls []string) int {
	if len(urls) == 0 {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	added := 0
	for _, s := range urls {
		e, err := parseEndpoint(strings.TrimSpace(s), "fleet etcd endpoint")
		if err != nil || len(d.etcd) >= maxLearnedEtcd {
			continue
		}
		if slices.ContainsFunc(d.etcd, func(o endpoint) bool { return o.host == e.host && o.port == e.port }) {
			continue
		}
		d.etcd = append(d.etcd, e)
		added++
	}
	return added
}

func (d *destPolicy) fleet() []endpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Concat(d.fixed, d.orchestrators, d.etcd)
}

const etcdPortRule = "etcd's port, denied on every host by default (allow it with an --http-allow entry naming the port, HOST:%d)"

const fleetRule = "the fleet's own endpoint, always denied"

// checkName applies the rules that look at a host name as written (rules
// 1 to 3 for names); it reports whether an allow rule permits the name.
func (d *destPolicy) checkName(name string, port uint16) (allowed bool, err error) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	dest := net.JoinHostPort(name, strconv.Itoa(int(port)))
	for _, r := range d.deny {
		if r.matchName(name, port) {
			return false, &DestinationError{Dest: dest, Rule: fmt.Sprintf("on the deny list (%s)", r.text)}
		}
	}
	for _, e := range d.fleet() {
		if e.host == name && e.port == port {
			return false, &DestinationError{Dest: dest, Rule: fmt.Sprintf("%s (%s)", e.what, fleetRule)}
		}
	}
	etcdPort := slices.Contains(etcdPorts, port)
	for _, r := range d.allow {
		if r.matchName(name, port) && (!etcdPort || r.port == port) {
			return true, nil
		}
	}
	return false, nil
}

// checkAddr applies the rules to the address a connection goes to.
// nameAllowed says an allow rule permitted the host name it was resolved
// from. With ctx non-nil, fleet endpoints given by name are resolved to
// compare their addresses; without, only literal ones are compared.
func (d *destPolicy) checkAddr(ctx context.Context, ap netip.AddrPort, nameAllowed bool) error {
	a := ap.Addr().WithZone("").Unmap()
	port := ap.Port()
	dest := netip.AddrPortFrom(a, port).String()
	for _, r := range d.deny {
		if r.matchAddr(a, port) {
			return &DestinationError{Dest: dest, Rule: fmt.Sprintf("on the deny list (%s)", r.text)}
		}
	}
	for _, e := range d.fleet() {
		if e.port != port {
			continue
		}
		if e.addr.IsValid() {
			if e.addr == a {
				return &DestinationError{Dest: dest, Rule: fmt.Sprintf("%s (%s)", e.what, fleetRule)}
			}
			continue
		}
		if ctx == nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ips, _ := d.resolver.LookupNetIP(rctx, "ip", e.host)
		cancel()
		for _, ip := range ips {
			if ip.WithZone("").Unmap() == a {
				return &DestinationError{Dest: dest, Rule: fmt.Sprintf("%s (%s)", e.what, fleetRule)}
			}
		}
	}
	if nameAllowed { // by an entry naming the port, if it is etcd's
		return nil
	}
	if slices.Contains(etcdPorts, port) {
		for _, r := range d.allow {
			if r.port == port && r.matchAddr(a, port) {
				return nil
			}
		}
		return &DestinationError{Dest: dest, Rule: fmt.Sprintf(etcdPortRule, port)}
	}
	for _, r := range d.allow {
		if r.matchAddr(a, port) {
			return nil
		}
	}
	for _, dd := range defaultDenials {
		if dd.prefix.Contains(a) {
			return &DestinationError{Dest: dest, Rule: fmt.Sprintf("%s (%s), denied by default (allow it with --http-allow)", dd.what, dd.prefix)}
		}
	}
	return nil
}

// checkURL checks a request's URL before it is sent: its host as written
// (a name against the name rules, an address against all rules). It does
// not resolve names: connections are checked when they are made.
func (d *destPolicy) checkURL(u *url.URL) error {
	if u.User != nil {
		return errors.New("the URL carries a user name or password; refused (send credentials in a header)")
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "https":
		port = "443"
	default:
		port = "80"
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("bad port %q", port)
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		return d.checkAddr(nil, netip.AddrPortFrom(a, uint16(n)), false)
	}
	_, err = d.checkName(host, uint16(n))
	return err
}

// dialContext connects to addr ("host:port") for the executor's transport
// if the policy permits: a host name is checked, resolved, and each of its
// addresses checked; the connection itself is checked again by the
// dialer's Control hook, on the address actually connected to. A refusal
// is a *DestinationError; nothing is sent.
func (d *destPolicy) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port %q", portStr)
	}
	port := uint16(n)
	var (
		addrs       []netip.Addr
		nameAllowed bool
	)
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if nameAllowed, err = d.checkName(host, port); err != nil {
			return nil, err
		}
		if addrs, err = d.resolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("lookup %s: no addresses", host)
		}
	}
	var permitted []netip.AddrPort
	var refused error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, port)
		if err := d.checkAddr(ctx, ap, nameAllowed); err != nil {
			if refused == nil {
				refused = err
			}
			continue
		}
		permitted = append(permitted, ap)
	}
	if len(permitted) == 0 {
		if host != addrs[0].String() {
			var de *DestinationError
			if errors.As(refused, &de) {
				de.Dest = host + " (" + de.Dest + ")"
			}
		}
		return nil, refused
	}
	dialer := &net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("unexpected address %q", address)
			}
			return d.checkAddr(nil, ap, nameAllowed)
		},
	}
	var errs []error
	for _, ap := range permitted {
		c, err := dialer.DialContext(ctx, network, ap.String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}
