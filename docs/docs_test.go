// Package docs holds the project's documentation; its tests keep the
// documents true: the HTTP reference (api.md) against the server's route
// table, links against the files and headings they point at, and the
// repository free of references to anything outside it.
package docs

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/jobfleet/jobfleet/admin"
)

// routeHeading matches a route's heading in api.md: ### `METHOD /path`.
var routeHeading = regexp.MustCompile("^### `([A-Z]+ /[^`]*)`$")

// accessLine matches the line that opens a route's section.
var accessLine = regexp.MustCompile("^Access: `([a-z]+)`")

// apiRoutes returns the routes api.md documents, each with the access its
// section names ("" if none), and the routes it documents more than once.
func apiRoutes(doc string) (routes map[string]string, twice []string) {
	out := map[string]string{}
	lines := strings.Split(doc, "\n")
	for i, line := range lines {
		m := routeHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, dup := out[m[1]]; dup {
			twice = append(twice, m[1])
		}
		out[m[1]] = ""
		for _, next := range lines[i+1:] {
			if strings.TrimSpace(next) == "" {
				continue
			}
			if a := accessLine.FindStringSubmatch(next); a != nil {
				out[m[1]] = a[1]
			}
			break
		}
	}
	return out, twice
}

// TestAPIDocMatchesRoutes fails when a route of the server is missing from
// api.md, when api.md documents a route the server does not have, or when
// the access api.md names differs from the route table's.
func TestAPIDocMatchesRoutes(t *testing.T) {
	doc, err := os.ReadFile("api.md")
	if err != nil {
		t.Fatal(err)
	}
	checkAPIDoc(t, string(doc), admin.Routes())
}

func checkAPIDoc(t testing.TB, doc string, routes []admin.Route) {
	t.Helper()
	documented, twice := apiRoutes(doc)
	for _, p := range twice {
		t.Errorf("docs/api.md documents %s twice", p)
	}
	served := map[string]bool{}
	for _, r := range routes {
		served[r.Pattern] = true
		access, ok := documented[r.Pattern]
		switch {
		case !ok:
			t.Errorf("route %s is served but not documented in docs/api.md (add a \"### `%s`\" section)", r.Pattern, r.Pattern)
		case access != r.Access.String():
			t.Errorf("docs/api.md says %s needs access %q; the route table says %q", r.Pattern, access, r.Access.String())
		}
	}
	for p := range documented {
		if !served[p] {
			t.Errorf("docs/api.md documents %s, which the server does not serve", p)
		}
	}
}

