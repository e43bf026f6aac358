package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Errors of this package. Callers compare with errors.Is.
var (
	// ErrDestinationDenied is matched by every *DestinationError: a
	// destination was refused by the policy.
	ErrDestinationDenied = errors.New("destination denied by the worker's HTTP policy")
	// ErrInvalidPolicy is matched by the errors of NewGuard and
	// NewTransport: an entry of a Policy's lists is malformed.
	ErrInvalidPolicy = errors.New("invalid HTTP destination policy")
)

// DestinationError says that a destination was refused (by the worker's
// "http" executor, or an orchestrator's notification delivery), and by
// which rule. Nothing was sent to it.
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

// Policy says where the worker's "http" executor, and an orchestrator's
// notification delivery, may connect. Every connection
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
type Policy struct {
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
	// AllowFlag names, in refusals, the setting that lists Allow entries:
	// "--http-allow" (the worker's flag) if empty. An orchestrator
	// applying the policy to notifications gives "--notify-allow".
	AllowFlag string
}

// Guard enforces a Policy: it checks URLs before a request is sent
// (CheckURL) and connections when they are made (DialContext, or the
// transport of HTTPTransport). The fleet's endpoints it refuses change as
// the fleet does (SetOrchestrators, LearnEtcd, AddFleet). Create it with
// NewGuard. Safe for concurrent use.
type Guard struct {
	allow, deny []rule
	fixed       []endpoint // Policy.Fleet
	resolver    Resolver
	allowFlag   string // Policy.AllowFlag, named in refusals

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

// NewGuard parses p and returns its Guard; an error wraps
// ErrInvalidPolicy and names the bad entry.
func NewGuard(p Policy) (*Guard, error) {
	d, err := newGuard(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPolicy, err)
	}
	return d, nil
}

func newGuard(p Policy) (*Guard, error) {
	d := &Guard{resolver: p.Resolver, allowFlag: p.AllowFlag}
	if d.allowFlag == "" {
		d.allowFlag = "--http-allow"
	}
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

// SetOrchestrators replaces the orchestrators' endpoints refused with
// those of the base URLs addrs (surrounding spaces and trailing slashes
// removed); unparsable ones are skipped (discovery validated them).
func (d *Guard) SetOrchestrators(addrs []string) {
	eps := make([]endpoint, 0, len(addrs))
	for _, a := range addrs {
		a = strings.TrimRight(strings.TrimSpace(a), "/")
		if a == "" {
			continue
		}
		if e, err := parseEndpoint(a, "orchestrator"); err == nil {
			eps = append(eps, e)
		}
	}
	d.mu.Lock()
	d.orchestrators = eps
	d.mu.Unlock()
}

// AddFleet adds endpoints (URLs or HOST:PORT) to the fleet endpoints
// refused for good, as Policy.Fleet does; what names them in refusals
// ("orchestrator", "etcd endpoint"). Unparsable entries are skipped.
// Call it before the Guard is used: it is not safe for concurrent use
// with the checks.
func (d *Guard) AddFleet(what string, endpoints ...string) {
	for _, s := range endpoints {
		if e, err := parseEndpoint(s, what); err == nil {
			d.fixed = append(d.fixed, e)
		}
	}
}

// LearnEtcd adds the etcd endpoints an orchestrator named (URLs) to the
// denied fleet endpoints, and returns how many were new. They are never
// removed: an endpoint the fleet stopped using is still etcd's.
// Unparsable entries are skipped.
func (d *Guard) LearnEtcd(urls []string) int {
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

func (d *Guard) fleet() []endpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Concat(d.fixed, d.orchestrators, d.etcd)
}
