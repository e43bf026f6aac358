package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// A job's pause state lives in a small key of its own, beside its spec:
//
//	jobs/<p>/!paused/<id>   {"paused":true,"updated_at":"..."}
//
// so that pausing and resuming a job write a few dozen bytes instead of
// the whole document: etcd keeps a copy of every version of a key until
// it is compacted, and a job document may be a megabyte. The key is under
// the partition's jobs/<p>/ prefix, so the partition's owner sees pauses
// and spec changes on one watch, in revision order. '!' is escaped in
// every job ID (EscapeID), so no spec key starts with "!paused/", and the
// pause keys of a partition are contiguous.
//
// The key and the document's own "paused" field are one setting, and the
// later write wins: the key applies only while its mod revision is above
// the document's (PauseKey.Apply). A PUT of the job (a later write) sets
// "paused" from its document, whatever the key says, and deletes the key;
// a batch leaves the key, which no longer applies.

// pauseSegment is the key segment of a partition's pause keys.
const pauseSegment = "!paused/"

// PausePrefix is the prefix of partition p's pause keys.
func (k Keys) PausePrefix(p int) string { return k.PartitionJobsPrefix(p) + pauseSegment }

// Pause is job id's pause key.
func (k Keys) Pause(p int, id string) string {
	return k.partitionKey("jobs/", p, pauseSegment, id, "", time.Time{})
}

// ParsePauseKey returns the job ID of a pause key of partition p; ok is
// false for any other key.
func (k Keys) ParsePauseKey(p int, key string) (id string, ok bool) {
	esc, found := strings.CutPrefix(key, k.PausePrefix(p))
	if !found {
		return "", false
	}
	id, err := UnescapeID(esc)
	return id, err == nil
}

// PauseKey is a job's pause key as read from etcd.
type PauseKey struct {
	// Paused is the state the key sets.
	Paused bool `json:"paused"`
	// UpdatedAt is when it was set.
	UpdatedAt time.Time `json:"updated_at"`
	// Revision is the key's mod revision (not stored in its value); 0
	// for no key.
	Revision int64 `json:"-"`
}

// EncodePause returns the stored form of a pause key.
func EncodePause(paused bool, at time.Time) string {
	b, _ := json.Marshal(PauseKey{Paused: paused, UpdatedAt: at}) // a bool and a time always encode
	return string(b)
}

// DecodePause decodes a pause key's value, with its mod revision.
func DecodePause(val []byte, rev int64) (PauseKey, error) {
	var k PauseKey
	if err := json.Unmarshal(val, &k); err != nil {
		return PauseKey{}, fmt.Errorf("stored pause state is corrupt: %w", err)
	}
	k.Revision = rev
	return k, nil
}

// Applies reports whether the key decides the pause state of a job whose
// spec has mod revision specRev: it was written after the spec.
func (k PauseKey) Applies(specRev int64) bool { return k.Revision > specRev }

// Apply returns j, as decoded from its spec (j.Revision the spec's mod
// revision), with the key applied if it Applies: Paused from the key,
// UpdatedAt the later of the two, and Revision the key's, so that a
// pause or resume changes the job's revision as an edit does and a
// document read before it is stale (Put).
func (k PauseKey) Apply(j Job) Job {
	if !k.Applies(j.Revision) {
		return j
	}
	j.Paused, j.Revision = k.Paused, k.Revision
	if k.UpdatedAt.After(j.UpdatedAt) {
		j.UpdatedAt = k.UpdatedAt
	}
	return j
}
