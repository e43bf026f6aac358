package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/console"
)

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestPageNamesItsAssetsByContent: the page loads the script and the style
// under names that carry their content's hash (cached for good), and
// nothing else loads.
func TestPageNamesItsAssetsByContent(t *testing.T) {
	h := console.Handler()
	resp, page := get(t, h, "/ui/")
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("page: %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) != 2 {
		t.Fatalf("the page loads %v, want the script and the style", refs)
	}
	for _, ref := range refs {
		if !regexp.MustCompile(`^(app\.[0-9a-f]{12}\.js|style\.[0-9a-f]{12}\.css)$`).MatchString(ref[1]) {
			t.Errorf("asset %q is not named by its content", ref[1])
			continue
		}
		resp, body := get(t, h, "/ui/"+ref[1])
		if resp.StatusCode != 200 || body == "" || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("%s: %d, %d bytes, Cache-Control %q", ref[1], resp.StatusCode, len(body), resp.Header.Get("Cache-Control"))
		}
		if resp.Header.Get("Content-Security-Policy") != console.ContentSecurityPolicy {
			t.Errorf("%s without the policy", ref[1])
		}
	}
	for _, path := range []string{"/ui/app.js", "/ui/assets/app.js", "/ui/index.html/", "/other", "/ui/.."} {
		if resp, _ := get(t, h, path); resp.StatusCode != 404 || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: %d (X-Frame-Options %q), want 404 with the headers", path, resp.StatusCode, resp.Header.Get("X-Frame-Options"))
		}
	}
}

// TestPolicyForbidsInlineCodeAndFraming: the policy has no 'unsafe-*'
// source and denies framing.
func TestPolicyForbidsInlineCodeAndFraming(t *testing.T) {
	p := console.ContentSecurityPolicy
	if strings.Contains(p, "unsafe") || strings.Contains(p, "*") || strings.Contains(p, "data: ;") {
		t.Errorf("policy %q allows unsafe sources", p)
	}
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"} {
		if !strings.Contains(p, want) {
			t.Errorf("policy %q lacks %q", p, want)
		}
	}
}

// TestScriptInsertsTextOnly: the script never parses strings as HTML or
// code, never sets a style attribute (the policy would refuse it), and
// never puts the token anywhere but sessionStorage and the Authorization
// header.
func TestScriptInsertsTextOnly(t *testing.T) {
	b, err := os.ReadFile("assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setTimeout('", "setAttribute('style'", "'style':", "style: ", "localStorage", "document.cookie", "new EventSource"} {
		if strings.Contains(src, bad) {
			t.Errorf("app.js uses %q", bad)
		}
	}
	if n := strings.Count(src, "token"); n == 0 {
		t.Fatal("app.js never mentions the token: the test reads the wrong file")
	}
	for _, line := range strings.Split(src, "\n") {
		if strings.Contains(line, "token") && (strings.Contains(line, "location") || strings.Contains(line, "?token") || strings.Contains(line, "&token")) {
			t.Errorf("the token may reach a URL: %s", strings.TrimSpace(line))
		}
	}
}

// TestSignInSaysWhereTokensComeFrom: a new user at the sign-in form is
// told how to get a token, for a fleet and under jobfleet dev.
func TestSignInSaysWhereTokensComeFrom(t *testing.T) {
	_, page := get(t, console.Handler(), "/ui/")
	for _, want := range []string{"jobfleet token create --role viewer", "jobfleet-dev/admin.token"} {
		if !strings.Contains(page, want) {
			t.Errorf("the sign-in page does not say %q", want)
		}
	}
}
