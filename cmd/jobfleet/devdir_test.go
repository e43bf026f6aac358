package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevDataDirMustBePrivate checks that dev creates its data directory
// 0700 and refuses one that others can write or that another user owns
// (as another user could pre-create the default in /tmp).
func TestDevDataDirMustBePrivate(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "fresh")
	if err := ensurePrivateDir(fresh); err != nil {
		t.Fatalf("new directory: %v", err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("new directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if err := ensurePrivateDir(fresh); err != nil {
		t.Fatalf("existing own directory: %v", err)
	}

	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777)
	if err := ensurePrivateDir(shared); err == nil || !strings.Contains(err.Error(), "mode 0777") {
		t.Errorf("world-writable directory: %v, want refused naming its mode", err)
	}

	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	if err := ensurePrivateDir(file); err == nil {
		t.Errorf("a file: accepted")
	}
	link := filepath.Join(base, "link")
	os.Symlink(fresh, link)
	if err := ensurePrivateDir(link); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a symbolic link: %v, want refused", err)
	}

	if os.Geteuid() != 0 {
		t.Log("not root: the test of a directory owned by another user is skipped")
		return
	}
	theirs := filepath.Join(base, "theirs")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := ensurePrivateDir(theirs); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("another user's directory: %v, want refused naming the owner", err)
	}
}
