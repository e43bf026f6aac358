package chaos

import (
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/jobfleet/jobfleet/shard"
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

// TestOwnerHistoryRefences: an owner rewriting its own key (same member,
// same create revision: a re-fence) is not a new owner; another member's
// write of an existing key, or a key first seen already rewritten by
// someone else, is two owners.
func TestOwnerHistoryRefences(t *testing.T) {
	w := &historyWatch{h: History{OwnerAcquired: map[int][]time.Time{}}, owners: map[int]shard.OwnerInfo{}}
	now := time.Now()
	put := func(member string, create, mod int64) {
		w.applyOwnerLocked("00003", &mvccpb.KeyValue{Key: []byte("owners/00003"), Value: []byte(member), CreateRevision: create, ModRevision: mod}, false, now)
	}
	put("a", 10, 10) // acquired
	put("a", 10, 14) // re-fenced
	put("a", 10, 20) // again
	if len(w.h.OwnerOverlaps) != 0 || w.h.OwnerRefences != 2 || len(w.h.OwnerAcquired[3]) != 1 {
		t.Fatalf("after re-fences: overlaps %v, re-fences %d, acquisitions %d; want none, 2, 1", w.h.OwnerOverlaps, w.h.OwnerRefences, len(w.h.OwnerAcquired[3]))
	}
	put("b", 10, 25) // another member writes the held key
	if len(w.h.OwnerOverlaps) != 1 {
		t.Errorf("another member's write of a held key: overlaps %v, want 1", w.h.OwnerOverlaps)
	}
	w.applyOwnerLocked("00003", &mvccpb.KeyValue{Key: []byte("owners/00003")}, true, now)
	put("c", 30, 31) // first seen rewritten: not a creation this watch saw
	if len(w.h.OwnerOverlaps) != 2 {
		t.Errorf("a key first seen rewritten: overlaps %v, want 2", w.h.OwnerOverlaps)
	}
}
