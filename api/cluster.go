package api

import (
	"encoding/json"
	"time"
)

// Placement is the reply of GET /v1/cluster/placement?job=ID: where a job
// ID lands and who schedules it. Hash and Partition are computed by
// package shard, as every member computes them; Target is the ring
// target of the answering member's current member view; Owner and Epoch
// are the owner key as the answering member's watch of the owner keys
// last saw it.
type Placement struct {
	Job string `json:"job"`
	// Exists says whether a job with this ID is stored now.
	Exists bool `json:"exists"`
	// Hash is xxhash64 of the ID as 16 lower-case hex digits.
	Hash string `json:"hash"`
	// Partitions is P; Partition is Hash mod P.
	Partitions int `json:"partitions"`
	Partition  int `json:"partition"`
	// Target is the member the ring assigns the partition to; "" with no
	// members.
	Target string `json:"target"`
	// Owner is the member that holds the partition's owner key; "" while
	// nobody does.
	Owner string `json:"owner"`
	// Epoch is the owner key's epoch (its create revision), 0 without an
	// owner.
	Epoch int64 `json:"epoch"`
	// OwnerSince is when the answering member saw the current owner take
	// the partition; nil when it has seen it since it started (etcd keeps
	// no time with a key).
	OwnerSince *time.Time `json:"owner_since,omitempty"`
	// Reason says in one sentence why the owner is who it is.
	Reason string `json:"reason"`
}

// Whoami is the reply of GET /v1/whoami: the caller's credential, role
// and job-ID prefix ("" for all jobs).
type Whoami struct {
	Credential string `json:"credential"`
	Role       string `json:"role"`
	Prefix     string `json:"prefix"`
}

// Overview is the reply of GET /v1/cluster/overview: the fleet as the
// answering member sees it, and that member's own activity. Fleet-wide
// totals of fires and lag are the sum of every member's overview (or of
// their metrics); one member knows only its own.
type Overview struct {
	// Member is the answering member's ID.
	Member string `json:"member"`
	// Now is the answering member's clock when it answered.
	Now time.Time `json:"now"`
	// Ready and ReadyReason are the answering member's readiness, as GET
	// /readyz answers it.
	Ready       bool   `json:"ready"`
	ReadyReason string `json:"ready_reason,omitempty"`
	// Partitions is P; Unowned counts partitions with no owner now;
	// Moving counts partitions whose owner is not their ring target.
	Partitions int `json:"partitions"`
	Unowned    int `json:"unowned"`
	Moving     int `json:"moving"`
	// Members lists the registered members, sorted by ID.
	Members []OverviewMember `json:"members"`
	// Activity is the answering member's own counters.
	Activity Activity `json:"activity"`
}

// OverviewMember is one registered member in an Overview.
type OverviewMember struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
	// RegisteredAt is when the member's current registration (and lease)
	// was made; LeaseAgeSeconds is Overview.Now minus it.
	RegisteredAt    time.Time `json:"registered_at"`
	LeaseAgeSeconds float64   `json:"lease_age_seconds"`
	// Owned counts the partitions whose owner key it holds; Targeted, the
	// partitions the ring assigns it.
	Owned    int `json:"owned"`
	Targeted int `json:"targeted"`
}

// Activity is one member's counters since it started, read from its own
// metrics. A reader computes rates from two overviews: (FiresTotal₂ −
// FiresTotal₁) / (Now₂ − Now₁).
type Activity struct {
	// FiresTotal counts the runs this member's fires recorded.
	FiresTotal float64 `json:"fires_total"`
	// LagP99Seconds is the 99th percentile of fire lag (fire time minus
	// scheduled time) of this member's on-time fires since it started,
	// estimated from the histogram's buckets; 0 before any fire.
	LagP99Seconds float64 `json:"lag_p99_seconds"`
	// RunsWaiting and RunsRunning count the runs of the partitions this
	// member owns that wait for a worker and that a worker holds;
	// RunsDead and RunsFailed count attempts that ended so since it
	// started.
	RunsWaiting float64 `json:"runs_waiting"`
	RunsRunning float64 `json:"runs_running"`
	RunsDead    float64 `json:"runs_dead_total"`
	RunsFailed  float64 `json:"runs_failed_total"`
}

// PartitionStreamSnapshot is the data of the first event ("snapshot") of
// GET /v1/cluster/partitions/watch: the partition table, each row with
// the time the answering member saw its owner take it when known, and
// the member view as GET /v1/cluster/members answers it.
type PartitionStreamSnapshot struct {
	Partitions int                     `json:"partitions"`
	Revision   int64                   `json:"revision"`
	Rows       []PartitionStreamChange `json:"assignments"`
	Members    json.RawMessage         `json:"members"`
}

// PartitionStreamChange is one partition's placement in a
// PartitionStreamSnapshot and the data of a "change" event: sent when
// the partition's owner, epoch or target changes. Since is when the
// answering member saw the current owner take it (nil if before it
// started).
type PartitionStreamChange struct {
	Partition int        `json:"partition"`
	Owner     string     `json:"owner"`
	Epoch     int64      `json:"epoch"`
	Target    string     `json:"target"`
	Since     *time.Time `json:"since,omitempty"`
}
