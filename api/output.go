package api

// PathOutput is the worker route that pushes a running attempt's output
// (OutputPush) to the orchestrator owning its run's partition.
const PathOutput = "/v1/worker/output"

// Live output bounds.
const (
	// MaxOutputChunkBytes is the most bytes of output one push carries.
	MaxOutputChunkBytes = 64 << 10
	// HeaderForwarded marks a request a member forwarded to the owner of
	// the run's partition (GET /v1/runs/{id}/output, POST
	// /v1/worker/output); its value ("1") is not interpreted. A
	// member that does not own the partition answers such a request
	// itself (421 for a push, 503 for a read) instead of forwarding it
	// again.
	HeaderForwarded = "Jobfleet-Forwarded-By"
)

// OutputPush is the body of POST /v1/worker/output: the next bytes of a
// running attempt's output, sent while it runs. Pushes are best-effort:
// the worker does not retry them, and the output a run keeps is still
// the completion's. The orchestrator holds the last bytes of each attempt
// in memory only.
type OutputPush struct {
	// Worker, RunID, Attempt and Item name the attempt, as in a
	// heartbeat; only the worker holding it, under the credential that
	// took it, may push its output.
	Worker  string `json:"worker"`
	RunID   string `json:"run_id"`
	Attempt int    `json:"attempt"`
	Item    *int   `json:"item,omitempty"`
	// Offset is the offset in bytes of Data's first byte in the
	// attempt's output (standard output and error together, as the
	// executor wrote them): a chunk sent again is kept once, and the bytes
	// of a push that never arrived are counted as skipped.
	Offset int64 `json:"offset"`
	// Data is the chunk, at most MaxOutputChunkBytes bytes (text as the
	// executor wrote it; a chunk may end inside a UTF-8 sequence, which
	// JSON carries as U+FFFD).
	Data string `json:"data"`
	// Credential is the ID of the request's credential (set by the HTTP
	// layer, never from the body).
	Credential string `json:"-"`
}

// OutputPushResponse answers a push.
type OutputPushResponse struct {
	// Held is false if the orchestrator no longer takes the attempt's
	// output (it has ended there): the worker may stop pushing.
	Held bool `json:"held"`
}

// RunOutput is the reply of GET /v1/runs/{id}/output: what the member
// owning the run's partition holds of an attempt's output.
type RunOutput struct {
	RunID string `json:"run_id"`
	// Item is the item whose attempt this is, nil for a run's own chain.
	Item *int `json:"item,omitempty"`
	// Attempt is the attempt's number; 0 if the run has no attempt yet.
	Attempt int `json:"attempt"`
	// Running says the attempt is running: its output may grow.
	Running bool `json:"running"`
	// Source is OutputLive for the bytes pushed while the attempt runs
	// (the last Config bytes of it), OutputStored for the output the run
	// keeps, once the attempt ended and its live output is no longer
	// held.
	Source string `json:"source"`
	// Skipped counts the bytes of the attempt's output before Output
	// that are not held (a live ring keeps only the last bytes).
	Skipped int64 `json:"skipped,omitempty"`
	// Output is the text held.
	Output string `json:"output"`
}

// RunOutput.Source values.
const (
	OutputLive   = "live"
	OutputStored = "stored"
)

// Events of GET /v1/runs/{id}/output?follow=1 (text/event-stream): each
// event's data is one line of JSON.
const (
	// EventOutput's data is an OutputEvent: the next bytes.
	EventOutput = "output"
	// EventEnd's data is a RunOutput without Output: the attempt has
	// ended (or its output is no longer held); the stream ends after it.
	EventEnd = "end"
)

// OutputEvent is the data of an "output" event.
type OutputEvent struct {
	// Attempt is the attempt the bytes are of.
	Attempt int `json:"attempt"`
	// Offset is the offset of Data's first byte in the attempt's output.
	Offset int64 `json:"offset"`
	// Skipped counts the bytes before Data the follower missed (dropped
	// from the ring before it read them, or never pushed).
	Skipped int64 `json:"skipped,omitempty"`
	// Data is the bytes, as text.
	Data string `json:"data"`
}
