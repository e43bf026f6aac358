package notify

import (
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/internal/retry"
)

func TestBreaker(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	p := retry.Policy{Initial: 10 * time.Second, Max: 10 * time.Second} // 5s to 15s with jitter
	var b breaker
	for i := range 2 {
		b.started(t0)
		if opened, _ := b.failed(t0, 3, p); opened {
			t.Fatalf("failure %d opened the circuit, want the third", i+1)
		}
		if ok, _ := b.allow(t0); !ok {
			t.Fatalf("closed circuit refused a try after %d failures", i+1)
		}
	}
	opened, wait := b.failed(t0, 3, p)
	if !opened || wait < 5*time.Second || wait > 15*time.Second {
		t.Fatalf("third failure: opened %v for %v, want opened for 5s to 15s", opened, wait)
	}
	if ok, until := b.allow(t0.Add(wait - time.Millisecond)); ok || !until.Equal(t0.Add(wait)) {
		t.Fatalf("open circuit: allow = %v until %v, want refused until %v", ok, until, t0.Add(wait))
	}
	// A try that was in flight when it opened does not change it.
	if again, _ := b.failed(t0.Add(time.Second), 3, p); again {
		t.Fatal("a late failure reopened the circuit")
	}
	half := t0.Add(wait)
	if ok, _ := b.allow(half); !ok {
		t.Fatal("half-open circuit refused its probe")
	}
	b.started(half)
	if ok, until := b.allow(half); ok || !until.IsZero() {
		t.Fatalf("half-open circuit with its probe in flight: allow = %v until %v, want refused until the probe returns", ok, until)
	}
	reopened, wait2 := b.failed(half, 3, p)
	if !reopened || wait2 < 5*time.Second {
		t.Fatalf("failed probe: reopened %v for %v, want reopened", reopened, wait2)
	}
	if ok, _ := b.allow(half.Add(time.Second)); ok {
		t.Fatal("circuit reopened by a failed probe allowed a try")
	}
	if b.idle(half.Add(time.Second)) {
		t.Fatal("an open circuit is idle")
	}
	probe := half.Add(wait2)
	b.started(probe)
	if closed := b.succeeded(); !closed {
		t.Fatal("a successful probe did not close the circuit")
	}
	if ok, _ := b.allow(probe); !ok || b.failures != 0 || !b.idle(probe) {
		t.Fatalf("after a successful probe: allow %v, failures %d, idle %v; want closed and idle", ok, b.failures, b.idle(probe))
	}
}

func TestDestinationOf(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"https://Hooks.Example/a?x=1", "https://hooks.example:443"},
		{"http://hooks.example:8080/b", "http://hooks.example:8080"},
		{"http://hooks.example/c", "http://hooks.example:80"},
		{"http://[::1]:9/d", "http://[::1]:9"},
	} {
		if got := destinationOf(tt.url); got != tt.want {
			t.Errorf("destinationOf(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}
