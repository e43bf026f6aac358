package api

import (
	"encoding/json"
	"time"
)

// Error is the body of every error reply: {"error": "message"}. The
// message is for people; the status code is what programs act on.
type Error struct {
	Message string `json:"error"`
}

// Status is the body of GET /healthz and GET /readyz, and of POST
// /v1/cluster/drain (status "draining"). Reason says why a member is not
// ready (503); it is empty otherwise.
type Status struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// JobList is the reply of GET /v1/jobs: one page of jobs, in the API's
// order (by partition, then ID).
type JobList struct {
	Jobs []Job `json:"jobs"`
	// NextCursor is the ?cursor of the next page; "" on the last page.
	NextCursor string `json:"next_cursor"`
}

// RunList is the reply of GET /v1/jobs/{id}/runs, newest first.
type RunList struct {
	Runs []Run `json:"runs"`
}

// FailingRunList is the reply of GET /v1/runs: entries of the
// failing-runs index (runs failed or dead), in the index's order (by
// partition, job and scheduled time; as the orchestrator's store lists them).
type FailingRunList struct {
	Runs []FailingRun `json:"runs"`
	// NextCursor is the ?cursor of the next page; "" on the last page.
	NextCursor string `json:"next_cursor"`
}

// Triggered is the reply of POST /v1/jobs/{id}/trigger (202): the ID the
// run of the trigger will have.
type Triggered struct {
	RunID string `json:"run_id"`
}

// TriggerRequest is the optional body of POST /v1/jobs/{id}/trigger:
// Payload, if given, is the run's payload instead of the job's (any JSON
// value, checked and bounded as a job's payload is, secret references
// included; recorded in the run document).
type TriggerRequest struct {
	Payload json.RawMessage `json:"payload,omitempty"`
}

