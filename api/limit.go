package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Limit is a limit key: a named bound shared by every attempt, of any
// job, item or member, that names the key (Job.Limits). It is the
// document of PUT /v1/limits/{key}.
//
// MaxRunning bounds the attempts holding the key that run at once, fleet
// wide; Rate bounds how many start in any window. A limit sets one or
// both. An attempt starts only while every key its job names has room;
// a key that names no stored limit bounds nothing.
//
// Decode with DecodeLimit, then call Validate.
type Limit struct {
	// Key names the limit, with the rules of job IDs (ValidateName), at
	// most MaxLimitKeyBytes. A credential limited to a job-ID prefix
	// manages only the keys that start with it.
	Key string `json:"key"`
	// MaxRunning is the most attempts naming the key that run at once,
	// 0 to MaxLimitRunning: 0 starts none (the runs wait). Lowering it
	// below the attempts running stops new starts until fewer run. Nil:
	// no bound on running attempts (Rate must be set).
	MaxRunning *int `json:"max_running,omitempty"`
	// Rate bounds the attempts started per window. Nil: no rate bound
	// (MaxRunning must be set).
	Rate *LimitRate `json:"rate,omitempty"`
	// UpdatedAt is when the limit was last stored. Server-set.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Revision is the etcd mod revision of the stored limit. Server-set;
	// ignored on writes.
	Revision int64 `json:"revision,omitempty"`
	// Status is the key's use as the answering member sees it: set on
	// reads, ignored on writes.
	Status *LimitStatus `json:"status,omitempty"`
}

// LimitRate is a limit's "rate": at most Count attempts start in any
// window of Per.
type LimitRate struct {
	// Count is the most starts per window, 1 to MaxLimitRateCount.
	Count int `json:"count"`
	// Per is the window, MinLimitRatePer to MaxLimitRatePer.
	Per Duration `json:"per"`
}

// LimitStatus is a limit key's use: the attempts holding it, the runs
// and items waiting for it, and the starts of the current rate window.
type LimitStatus struct {
	// Running is the attempts holding a slot of the key (fleet-wide, as
	// etcd records them; a lost attempt keeps its slot until its worker is
	// known gone, see docs/ownership.md).
	Running int `json:"running"`
	// Waiting is the runs and items that could start but for this key:
	// on the answering member's partitions for GET /v1/limits/{key}, on
	// every member's for GET /v1/cluster/limits.
	Waiting int `json:"waiting"`
	// Started is the starts recorded in the current rate window (rate
	// keys only).
	Started int `json:"started,omitempty"`
}

