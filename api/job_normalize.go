package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// Normalize fills defaults and canonical forms in place; it never fails
// and does not validate. Defaults: Timezone "UTC"; Retry.MaxAttempts 1;
// Retry.InitialBackoff 1s; Retry.MaxBackoff the larger of 1m and
// InitialBackoff; Timeout 1h; ConcurrencyPolicy "allow"; MisfirePolicy
// "run_once"; and for an "http" executor, Method "POST". It also trims
// blanks around Schedule, upper-cases Method, turns a JSON null payload or
// body into none, trims blanks around the placement selector, and converts
// RunAt, NotBefore and NotAfter to UTC; each "after" entry without
// states gets DefaultAfterOn.
func (j *Job) Normalize() {
	j.Schedule = strings.TrimSpace(j.Schedule)
	if j.Timezone == "" {
		j.Timezone = DefaultTimezone
	}
	for _, t := range []**time.Time{&j.RunAt, &j.NotBefore, &j.NotAfter} {
		if *t != nil {
			at := (*t).UTC()
			*t = &at
		}
	}
	if len(j.Exclude) == 0 {
		j.Exclude = nil
	}
	if isNull(j.Payload) {
		j.Payload = nil
	}
	j.Payload = compactJSON(j.Payload)
	j.Executor.normalize()
	if j.Shards != nil {
		for i, p := range j.Shards.Params {
			j.Shards.Params[i] = compactJSON(p)
		}
	}
	j.Retry.normalize()
	if j.Timeout == 0 {
		j.Timeout = DefaultTimeout
	}
	if j.ConcurrencyPolicy == "" {
		j.ConcurrencyPolicy = ConcurrencyAllow
	}
	if j.MisfirePolicy == "" {
		j.MisfirePolicy = MisfireRunOnce
	}
	j.Placement.normalize()
	j.normalizeAfter()
	j.normalizeSteps()
}

// normalize fills a retry policy's defaults: MaxAttempts 1,
// InitialBackoff 1s, MaxBackoff the larger of 1m and InitialBackoff.
func (r *RetryPolicy) normalize() {
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	if r.InitialBackoff == 0 {
		r.InitialBackoff = DefaultInitialBackoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = max(DefaultMaxBackoff, r.InitialBackoff)
	}
}

// normalize fills an executor's defaults: the method of an "http" one
// (upper case, default "POST"); a JSON null body is none.
func (e *Executor) normalize() {
	if e.Type == ExecutorHTTP {
		e.Method = strings.ToUpper(e.Method)
		if e.Method == "" {
			e.Method = DefaultMethod
		}
	}
	if isNull(e.Body) {
		e.Body = nil
	}
	e.Body = compactJSON(e.Body)
}

// compactJSON returns raw without insignificant white space, so receivers
// get the payload as data, not as it was indented in a job file. Invalid
// JSON is returned unchanged for Validate to report.
func compactJSON(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return json.RawMessage(b.Bytes())
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}