// ValidateTriggerPayload checks a trigger's payload with the rules of a
// job's (Job.Validate's "payload"): JSON within limits.MaxPayloadBytes,
// at most MaxJSONDepth deep, with well-formed secret references. Errors
// are *FieldError naming "payload".
func ValidateTriggerPayload(raw json.RawMessage, limits Limits) error {
	if limits.MaxPayloadBytes <= 0 {
		limits.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if err := validateJSON("payload", raw, limits.MaxPayloadBytes); err != nil {
		return err
	}
	_, err := SecretRefs("payload", raw)
	return err
}

// PartitionTable is the reply of GET /v1/cluster/partitions: who owns each
// partition (read from etcd at Revision) and who should (the ring target
// of the answering member's current member view).
type PartitionTable struct {
	// Partitions is P, the cluster's partition count.
	Partitions int   `json:"partitions"`
	Revision   int64 `json:"revision"`
	// Rows has one row per partition, in partition order.
	Rows []PartitionRow `json:"assignments"`
}

// PartitionRow is one partition's placement: its owner and owner epoch as
// etcd records them, and its ring target. Owner is "" while the partition
// has no owner; Owner differs from Target while a handoff is due.
type PartitionRow struct {
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`
	Epoch     int64  `json:"epoch"`
	Target    string `json:"target"`
}

// Where StorageReport.QuotaSource comes from.
const (
	QuotaFromFlag    = "flag"    // the orchestrator's --etcd-quota-bytes, smaller than what etcd reports or etcd reports none
	QuotaFromEtcd    = "etcd"    // etcd's status (v3.6+)
	QuotaFromDefault = "default" // neither: etcd's default quota
)

// StorageReport is the reply of GET /v1/cluster/storage: etcd's storage as
// one member sees it now.
type StorageReport struct {
	// DBSize is etcd's database file size (what its quota counts) and
	// DBSizeInUse the part of it in use, the largest over the endpoints,
	// in bytes.
	DBSize      int64 `json:"db_size_bytes"`
	DBSizeInUse int64 `json:"db_size_in_use_bytes"`
	// Quota is etcd's space quota in bytes; QuotaSource says where it
	// comes from: "flag" (--etcd-quota-bytes), "etcd" (its status) or
	// "default" (2 GiB).
	Quota       int64  `json:"quota_bytes"`
	QuotaSource string `json:"quota_source"`
	// HighWater is the high-water mark as a fraction of the quota, and
	// HighWaterBytes in bytes; AboveHighWater tells whether DBSize is
	// above it (new jobs and triggers are refused with 507).
	HighWater      float64 `json:"high_water"`
	HighWaterBytes int64   `json:"high_water_bytes"`
	AboveHighWater bool    `json:"above_high_water"`
	// Revision is etcd's current revision, CompactedRevision the one the
	// fleet last compacted to (0 if it never did, or if compaction is
	// left to etcd, which does not report it over its API).
	Revision          int64 `json:"revision"`
	CompactedRevision int64 `json:"compacted_revision"`
	// Compaction is the fleet's last compaction record, null before the
	// first.
	Compaction *Compaction `json:"compaction"`
	// CompactionInterval is this member's compaction interval, "0s" if
	// compaction is left to etcd.
	CompactionInterval Duration `json:"compaction_interval"`
	// Keys counts the fleet's keys in etcd.
	Keys KeyCounts `json:"keys"`
	// History is the run history of the partitions the answering member
	// owns, as their scheduler accounts it; null before it schedules any.
	// The fleet's is the sum over the members (jobfleet_history_bytes).
	History *History `json:"history"`
	// Alarms are the alarms raised in the etcd cluster (NOSPACE,
	// CORRUPT); empty if none.
	Alarms []Alarm `json:"alarms"`
	// Endpoints are the etcd endpoints' own sizes.
	Endpoints []EtcdEndpoint `json:"endpoints"`
	// CheckedAt is when this report was read.
	CheckedAt time.Time `json:"checked_at"`
}

// Compaction is the fleet's compaction record: the JSON value of
// <namespace>compaction in etcd, written by the member that claims a
// round, and StorageReport.Compaction.
type Compaction struct {
	// Member is the member that claimed the round.
	Member string `json:"member"`
	// Revision is the revision it compacted etcd to.
	Revision int64 `json:"revision"`
	// At is when it claimed the round.
	At time.Time `json:"at"`
	// Interval is its compaction interval: the revision was current at
	// least this long before At.
	Interval Duration `json:"interval"`
}

// History is the run history one member's partitions keep.
type History struct {
	// Member is the member, Partitions how many it owns.
	Member     string `json:"member"`
	Partitions int    `json:"partitions"`
	// Runs and Bytes count the run documents kept and their bytes.
	Runs  int   `json:"runs"`
	Bytes int64 `json:"bytes"`
	// BudgetBytes is these partitions' share of the fleet's history
	// budget (--history-budget).
	BudgetBytes int64 `json:"budget_bytes"`
}

// KeyCounts are key counts of the fleet's namespace, read with count-only
// ranges at one revision.
type KeyCounts struct {
	// Jobs counts job keys: specs, pending trigger requests and pause
	// states (a job paused or resumed since it was last written has one).
	Jobs int64 `json:"jobs"`
	// Runs counts run documents (the history, active runs included).
	Runs int64 `json:"runs"`
	// ActiveRuns counts runs not yet final.
	ActiveRuns int64 `json:"active_runs"`
	// FailingRuns counts entries of the failing-runs index: runs failed,
	// or dead within the last day.
	FailingRuns int64 `json:"failing_runs"`
	// Total counts every key of the namespace.
	Total int64 `json:"total"`
}

// Alarm is one alarm raised in the etcd cluster.
type Alarm struct {
	// Member is the etcd member's ID, in hex as etcdctl prints it.
	Member string `json:"member"`
	// Alarm is NOSPACE or CORRUPT.
	Alarm string `json:"alarm"`
}

// EtcdEndpoint is one etcd endpoint's status at the last check.
type EtcdEndpoint struct {
	// Endpoint is the client URL asked.
	Endpoint string `json:"endpoint"`
	// DBSize and DBSizeInUse are its database file size and the part of
	// it in use, in bytes.
	DBSize      int64 `json:"db_size_bytes"`
	DBSizeInUse int64 `json:"db_size_in_use_bytes"`
	// Quota is what the endpoint reports as its quota, 0 if nothing.
	Quota int64 `json:"quota_bytes,omitempty"`
	// Error is why the endpoint did not answer, "" if it did.
	Error string `json:"error,omitempty"`
}

// Limits of a batch write (POST /v1/jobs:batch).
const (
	// MaxBatchJobs is the most jobs one batch may hold. A batch is one
	// etcd transaction with one compare and one put per job, and etcd
	// refuses transactions with more than --max-txn-ops operations in any
	// of their lists, 128 by default: the fleet assumes the default.
	MaxBatchJobs = 128
	// MaxBatchBytes bounds the stored documents of one batch, keys and
	// values, in bytes, which keeps its transaction well under etcd's
	// request limit (--max-request-bytes, 1.5 MiB by default).
	MaxBatchBytes = 1 << 20
)

// BatchRequest is the body of POST /v1/jobs:batch: up to
// MaxBatchJobs job documents written in one transaction, all or
// none. Mode is "create" (the default: an existing ID fails its item with
// 409) or "apply" (create or replace; an item naming a "revision"
// replaces only that revision).
type BatchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
	Mode string            `json:"mode,omitempty"`
}

// BatchReply is the reply of POST /v1/jobs:batch: one result per item of
// the request, in order. Error is set (and the status code is not 200)
// when any item failed, in which case nothing was written.
type BatchReply struct {
	Error   string        `json:"error,omitempty"`
	Results []BatchResult `json:"results"`
}

// BatchResult is the outcome of one item of a batch. Status is 201
// (created), 200 (replaced), 400 (invalid: Error names the field), 409
// (the ID exists in create mode, or
// the item's revision is stale) or 424 (valid, but not written because
// another item failed). ID is the item's ID as far as it could be read;
// Revision is the stored job's revision on success.
type BatchResult struct {
	ID       string `json:"id"`
	Status   int    `json:"status"`
	Error    string `json:"error,omitempty"`
	Revision int64  `json:"revision,omitempty"`
}

// NextFires is the reply of GET /v1/jobs/{id}/next and of POST
// /v1/schedule:preview (without JobID): the next scheduled times of a
// job, in order, as its partition's owner will fire them. Timezone is the
// job's zone ("UTC" by default), in which Local is written. Paused says
// the job is paused: it fires these times only if resumed before them.
type NextFires struct {
	JobID    string `json:"job_id,omitempty"`
	Timezone string `json:"timezone"`
	Paused   bool   `json:"paused,omitempty"`
	// Status is the job's (Job.Status); empty in a preview.
	Status JobStatus `json:"status,omitempty"`
	Fires  []Fire    `json:"fires"`
}

// Fire is one fire of a job: when it fires, Local in RFC 3339 with the
// offset of the job's zone at that instant, UTC in RFC 3339 with "Z". Both
// name the same instant (fractions of a second appear only when the time
// has them). ScheduledAt, in UTC, is the scheduled time the fire is for
// (its run's ID and scheduled_at) when the job's jitter delays it; empty
// when the job fires at its scheduled time.
type Fire struct {
	Local       string `json:"local"`
	UTC         string `json:"utc"`
	ScheduledAt string `json:"scheduled_at,omitempty"`
}

// PreviewRequest is the body of POST /v1/schedule:preview: a schedule (a
// cron expression, descriptor or "@every D") in Timezone, or a one-off
// RunAt, and how many times to list (1 to 100, default 10).
type PreviewRequest struct {
	Schedule string     `json:"schedule,omitempty"`
	Timezone string     `json:"timezone,omitempty"`
	RunAt    *time.Time `json:"run_at,omitempty"`
	// Count is how many fires to list, 1 to MaxNextFires; nil lists
	// the default (10). A 0 given is refused, as ?count=0 is.
	Count *int `json:"count,omitempty"`
}

// WorkerList is the reply of GET /v1/cluster/workers: the live worker
// registrations, by ID.
type WorkerList struct {
	Workers []Worker `json:"workers"`
}