// TestAPIDocCheckCanFail runs the check on altered inputs: a route the
// document lacks, a route only the document has, and a wrong access must
// each be caught.
func TestAPIDocCheckCanFail(t *testing.T) {
	doc, err := os.ReadFile("api.md")
	if err != nil {
		t.Fatal(err)
	}
	routes := admin.Routes()
	if len(routes) < 20 {
		t.Fatalf("admin.Routes() lists %d routes: the table is not what this test expects", len(routes))
	}
	extra := append(slices.Clone(routes), admin.Route{Pattern: "GET /v1/new-thing", Access: routes[0].Access})
	cases := map[string]struct {
		doc    string
		routes []admin.Route
	}{
		"route not documented": {string(doc), extra},
		"route not served":     {string(doc), routes[1:]},
		"access differs":       {strings.Replace(string(doc), "### `POST /v1/cluster/drain`\n\nAccess: `admin`", "### `POST /v1/cluster/drain`\n\nAccess: `write`", 1), routes},
	}
	for name, c := range cases {
		rec := &recorder{T: t}
		checkAPIDoc(rec, c.doc, c.routes)
		if !rec.failed {
			t.Errorf("%s: the check passes", name)
		}
	}
	rec := &recorder{T: t}
	checkAPIDoc(rec, string(doc), routes)
	if rec.failed {
		t.Errorf("the check fails on the real document and routes")
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	*testing.T
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Helper()               {}

// repoRoot is the repository's top folder, the parent of docs/.
const repoRoot = ".."

// textFiles returns the repository's files that hold text (not images,
// not the git folder), relative to the root.
func textFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".png", ".svg", ".jpg", ".gz", ".pdf":
			return nil
		}
		out = append(out, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDocsStandAlone fails when any file of the repository refers to
// documents outside it: the repository's docs are the reference.
func TestDocsStandAlone(t *testing.T) {
	outside := []string{
		"DESIGN" + ".md", "STYLE" + ".md", "../" + "shared", "the " + "brief",
	}
	files := textFiles(t)
	if len(files) < 100 {
		t.Fatalf("found %d files: the walk is broken", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, o := range outside {
				if strings.Contains(strings.ToLower(line), strings.ToLower(o)) {
					t.Errorf("%s:%d refers to %q, outside the repository: say it here instead\n\t%s", f, i+1, o, strings.TrimSpace(line))
				}
			}
		}
	}
}

// mdLink matches a markdown link's target: ](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks checks every link of README.md, CHANGELOG.md and docs/
// (generated CLI reference included) that is not a web address: its file exists in the
// repository, and its #anchor names a heading of that file.
func TestDocLinks(t *testing.T) {
	docs := []string{filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "CHANGELOG.md")}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	links := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(withoutCode(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				t.Errorf("%s links %s: the docs link only files of the repository", doc, target)
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
			}
			abs, err := filepath.Abs(path)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(root, abs)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %s, outside the repository", doc, target)
				continue
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s links %s: %v", doc, target, err)
				continue
			}
			if anchor == "" {
				continue
			}
			if st.IsDir() || !strings.HasSuffix(path, ".md") {
				t.Errorf("%s links %s: an anchor into something that is not a markdown file", doc, target)
				continue
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(anchors(string(b)), anchor) {
				t.Errorf("%s links %s: %s has no heading with anchor #%s", doc, target, path, anchor)
			}
		}
	}
	if links < 50 {
		t.Fatalf("found %d links: the search is broken", links)
	}
}

