package egress

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/api"
)

// TestPolicyDecisions checks the rules on addresses without connecting
// anywhere (some of these addresses are not on this machine).
func TestPolicyDecisions(t *testing.T) {
	p, err := NewGuard(Policy{
		Allow: []string{"127.0.0.0/8", "fd00::/8", "::ffff:10.1.0.0/112", "ok.example"},
		Deny:  []string{"10.1.2.3", "[fd00::5]:443", "*.internal", "127.0.0.9"},
		Fleet: []string{"http://127.0.0.1:2379", "127.0.0.1:2380", "https://[fd00::1]"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.SetOrchestrators([]string{"http://127.0.0.1:8080", "http://10.0.0.7:8080"})
	tests := []struct {
		url      string
		wantRule string // "" for permitted
	}{
		{"http://169.254.169.254/latest/meta-data/", "link-local address (169.254.0.0/16)"},
		{"http://[fe80::1%25eth0]:80/", "link-local address (fe80::/10)"},
		{"http://[::ffff:169.254.169.254]/", "link-local address"},
		{"http://[::1]:9/", "loopback address (::1/128)"},
		{"http://[::]:9/", "unspecified address (::/128)"},
		{"http://0.0.0.0:9/", "unspecified address (0.0.0.0/8)"},
		{"http://224.0.0.1/", "multicast address"},
		{"http://255.255.255.255/", "broadcast address"},
		{"http://127.0.0.1:8080/v1/cluster/drain", "orchestrator http://127.0.0.1:8080"},
		{"http://[::ffff:127.0.0.1]:8080/", "orchestrator http://127.0.0.1:8080"},
		{"http://10.0.0.7:8080/", "orchestrator http://10.0.0.7:8080"},
		{"http://127.0.0.1:2379/v3/kv/range", "fleet endpoint http://127.0.0.1:2379"},
		{"http://127.0.0.1:2380/", "fleet endpoint 127.0.0.1:2380"},
		{"https://[fd00::1]/", "fleet endpoint https://[fd00::1]"},
		{"https://[fd00::5]/", "on the deny list ([fd00::5]:443)"},
		{"http://[fd00::5]/", ""},
		{"http://10.1.2.3/", "on the deny list (10.1.2.3)"},
		{"http://10.1.2.4/", ""},
		{"http://127.0.0.9/", "on the deny list (127.0.0.9)"},
		{"http://127.0.0.1:8081/", ""},
		{"http://metadata.internal/", "on the deny list (*.internal)"},
		{"http://METADATA.Internal./", "on the deny list (*.internal)"},
		{"http://example.com/", ""},
		{"http://user:pw@example.com/", "user name or password"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatalf("%s: %v", tt.url, err)
		}
		err = p.CheckURL(u)
		switch {
		case tt.wantRule == "" && err != nil:
			t.Errorf("%s: %v, want permitted", tt.url, err)
		case tt.wantRule != "" && (err == nil || !strings.Contains(err.Error(), tt.wantRule)):
			t.Errorf("%s: %v, want refused by %q", tt.url, err, tt.wantRule)
		case tt.wantRule != "" && !strings.Contains(tt.wantRule, "user name") && !errors.Is(err, ErrDestinationDenied):
			t.Errorf("%s: %v does not match ErrDestinationDenied", tt.url, err)
		}
	}

	// A name on the allow list is permitted whatever it resolves to,
	// except the fleet and the deny list.
	if ok, err := p.checkName("OK.example", 80); !ok || err != nil {
		t.Errorf("checkName(ok.example) = %v, %v; want allowed", ok, err)
	}
	for _, tt := range []struct {
		ap       string
		wantRule string
	}{
		{"169.254.169.254:80", ""},
		{"127.0.0.1:8080", "orchestrator"},
		{"10.1.2.3:80", "deny list"},
	} {
		err := p.checkAddr(context.Background(), netip.MustParseAddrPort(tt.ap), true)
		if (tt.wantRule == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantRule)) {
			t.Errorf("checkAddr(%s, name allowed) = %v, want %q", tt.ap, err, tt.wantRule)
		}
	}

	// Orchestrators follow discovery: a member that left is no longer
	// denied as one.
	p.SetOrchestrators([]string{"http://10.0.0.7:8080"})
	if err := p.checkAddr(context.Background(), netip.MustParseAddrPort("127.0.0.1:8080"), false); err != nil {
		t.Errorf("127.0.0.1:8080 after its member left: %v, want permitted (loopback is allowed here)", err)
	}
}

func TestParseRule(t *testing.T) {
	for _, tt := range []struct {
		in        string
		wantError bool
	}{
		{"10.0.0.0/8", false}, {"::1", false}, {"[::1]:8443", false}, {"127.0.0.1:80", false},
		{"example.com", false}, {"*.example.com", false}, {"example.com:8080", false}, {"10.0.0.0/8:80", false},
		{"", true}, {"exa mple.com", true}, {"example.com:0", true}, {"example.com:99999", true}, {"*.", true}, {"http://x", true},
	} {
		_, err := parseRule(tt.in)
		if (err != nil) != tt.wantError {
			t.Errorf("parseRule(%q) = %v, want error %v", tt.in, err, tt.wantError)
		}
	}
	// A rule's port follows the one rule of the API's URLs.
	for _, port := range []string{"1", "80", "8080", "65535", "0", "00", "080", "000080", "65536", "99999999999999999999", "+80", "-1", "8a"} {
		_, ruleErr := parseRule("example.com:" + port)
		_, apiErr := api.ParsePort(port)
		if (ruleErr == nil) != (apiErr == nil) {
			t.Errorf("port %q: parseRule says %v, api.ParsePort %v", port, ruleErr, apiErr)
		}
	}
}

// TestPolicyEtcdPorts checks the second line against a job reaching etcd:
// etcd's registered ports are refused on every host unless an allow entry
// names the port, and etcd endpoints an orchestrator reports are refused
// like the fleet's own, whatever the allow list says.
func TestPolicyEtcdPorts(t *testing.T) {
	p, err := NewGuard(Policy{
		Allow: []string{"127.0.0.0/8", "10.0.0.0/8", "10.9.9.9:2379", "store.example:2380", "etcd-ok.example"},
	})
	if err != nil {
		t.Fatal(err)
	}
	refusedBy := func(raw string) string {
		t.Helper()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.CheckURL(u); err != nil {
			return err.Error()
		}
		host := u.Hostname()
		if _, perr := netip.ParseAddr(host); perr != nil { // a name: as dialContext does, with a made-up resolution
			n, _ := strconv.Atoi(u.Port())
			allowed, err := p.checkName(host, uint16(n))
			if err != nil {
				return err.Error()
			}
			if err := p.checkAddr(context.Background(), netip.AddrPortFrom(netip.MustParseAddr("192.0.2.10"), uint16(n)), allowed); err != nil {
				return err.Error()
			}
		}
		return ""
	}
	for _, tt := range []struct{ url, want string }{
		{"http://192.0.2.1:2379/v3/kv/put", "etcd's port"},
		{"http://192.0.2.1:2380/", "etcd's port"},
		{"http://127.0.0.1:2379/", "etcd's port"},       // loopback allowed, but not etcd's port
		{"http://10.1.1.1:2379/", "etcd's port"},        // a CIDR without the port does not allow it
		{"http://etcd-ok.example:2379/", "etcd's port"}, // nor a name without the port
		{"http://10.9.9.9:2379/", ""},
		{"http://10.9.9.9:2380/", "etcd's port"},
		{"http://store.example:2380/", ""},
		{"http://192.0.2.1:2378/", ""},
		{"http://127.0.0.1:8080/", ""},
	} {
		got := refusedBy(tt.url)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want refused by %q", tt.url, got, tt.want)
		}
	}

	// Learned from a poll reply: refused by address and port, beyond the
	// allow list (10.0.0.0/8 and 127.0.0.0/8), userinfo or not.
	if n := p.LearnEtcd([]string{"http://10.0.0.5:12379", "http://127.0.0.1:22379", "not a url", "http://10.0.0.5:12379"}); n != 2 {
		t.Errorf("learnEtcd added %d endpoints, want 2", n)
	}
	for _, raw := range []string{"http://10.0.0.5:12379/v3/kv/put", "http://127.0.0.1:22379/health", "http://[::ffff:127.0.0.1]:22379/"} {
		if got := refusedBy(raw); !strings.Contains(got, "fleet etcd endpoint") {
			t.Errorf("%s: %q, want refused as a fleet etcd endpoint", raw, got)
		}
	}
	if got := refusedBy("http://10.0.0.5:12380/"); got != "" {
		t.Errorf("another port of an etcd host: %q, want permitted", got)
	}
	for i := range 2 * maxLearnedEtcd {
		p.LearnEtcd([]string{"http://10.0.1.1:" + strconv.Itoa(30000+i)})
	}
	if got := len(p.fleet()); got != maxLearnedEtcd {
		t.Errorf("%d fleet endpoints after a flood of learned ones, want the cap %d", got, maxLearnedEtcd)
	}
}

// TestPolicyRefusalNamesAllowFlag: a refusal that an allow entry could
// lift names the setting that takes it, --http-allow unless the policy's
// user gives its own (an orchestrator's --notify-allow).
func TestPolicyRefusalNamesAllowFlag(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{{"", "--http-allow"}, {"--notify-allow", "--notify-allow"}} {
		p, err := NewGuard(Policy{AllowFlag: tc.flag})
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range []string{"http://127.0.0.1:8080/", "http://10.0.0.1:2379/"} {
			u, _ := url.Parse(raw)
			err := p.CheckURL(u)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.want != "--http-allow" && strings.Contains(err.Error(), "--http-allow")) {
				t.Errorf("AllowFlag %q, %s: %v, want a refusal naming %s only", tc.flag, raw, err, tc.want)
			}
		}
	}
}
