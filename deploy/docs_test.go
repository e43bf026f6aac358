package deploy

import (
	"os"
	"strings"
	"testing"
)

// shellWords splits a command line into words the way sh does for the
// plain cases the docs use: white space, single and double quotes.
func shellWords(line string) []string {
	var (
		words []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// docCommands returns the jobfleet command lines of the shell code blocks
// of a Markdown file: continuation lines joined, each command cut at a
// redirection, pipe, list operator or comment.
func docCommands(t *testing.T, path string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		cmds    [][]string
		inBlock bool
		joined  string
	)
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			inBlock = !inBlock && (trimmed == "```sh" || trimmed == "```bash")
			continue
		}
		if !inBlock {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			joined += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		full := joined + trimmed
		joined = ""
		words := shellWords(full)
		start := true // at the start of a command
		for i := 0; i < len(words); i++ {
			w := words[i]
			isStart := start
			start = w == "&&" || w == ";" || w == "|" || w == "||" || w == "&" ||
				(start && strings.Contains(w, "=") && !strings.HasPrefix(w, "-"))
			if !isStart || (w != "jobfleet" && w != "./jobfleet") {
				continue
			}
			var cmd []string
			for _, w := range words[i+1:] {
				if w == "#" || strings.HasPrefix(w, ">") || w == "|" || w == "&&" || w == "&" || w == ";" || w == "||" {
					break
				}
				cmd = append(cmd, w)
			}
			if len(cmd) > 0 {
				cmds = append(cmds, cmd)
			}
		}
	}
	return cmds
}

// TestDocsCommands checks every jobfleet command line in docs/deploy.md:
// commands and flags the binary has.
func TestDocsCommands(t *testing.T) {
	needBinary(t)
	cmds := docCommands(t, repoFile("docs", "deploy.md"))
	if len(cmds) < 6 {
		t.Fatalf("found %d jobfleet commands in docs/deploy.md: the search is broken", len(cmds))
	}
	for _, c := range cmds {
		invocation{where: "docs/deploy.md: jobfleet " + strings.Join(c, " "), args: c, positional: true}.check(t)
	}
	rec := &recorder{}
	invocation{where: "mutated", args: shellWords("cluster partitions --server=https://x:8443 --cacert=ca.crt")}.check(rec)
	if !rec.failed {
		t.Errorf("a documented command with an unknown flag passes")
	}
}

// TestTestCommandInStep checks that the README, CI and test.sh run the
// same thing: the README's test command is ./test.sh, .ci/run ends by
// running it, and it runs the main module's vet lines, its race tests,
// the fault suite and the tests run without the race detector, and the
// deploy module's vet and tests.
func TestTestCommandInStep(t *testing.T) {
	readme, err := os.ReadFile(repoFile("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(repoFile(".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(repoFile("test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	inReadme := false
	for _, line := range strings.Split(string(readme), "\n") {
		if cmd, _, _ := strings.Cut(line, "#"); strings.TrimSpace(cmd) == "./test.sh" {
			inReadme = true
		}
	}
	if !inReadme {
		t.Error("README.md gives no ./test.sh line")
	}
	lines := strings.Split(strings.TrimSpace(string(ci)), "\n")
	if got := strings.TrimSpace(lines[len(lines)-1]); got != "exec ./test.sh" {
		t.Errorf(".ci/run ends with %q, want \"exec ./test.sh\"", got)
	}
	for _, want := range []string{
		"gofmt -l",
		"\ngo vet ./...\n",
		"\nGOOS=darwin go vet ./...\n",
		"\nGOOS=windows go vet ./dispatch/worker/...\n",
		// every package: all but the fault suite, then the fault suite
		// alone, without the race detector (docs/testing.md)
		"\ngo test -race -count=1 -timeout 60m $(go list ./... | grep -v '/internal/chaos$')\n",
		"\ngo test -count=1 -timeout 30m ./internal/chaos/\n",
		// the tests that run without the race detector, or skip under it
		"\ngo test -count=1 -run '^(TestRingBoundsLoad|TestRingMovementOnJoin|TestRingIsIndependentOfMemberOrder)$' ./shard/\n",
		"(cd deploy && go vet ./... && go test -count=1 -timeout 20m ./...)",
		"set -euo pipefail",
	} {
		if !strings.Contains(string(script), want) {
			t.Errorf("test.sh does not run %q", strings.TrimSpace(want))
		}
	}
}
