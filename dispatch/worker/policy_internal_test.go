package worker

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// TestPolicyDecisions checks the rules on addresses without connecting
// anywhere (some of these addresses are not on this machine).
func TestPolicyDecisions(t *testing.T) {
	p, err := newDestPolicy(HTTPPolicy{
		Allow: []string{"127.0.0.0/8", "fd00::/8", "::ffff:10.1.0.0/112", "ok.example"},
		Deny:  []string{"10.1.2.3", "[fd00::5]:443", "*.internal", "127.0.0.9"},
		Fleet: []string{"http://127.0.0.1:2379", "127.0.0.1:2380", "https://[fd00::1]"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.setOrchestrators([]string{"http://127.0.0.1:8080", "http://10.0.0.7:8080"})
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
		err = p.checkURL(u)
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
		err := p.checkAddr(nil, netip.MustParseAddrPort(tt.ap), true)
		if (tt.wantRule == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantRule)) {
			t.Errorf("checkAddr(%s, name allowed) = %v, want %q", tt.ap, err, tt.wantRule)
		}
	}

	// Orchestrators follow discovery: a member that left is no longer
	// denied as one.
	p.setOrchestrators([]string{"http://10.0.0.7:8080"})
	if err := p.checkAddr(nil, netip.MustParseAddrPort("127.0.0.1:8080"), false); err != nil {
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
}
