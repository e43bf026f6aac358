package chaos

import (
	"strings"
	"testing"
)

// TestFireViolations: each broken rule is reported once, and a clean
// history reports nothing.
func TestFireViolations(t *testing.T) {
	clean := History{Runs: map[string]*RunHistory{
		"r1": {Key: "r1", Creates: []RunCreate{{Rev: 5, Owner: "a", Epoch: 3, KeyOwner: "a", KeyEpoch: 3}}},
	}}
	if v := FireViolations(clean); len(v) != 0 {
		t.Errorf("clean history: %v, want none", v)
	}
	if got := clean.Fires(); got != 1 {
		t.Errorf("Fires() = %d, want 1", got)
	}
	bad := History{
		Runs: map[string]*RunHistory{
			"dup":      {Key: "dup", Creates: []RunCreate{{Rev: 5, Owner: "a", Epoch: 3, KeyOwner: "a", KeyEpoch: 3}, {Rev: 9, Owner: "b", Epoch: 8, KeyOwner: "b", KeyEpoch: 8}}},
			"unfenced": {Key: "unfenced", Creates: []RunCreate{{Rev: 7, Owner: "a", Epoch: 3, KeyOwner: "b", KeyEpoch: 6}}},
		},
		OwnerOverlaps: []OwnerOverlap{{Partition: 2, Rev: 11, Detail: "x"}},
	}
	v := strings.Join(FireViolations(bad), "\n")
	for _, want := range []string{"duplicate fire: run dup created 2 times", "unfenced fire: run unfenced", "two owners: partition 2"} {
		if !strings.Contains(v, want) {
			t.Errorf("violations lack %q:\n%s", want, v)
		}
	}
}
