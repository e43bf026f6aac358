package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestDevContextName: the default data directory's dev writes "dev",
// another's "dev-" and the directory's name, made a valid context name.
func TestDevContextName(t *testing.T) {
	for dir, want := range map[string]string{
		defaultDevDataDir():                       "dev",
		defaultDevDataDir() + "/":                 "dev",
		defaultDevDataDir() + "/../jobfleet-dev":  "dev",
		"/tmp/jobfleet-dev2":                      "dev-jobfleet-dev2",
		"/home/ann/my fleet (2)":                  "dev-my-fleet--2-",
		"/srv/été":                                "dev--t-",
		"/srv/" + strings.Repeat("a", 100):        "dev-" + strings.Repeat("a", 60),
		"relative/" + strings.Repeat("b.c_d", 20): ("dev-" + strings.Repeat("b.c_d", 20))[:64],
	} {
		got := devContextName(dir)
		if got != want {
			t.Errorf("devContextName(%q) = %q, want %q", dir, got, want)
		}
		if err := validContextName(got); err != nil {
			t.Errorf("devContextName(%q) = %q: %v", dir, got, err)
		}
	}
}

// TestSecondDevLeavesTheCurrentContext: a dev on another data directory
// writes its own context and leaves the first dev's, and the current
// one, as they were; the default one's dev makes "dev" current again.
func TestSecondDevLeavesTheCurrentContext(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	lg := zap.NewNop()
	writeDevContext(lg, devContextName(defaultDevDataDir()), "http://127.0.0.1:8080", "/tmp/jobfleet-dev/admin.token")
	second := devContextName("/tmp/jobfleet-dev2")
	writeDevContext(lg, second, "http://127.0.0.1:18080", "/tmp/jobfleet-dev2/admin.token")
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "dev" {
		t.Errorf("current context %q after a second dev, want dev", cfg.CurrentContext)
	}
	if got := cfg.Contexts["dev"].Server; got != "http://127.0.0.1:8080" {
		t.Errorf("the first dev's context points at %q after a second dev, want http://127.0.0.1:8080", got)
	}
	if got := cfg.Contexts[second].Server; got != "http://127.0.0.1:18080" {
		t.Errorf("the second dev's context %q points at %q, want http://127.0.0.1:18080", second, got)
	}

	// With no context current, the other dev's becomes current.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	writeDevContext(lg, second, "http://127.0.0.1:18080", "")
	if cfg, err = loadConfig(); err != nil || cfg.CurrentContext != second {
		t.Errorf("current context %q (%v) after the only dev, want %q", cfg.CurrentContext, err, second)
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "jobfleet", "config.json")); err != nil {
		t.Error(err)
	}
}
