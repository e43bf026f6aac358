package dispatch

import (
	"runtime"
	"testing"
	"time"
)

// An interner hands out one value per key while some holder keeps it,
// and forgets the key once nothing does.
func TestInternerSharesAndForgets(t *testing.T) {
	var in interner[string, [4]int]
	made := 0
	mk := func() *[4]int { made++; return &[4]int{made} }
	a, b := in.get("k", mk), in.get("k", mk)
	if a != b || made != 1 {
		t.Fatalf("two gets of one key made %d values (%p, %p), want one shared", made, a, b)
	}
	if c := in.get("other", mk); c == a || made != 2 {
		t.Fatalf("another key shares the value, or made %d values", made)
	}
	runtime.KeepAlive(a)
	a, b = nil, nil
	deadline := time.Now().Add(10 * time.Second)
	for in.len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the interner still holds %d keys whose values nothing holds", in.len())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if d := in.get("k", mk); d[0] != 3 {
		t.Fatalf("a key whose value was collected gives value %v, want a new one", d)
	}
}
