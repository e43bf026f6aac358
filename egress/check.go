package egress

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
	"syscall"
	"time"
)

// etcdPortRule is the refusal of etcd's port: give the allow flag and
// the port.
const etcdPortRule = "etcd's port, denied on every host by default (allow it with an %s entry naming the port, HOST:%d)"

const fleetRule = "the fleet's own endpoint, always denied"

// checkName applies the rules that look at a host name as written (rules
// 1 to 3 for names); it reports whether an allow rule permits the name.
func (d *Guard) checkName(name string, port uint16) (allowed bool, err error) {
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
func (d *Guard) checkAddr(ctx context.Context, ap netip.AddrPort, nameAllowed bool) error {
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
		return &DestinationError{Dest: dest, Rule: fmt.Sprintf(etcdPortRule, d.allowFlag, port)}
	}
	for _, r := range d.allow {
		if r.matchAddr(a, port) {
			return nil
		}
	}
	for _, dd := range defaultDenials {
		if dd.prefix.Contains(a) {
			return &DestinationError{Dest: dest, Rule: fmt.Sprintf("%s (%s), denied by default (allow it with %s)", dd.what, dd.prefix, d.allowFlag)}
		}
	}
	return nil
}

// CheckURL checks a request's URL before it is sent: its host as written
// (a name against the name rules, an address against all rules). It does
// not resolve names: connections are checked when they are made.
func (d *Guard) CheckURL(u *url.URL) error {
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
		return d.checkAddr(context.TODO(), netip.AddrPortFrom(a, uint16(n)), false)
	}
	_, err = d.checkName(host, uint16(n))
	return err
}

// DialContext connects to addr ("host:port") if the policy permits, for
// an http.Transport's DialContext: a host name is checked, resolved, and
// each of its addresses checked; the connection itself is checked again by the
// dialer's Control hook, on the address actually connected to. A refusal
// is a *DestinationError; nothing is sent.
func (d *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
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
			return d.checkAddr(ctx, ap, nameAllowed)
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
