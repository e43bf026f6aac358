package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
)

// DecodeJob reads one job document, a JSON object, from r. It reads at
// most maxBytes bytes (DefaultMaxDocumentBytes if maxBytes <= 0) and fails
// with an error matching ErrTooLarge beyond that. It decodes with
// Unmarshal, so it refuses everything Unmarshal does: data after the
// object, keys given twice at any depth (payloads and headers included),
// fields the document does not define or that differ from one only in
// case, values of the wrong type (a duration that is not a string like
// "30s"), bytes that are not UTF-8 and unpaired surrogate escapes. It also
// refuses a zero given explicitly where leaving the field out means a
// default ("timeout": "0s", "retry": {"max_attempts": 0}): see
// checkGivenZeros. Errors match ErrInvalidJob; those about one value are a
// *FieldError naming its path. It does not call Normalize or Validate.
func DecodeJob(r io.Reader, maxBytes int64) (Job, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxDocumentBytes
	}
	data, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return Job{}, fmt.Errorf("read job: %w", err)
	}
	if int64(len(data)) > maxBytes {
		return Job{}, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	var j Job
	if err := Unmarshal(data, &j); err != nil {
		return Job{}, JobError(err)
	}
	if err := checkGivenZeros(data); err != nil {
		return Job{}, err
	}
	return j, nil
}

// JobError converts an error of Unmarshal about a job document into the
// job model's terms: a *DecodeError about a value becomes a *FieldError
// for its path, one about the document as a whole an error matching
// ErrInvalidJob ("invalid job: empty document"). Other errors are
// returned as they are.
func JobError(err error) error {
	var de *DecodeError
	if !errors.As(err, &de) {
		return err
	}
	if de.Path == "" {
		return fmt.Errorf("%w: %s", ErrInvalidJob, de.Msg)
	}
	return fieldErr(de.Path, "%s", de.Msg)
}

// givenZeros are the fields of the job document whose zero means "the
// default" when the field is left out, as pointers, so that a zero given
// explicitly can be told from one left out.
type givenZeros struct {
	Timeout             *Duration `json:"timeout"`
	MaxFires            *int64    `json:"max_fires"`
	PauseAfterFailures  *int      `json:"pause_after_failures"`
	ExpectSuccessWithin *Duration `json:"expect_success_within"`
	Retry               *struct {
		MaxAttempts    *int      `json:"max_attempts"`
		InitialBackoff *Duration `json:"initial_backoff"`
		MaxBackoff     *Duration `json:"max_backoff"`
	} `json:"retry"`
	History *struct {
		MaxRuns *int      `json:"max_runs"`
		MaxAge  *Duration `json:"max_age"`
	} `json:"history"`
	Shards *struct {
		Count        *int `json:"count"`
		MaxParallel  *int `json:"max_parallel"`
		MinSucceeded *int `json:"min_succeeded"`
	} `json:"shards"`
}

// checkGivenZeros refuses a zero given explicitly in a field where leaving
// the field out means its default: today "timeout": "0s" would silently
// mean one hour. Every duration and count of the job document whose
// absence means a default is either left out (or null), taking the
// default, or at least its minimum; none takes zero. (delete_after is a
// string whose empty value is the default: "0s" there is a value of its
// own, deleting a finished job at once.) data has been decoded by
// Unmarshal.
func checkGivenZeros(data []byte) error {
	var g givenZeros
	if err := json.Unmarshal(data, &g); err != nil {
		return nil // Unmarshal accepted it; nothing more to say
	}
	zeroDuration := func(d *Duration) bool { return d != nil && *d == 0 }
	zeroInt := func(n *int) bool { return n != nil && *n == 0 }
	leaveOut := func(field, what, def string) error {
		return fieldErr(field, "%s; leave the field out for the default (%s)", what, def)
	}
	switch {
	case zeroDuration(g.Timeout):
		return leaveOut("timeout", "0s is not a timeout: give at least 1s, or \"none\" for no time limit", DefaultTimeout.String())
	case g.Retry != nil && zeroInt(g.Retry.MaxAttempts):
		return leaveOut("retry.max_attempts", fmt.Sprintf("0 attempts would never run the job; want 1 to %d", MaxAttempts), "1, no retry")
	case g.Retry != nil && zeroDuration(g.Retry.InitialBackoff):
		return leaveOut("retry.initial_backoff", "0s is not a backoff: give at least 1ms", DefaultInitialBackoff.String())
	case g.Retry != nil && zeroDuration(g.Retry.MaxBackoff):
		return leaveOut("retry.max_backoff", "0s is not a backoff: give at least 1ms", "the larger of 1m and retry.initial_backoff")
	case g.MaxFires != nil && *g.MaxFires == 0:
		return leaveOut("max_fires", "0 fires would never run the job", "no limit")
	case zeroInt(g.PauseAfterFailures):
		return leaveOut("pause_after_failures", "0 failures would pause the job before it ran", "never pause")
	case zeroDuration(g.ExpectSuccessWithin):
		return leaveOut("expect_success_within", fmt.Sprintf("0s would make the job overdue at once: give at least %v", MinExpectSuccessWithin), "never overdue")
	case g.History != nil && zeroInt(g.History.MaxRuns):
		return leaveOut("history.max_runs", fmt.Sprintf("0 runs is not a history; want 1 to %d", MaxHistoryRuns), "the fleet's --history-max-runs")
	case g.History != nil && zeroDuration(g.History.MaxAge):
		return leaveOut("history.max_age", "0s is not an age: give at least 1s", "the fleet's --history-max-age")
	case g.Shards != nil && zeroInt(g.Shards.Count):
		return fieldErr("shards.count", "0 items; want 1 to %d, or leave it out and give shards.params", MaxShards)
	case g.Shards != nil && zeroInt(g.Shards.MaxParallel):
		return leaveOut("shards.max_parallel", "0 is not a bound: give at least 1", "no bound")
	case g.Shards != nil && zeroInt(g.Shards.MinSucceeded):
		return leaveOut("shards.min_succeeded", "0 items cannot decide a run: give at least 1", "all items")
	}
	return nil
}

// jsonKind describes a Go type in the JSON document's terms.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return t.String()
}