// LimitList is the reply of GET /v1/limits.
type LimitList struct {
	Limits     []Limit `json:"limits"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// Bounds of limits.
const (
	// MaxLimitKeyBytes is the longest limit key.
	MaxLimitKeyBytes = 128
	// MaxJobLimits is the most keys a job names.
	MaxJobLimits = 4
	// MaxLimitRunning is the largest max_running.
	MaxLimitRunning = 100_000
	// MaxLimitRateCount is the largest rate.count: the key's state keeps
	// one start time per count (a bounded document).
	MaxLimitRateCount = 1000
	// MinLimitRatePer and MaxLimitRatePer bound rate.per.
	MinLimitRatePer = Duration(time.Second)
	MaxLimitRatePer = Duration(24 * time.Hour)
	// MaxLimits is the most limits the fleet stores.
	MaxLimits = 10_000
	// MaxLimitBytes bounds a limit document.
	MaxLimitBytes = 4 << 10
)

// ErrInvalidLimit is matched by every error of DecodeLimit and Validate
// (they are *FieldError naming the field, and match ErrInvalidJob too, as
// every document error of the API does).
var ErrInvalidLimit = errors.New("invalid limit")

// limitError marks a *FieldError as a limit's.
type limitError struct{ *FieldError }

func (e limitError) Unwrap() []error { return []error{e.FieldError, ErrInvalidLimit} }

func limitErr(field, format string, args ...any) error {
	return limitError{fieldErr(field, format, args...)}
}

// DecodeLimit reads a limit document strictly (Unmarshal: unknown fields,
// duplicate keys and trailing data are refused). Errors match
// ErrInvalidLimit and name the field.
func DecodeLimit(r io.Reader) (Limit, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxLimitBytes+1))
	if err != nil {
		return Limit{}, fmt.Errorf("read limit: %w", err)
	}
	if len(data) > MaxLimitBytes {
		return Limit{}, limitErr("limit", "more than %d bytes", MaxLimitBytes)
	}
	var l Limit
	if err := Unmarshal(bytes.TrimSpace(data), &l); err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			field := de.Path
			if field == "" {
				field = "limit"
			}
			return Limit{}, limitErr(field, "%s", de.Msg)
		}
		return Limit{}, err
	}
	return l, nil
}

// Validate checks the limit and returns the first problem as an error
// matching ErrInvalidLimit, a *FieldError naming the field. Server-set
// fields are not checked.
func (l *Limit) Validate() error {
	if err := ValidateName("key", l.Key, MaxLimitKeyBytes); err != nil {
		return limitError{err.(*FieldError)}
	}
	if l.MaxRunning == nil && l.Rate == nil {
		return limitErr("max_running", "missing: a limit sets max_running, rate or both")
	}
	if m := l.MaxRunning; m != nil && (*m < 0 || *m > MaxLimitRunning) {
		return limitErr("max_running", "%d is out of range; want 0 to %d", *m, MaxLimitRunning)
	}
	if r := l.Rate; r != nil {
		if r.Count < 1 || r.Count > MaxLimitRateCount {
			return limitErr("rate.count", "%d is out of range; want 1 to %d", r.Count, MaxLimitRateCount)
		}
		if r.Per < MinLimitRatePer || r.Per > MaxLimitRatePer {
			return limitErr("rate.per", "%s is out of range; want %s to %s", r.Per, MinLimitRatePer, MaxLimitRatePer)
		}
	}
	return nil
}

// validateLimits checks a job's limit keys: at most MaxJobLimits, each a
// valid key, none twice. Errors name "limits[i]".
func validateLimits(keys []string) error {
	if len(keys) > MaxJobLimits {
		return fieldErr("limits", "%d keys; at most %d", len(keys), MaxJobLimits)
	}
	for i, k := range keys {
		field := fmt.Sprintf("limits[%d]", i)
		if err := ValidateName(field, k, MaxLimitKeyBytes); err != nil {
			return err
		}
		if slices.Contains(keys[:i], k) {
			return fieldErr(field, "%s is listed twice", quoteClipped(k))
		}
	}
	return nil
}

// LimitHolder is the stored record of a slot held: one per attempt
// (or item's attempt) running under a key with a stored limit, at
// <namespace>limits/held/<key>/<run-id>/<item>. The grant that starts the
// attempt creates it, in the same fenced transaction; the write that ends
// the attempt deletes it; the partition's owner deletes it when the
// attempt was lost and its worker is known gone (docs/ownership.md).
type LimitHolder struct {
	RunID     string    `json:"run_id"`
	JobID     string    `json:"job_id"`
	Partition int       `json:"partition"`
	Item      int       `json:"item"` // -1: the run's own chain
	Attempt   int       `json:"attempt"`
	Worker    string    `json:"worker"`
	Since     time.Time `json:"since"`
}

// LimitState is the stored state of a limit key every grant under it
// rewrites, at <namespace>limits/state/<key>: the grant transaction
// compares its mod revision, so two members granting under one key at
// once conflict and one of them retries. Starts are the start times of
// the latest grants, at most the rate's count, newest last (rate keys
// only).
type LimitState struct {
	Grants int64       `json:"grants"`
	Starts []time.Time `json:"starts,omitempty"`
}