// withoutCode returns doc without its fenced code blocks, whose text is
// not markdown.
func withoutCode(doc string) string {
	var out []string
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// anchors returns the anchors of doc's headings as GitHub makes them:
// lower case, punctuation dropped, spaces made hyphens, repeats numbered.
func anchors(doc string) []string {
	var out []string
	seen := map[string]int{}
	for _, line := range strings.Split(withoutCode(doc), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out = append(out, a+"-"+string(rune('0'+n)))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// TestEmbedSnippet fails when the program workers.md shows for embedding
// a worker differs from Example_embedWorker (embed_example_test.go), which
// the compiler checks against the worker library: the document must hold
// the example's import block and its body, verbatim.
func TestEmbedSnippet(t *testing.T) {
	src, err := os.ReadFile("embed_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	example := string(src)
	imports, err := between(example, "import (\n", "\n)\n")
	if err != nil {
		t.Fatalf("embed_example_test.go: the import block: %v", err)
	}
	body, err := between(example, "func Example_embedWorker() {\n", "\n}\n")
	if err != nil {
		t.Fatalf("embed_example_test.go: Example_embedWorker: %v", err)
	}
	doc, err := os.ReadFile("workers.md")
	if err != nil {
		t.Fatal(err)
	}
	section, err := between(string(doc), "\n## Embedding a worker\n", "\n## ")
	if err != nil {
		t.Fatalf("workers.md: the section \"Embedding a worker\": %v", err)
	}
	block, err := between(section, "```go\n", "```\n")
	if err != nil {
		t.Fatalf("workers.md, Embedding a worker: no go code block: %v", err)
	}
	for what, want := range map[string]string{"import block": "import (\n" + imports + "\n)\n", "body": body} {
		if !strings.Contains(block, want) {
			t.Errorf("workers.md's embedding program lacks the example's %s, verbatim:\n%s", what, want)
		}
	}
}

// between returns the text of s after the first from and before the next
// to.
func between(s, from, to string) (string, error) {
	_, after, ok := strings.Cut(s, from)
	if !ok {
		return "", fmt.Errorf("no %q", from)
	}
	in, _, ok := strings.Cut(after, to)
	if !ok {
		return "", fmt.Errorf("no %q after %q", to, from)
	}
	return in, nil
}

// TestFrontPage keeps README.md a front page: at most 200 lines, and its
// first code block the two commands, run it and test it (the deploy
// module's TestTestCommandInStep checks that CI runs the same test.sh).
func TestFrontPage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 200 {
		t.Errorf("README.md has %d lines, want at most 200: move reference material into docs/", n)
	}
	block, err := between(string(readme), "```sh\n", "```\n")
	if err != nil {
		t.Fatalf("README.md has no sh code block: %v", err)
	}
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		cmds = append(cmds, strings.TrimSpace(cmd))
	}
	if want := []string{"go run ./cmd/jobfleet dev", "./test.sh"}; !slices.Equal(cmds, want) {
		t.Errorf("README.md's first code block runs %q, want %q", cmds, want)
	}
	if st, err := os.Stat(filepath.Join(repoRoot, "test.sh")); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("test.sh is missing or not executable: %v", err)
	}
}

// TestFrontPageReachesEveryPage: README.md links every page of docs/
// (the generated CLI reference through cli/jobfleet.md), so that no page
// is found only by chance.
func TestFrontPageReachesEveryPage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(withoutCode(string(readme)), -1) {
		file, _, _ := strings.Cut(m[1], "#")
		linked[strings.TrimPrefix(file, "docs/")] = true
	}
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range append(pages, "cli/jobfleet.md") {
		if !linked[page] {
			t.Errorf("README.md does not link docs/%s", page)
		}
	}
}

// figure matches a figure of a sentence: a number with groups of
// thousands (1 000 000), a decimal (5.3), or three digits or more.
var figure = regexp.MustCompile(`\b\d{1,3}(?: \d{3})+\b|\b\d+\.\d+\b|\b\d{3,}\b`)

// TestFrontPageFigures: a README.md paragraph that cites current-figure
// tables (links to #current-figures) quotes only figures those tables
// hold, and every table it cites holds one of them: a link to a table
// without the figure sends the reader to the wrong page.
func TestFrontPageFigures(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cited := 0
	for _, para := range strings.Split(withoutCode(string(readme)), "\n\n") {
		var tables []string // the cited tables' text
		var names []string
		for _, m := range mdLink.FindAllStringSubmatch(para, -1) {
			file, anchor, _ := strings.Cut(m[1], "#")
			if anchor != "current-figures" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(repoRoot, file))
			if err != nil {
				t.Fatal(err)
			}
			section, err := between(string(b), "## Current figures\n", "\n## ")
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			tables, names = append(tables, section), append(names, file)
		}
		if len(tables) == 0 {
			continue
		}
		cited++
		text := mdLink.ReplaceAllString(para, "]")
		figures := figure.FindAllString(strings.ReplaceAll(text, "\n", " "), -1)
		if len(figures) == 0 {
			t.Errorf("README.md cites %v without quoting a figure:\n%s", names, para)
		}
		used := make([]bool, len(tables))
		for _, f := range figures {
			found := false
			for i, table := range tables {
				if strings.Contains(table, f) {
					found, used[i] = true, true
				}
			}
			if !found {
				t.Errorf("README.md quotes %q, which no cited table (%v) holds", f, names)
			}
		}
		for i, u := range used {
			if !u {
				t.Errorf("README.md cites %s#current-figures, which holds none of the figures it quotes (%q)", names[i], figures)
			}
		}
	}
	if cited == 0 {
		t.Error("README.md cites no current-figure table")
	}
}
