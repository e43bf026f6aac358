package api

import (
	"encoding/json"
	"strconv"
)

// Shards makes each run of a job a sharded run: one run of Count items
// (or one item per value of Params), each an attempt chain of its own
// (its own attempt numbers, retries, timeout and run lease), handed to
// workers as they poll. The run's status follows from its items': it
// succeeds once MinSucceeded items have succeeded, and is dead once that
// can no longer happen. Count and Params are alternatives.
type Shards struct {
	// Count is the number of items, 1 to MaxShards, numbered 0 to
	// Count-1.
	Count int `json:"count,omitempty"`
	// Params are the items' parameters, one JSON value per item (so their
	// number is the item count, 1 to MaxShards), at most
	// MaxShardParamsBytes in all. A worker gets its item's parameter: an
	// "http" executor sends it as the request body (so such a job may have
	// neither payload nor executor.body), a "shell" command reads it from
	// JOBFLEET_SHARD_PARAM, a handler from worker.Run.ShardParam. It may
	// hold secret references, like the payload.
	Params []json.RawMessage `json:"params,omitempty"`
	// MaxParallel bounds the items of a run running at once; 0 (default)
	// means no bound but the workers' slots.
	MaxParallel int `json:"max_parallel,omitempty"`
	// MinSucceeded is how many items must succeed for the run to succeed,
	// 1 to the item count; 0 (default) means all of them.
	MinSucceeded int `json:"min_succeeded,omitempty"`
}

// Limits of sharded and broadcast runs.
const (
	// MaxShards is the most items a sharded run has.
	MaxShards = 10_000
	// MaxShardParamsBytes bounds Shards.Params, in bytes of JSON in all.
	MaxShardParamsBytes = 256 << 10
	// MaxShardAttempts bounds the attempts a run of items may record:
	// the item count times retry.max_attempts.
	MaxShardAttempts = 20_000
	// MaxBroadcastWorkers is the most workers one broadcast fire runs on.
	MaxBroadcastWorkers = 1_000
)

// Items returns the number of items of each run of the job: the shard
// count, 0 for a job without shards (a broadcast job's runs get theirs at
// fire time, one per worker).
func (s *Shards) Items() int {
	if s == nil {
		return 0
	}
	if len(s.Params) > 0 {
		return len(s.Params)
	}
	return s.Count
}

// HasItems reports whether the job's runs are made of items: sharded or
// broadcast.
func (j *Job) HasItems() bool { return j.Shards != nil || j.Broadcasts() }

// Broadcasts reports whether the job's runs are broadcast
// (placement.broadcast).
func (j *Job) Broadcasts() bool { return j.Placement != nil && j.Placement.Broadcast }

// validateShards checks the job's shards and placement.
func (j *Job) validateShards() error {
	s := j.Shards
	if j.Broadcasts() && s != nil {
		return fieldErr("placement.broadcast", "not together with shards: a broadcast run has one item per worker")
	}
	if s == nil {
		return nil
	}
	switch {
	case s.Count != 0 && len(s.Params) > 0:
		return fieldErr("shards.count", "not together with shards.params: the parameters' number is the item count")
	case s.Count == 0 && len(s.Params) == 0:
		return fieldErr("shards", "want count (1 to %d) or params (1 to %d JSON values)", MaxShards, MaxShards)
	case s.Count < 0 || s.Count > MaxShards:
		return fieldErr("shards.count", "%d is out of range; want 1 to %d", s.Count, MaxShards)
	case len(s.Params) > MaxShards:
		return fieldErr("shards.params", "%d values; want at most %d", len(s.Params), MaxShards)
	}
	total := 0
	for i, p := range s.Params {
		field := "shards.params[" + strconv.Itoa(i) + "]"
		if len(p) == 0 {
			return fieldErr(field, "empty; want a JSON value")
		}
		total += len(p)
		if total > MaxShardParamsBytes {
			return fieldErr("shards.params", "more than %d bytes of JSON in all", MaxShardParamsBytes)
		}
		if err := validateJSON(field, p, MaxShardParamsBytes); err != nil {
			return err
		}
		if _, err := SecretRefs(field, p); err != nil {
			return err
		}
	}
	n := s.Items()
	switch {
	case s.MaxParallel < 0:
		return fieldErr("shards.max_parallel", "%d is negative; want a positive bound, or 0 for none", s.MaxParallel)
	case s.MinSucceeded < 0 || s.MinSucceeded > n:
		return fieldErr("shards.min_succeeded", "%d is out of range; want 1 to the item count %d, or 0 for all", s.MinSucceeded, n)
	}
	if attempts := max(j.Retry.MaxAttempts, 1); n*attempts > MaxShardAttempts {
		return fieldErr("shards", "%d items × retry.max_attempts %d may make %d attempts in one run; want at most %d (fewer items or fewer attempts)",
			n, attempts, n*attempts, MaxShardAttempts)
	}
	if len(s.Params) > 0 && j.Executor.Type == ExecutorHTTP && (len(j.Payload) > 0 || len(j.Executor.Body) > 0) {
		return fieldErr("shards.params", "an http executor sends each item's parameter as its body: drop payload and executor.body, or put what the items share into each parameter")
	}
	return nil
}
