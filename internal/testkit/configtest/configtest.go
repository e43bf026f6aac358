// Package configtest checks components' Config.Validate in tests: that a
// good configuration passes, that each bad edit of it fails, and that a
// refusal wraps the package's sentinel and names the setting (the flag)
// at fault.
package configtest

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/internal/settings"
)

// Validator is a configuration that checks itself.
type Validator interface {
	Validate() error
}

// Rejects fails t unless ok validates and every edit, applied to a copy
// of ok, makes Validate fail. edits are named for the messages.
func Rejects[C Validator](t testing.TB, ok C, edits map[string]func(*C)) {
	t.Helper()
	if err := ok.Validate(); err != nil {
		t.Fatalf("the good config: %v", err)
	}
	for name, edit := range edits {
		c := ok
		edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted, want an error", name)
		}
	}
}

// Invalid checks the error of Validate on the bad config called name:
// it must wrap sentinel (the package's ErrInvalidConfig), start with
// prefix unless prefix is "", and name the setting key as a
// *settings.Error, or name none where key is "". It reports whether err
// wraps sentinel (the other checks are made only then).
func Invalid(t testing.TB, name string, err, sentinel error, prefix, key string) bool {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: Validate = %v, want %v", name, err, sentinel)
		return false
	}
	if prefix != "" && !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("%s: %q does not start with the package's prefix", name, err)
	}
	var se *settings.Error
	switch {
	case key != "" && (!errors.As(err, &se) || se.Key != key):
		t.Errorf("%s: %v does not name the setting %s", name, err, key)
	case key == "" && errors.As(err, &se):
		t.Errorf("%s: %v names setting %s, which has no flag", name, err, se.Key)
	}
	return true
}
