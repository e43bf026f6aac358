package auth_test

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/jobfleet/jobfleet/auth"
)

func TestValidateID(t *testing.T) {
	for _, id := range []string{"a", "dev-admin", "0f3a9c2b1d4e", "team.billing-1", strings.Repeat("a", auth.MaxIDBytes)} {
		if err := auth.ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range []string{"", "-a", ".a", "A", "a_b", "a/b", "a b", "é", "a\x1b", strings.Repeat("a", auth.MaxIDBytes+1)} {
		if err := auth.ValidateID(id); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalid", id, err)
		}
	}
}

func TestParseToken(t *testing.T) {
	secret := strings.Repeat("A", 43)
	tests := []struct {
		tok    string
		id, sc string
		ok     bool
	}{
		{"jf_abc_" + secret, "abc", secret, true},
		{"jf_dev-admin_" + strings.Repeat("_", 43), "dev-admin", strings.Repeat("_", 43), true},
		{"jf_abc_" + secret[:42], "", "", false},
		{"jf_abc_" + secret + "x", "", "", false},
		{"jf_ABC_" + secret, "", "", false},
		{"xx_abc_" + secret, "", "", false},
		{"jf_abc", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		id, sc, err := auth.ParseToken(tt.tok)
		if (err == nil) != tt.ok || id != tt.id || sc != tt.sc {
			t.Errorf("ParseToken(%q) = %q, %q, %v; want %q, %q, ok %v", tt.tok, id, sc, err, tt.id, tt.sc, tt.ok)
		}
		if err != nil {
			if !errors.Is(err, auth.ErrUnauthenticated) {
				t.Errorf("ParseToken(%q): error %v does not match ErrUnauthenticated", tt.tok, err)
			}
			if tt.tok != "" && strings.Contains(err.Error(), tt.tok) {
				t.Errorf("ParseToken error quotes the token: %v", err)
			}
		}
	}
}

// TestTokenRoundTrip: any string either fails to parse or is exactly the
// token of what it parses to.
func TestTokenRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tok := rapid.OneOf(
			rapid.String(),
			rapid.Custom(func(t *rapid.T) string {
				return "jf_" + rapid.StringMatching(`[a-z0-9][a-z0-9.-]{0,8}`).Draw(t, "id") + "_" + rapid.StringMatching(`[A-Za-z0-9_-]{42,44}`).Draw(t, "secret")
			}),
		).Draw(t, "token")
		id, secret, err := auth.ParseToken(tok)
		if err != nil {
			return
		}
		if got := auth.FormatToken(id, secret); got != tok {
			t.Fatalf("ParseToken(%q) = %q, %q, which formats as %q", tok, id, secret, got)
		}
		if auth.ValidateID(id) != nil {
			t.Fatalf("ParseToken(%q) accepted invalid ID %q", tok, id)
		}
	})
}

func TestReadBootstrapFile(t *testing.T) {
	dir := t.TempDir()
	good := strings.Repeat("s", auth.MinBootstrapBytes)
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		path    string
		want    string
		wantErr string
	}{
		{"private", write("ok", good+"\n", 0o600), good, ""},
		{"owner read-only", write("ro", good, 0o400), good, ""},
		{"group readable", write("group", good, 0o640), "", "mode 0640: group or others may read it"},
		{"world readable", write("world", good, 0o604), "", "chmod 600"},
		{"short", write("short", strings.Repeat("s", auth.MinBootstrapBytes-1)+"\n", 0o600), "", "needs at least 32"},
		{"missing", filepath.Join(dir, "nope"), "", "no such file"},
		{"directory", dir, "", "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := auth.ReadBootstrapFile(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want an error saying %q", got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "ssss") {
					t.Errorf("error quotes the secret: %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	tests := []struct {
		header string
		want   string
		ok     bool
	}{
		{"", "", true},
		{"Bearer abc", "abc", true},
		{"bearer  abc", "abc", true},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		got, err := auth.BearerToken(r)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, ok %v", tt.header, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("BearerToken(%q): %v does not match ErrUnauthenticated", tt.header, err)
		}
	}
}
