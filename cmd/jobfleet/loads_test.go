package main

import (
	"strings"
	"testing"
)

// TestLoadsInFlightFlag: --loads-in-flight 0 means no bound (-1 for the
// orchestrator, whose 0 is its default), a positive value is the bound,
// and a negative one is refused with the flag's name.
func TestLoadsInFlightFlag(t *testing.T) {
	for _, tt := range []struct {
		flag, want int
		err        string
	}{
		{flag: 2, want: 2},
		{flag: 16, want: 16},
		{flag: 0, want: -1},
		{flag: -1, err: "--loads-in-flight -1"},
	} {
		o := memberOptions{loadsInFlight: tt.flag}
		got, err := o.loadsConfig()
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("--loads-in-flight %d: error %v, want one naming %q", tt.flag, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("--loads-in-flight %d: %d, %v; want %d", tt.flag, got, err, tt.want)
		}
	}
}
