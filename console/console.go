package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// Prefix is the path under which Handler expects to be mounted.
const Prefix = "/ui/"

// ContentSecurityPolicy is the policy of every reply: the page's own
// origin only, nothing inline, no eval, no framing, no form posts
// elsewhere.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

//go:embed assets
var assets embed.FS

// page is the shell's template: it names the script and style with a
// hash of their content so that a browser never mixes an old script with
// a new page after an upgrade.
var page = template.Must(template.ParseFS(assets, "assets/index.html"))

// Handler returns the console's handler for GET requests under Prefix:
// the page at Prefix (and Prefix+"index.html"), its script and style, and
// 404 for anything else. Safe for concurrent use.
func Handler() http.Handler {
	files := map[string]file{}
	names := map[string]string{}
	for _, name := range []string{"app.js", "style.css"} {
		b, err := fs.ReadFile(assets, "assets/"+name)
		if err != nil {
			panic("console: embedded asset missing: " + name) // a build without its assets
		}
		sum := sha256.Sum256(b)
		tag := hex.EncodeToString(sum[:6])
		ext := path.Ext(name)
		hashed := strings.TrimSuffix(name, ext) + "." + tag + ext
		names[strings.TrimSuffix(name, ext)] = hashed
		files[hashed] = file{body: b, typ: contentType(ext), immutable: true}
	}
	var shell bytes.Buffer
	if err := page.Execute(&shell, names); err != nil {
		panic("console: the page template does not execute: " + err.Error())
	}
	index := file{body: shell.Bytes(), typ: "text/html; charset=utf-8"}
	files[""], files["index.html"] = index, index
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetSecurityHeaders(w.Header())
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		f, found := files[name]
		if !ok || !found {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("no such console file\n"))
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.typ)
		h.Set("Content-Length", strconv.Itoa(len(f.body)))
		if f.immutable {
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(f.body) // an error means the client went away
		}
	})
}

type file struct {
	body      []byte
	typ       string
	immutable bool // named by its content's hash
}

func contentType(ext string) string {
	switch ext {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	return "application/octet-stream"
}

// SetSecurityHeaders sets the headers every console reply carries: the
// ContentSecurityPolicy, no framing, no content sniffing, no Referer,
// same-origin opener and resource policies. The server calls it for the
// replies of the console's routes that Handler does not write itself,
// such as redirects to Prefix.
func SetSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}
