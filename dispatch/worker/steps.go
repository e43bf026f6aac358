package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"os"
	"strings"
	"sync"

	"github.com/jobfleet/jobfleet/api"
)

// This file has what the executors do for the attempts of a run made of
// steps (api.AttemptGrant.Step): the results of the steps a step needs
// handed to it, and its own result taken from what it returns.

// Headers set on a step's attempt by the "http" executor: HeaderStep is
// the step's ID (Jobfleet-Shard-Index and -Count are then the step's
// shard), HeaderItem the attempt's item of the run (what its reports
// name), HeaderRound the run's round.
const (
	HeaderStep  = "Jobfleet-Step"
	HeaderItem  = "Jobfleet-Item"
	HeaderRound = "Jobfleet-Round"
)

// Environment variables of a step's "shell" attempt: EnvStep is the
// step's ID; EnvRound the run's round (as HeaderRound); EnvNeedsFile
// names a file holding the JSON object of the results of the steps it
// needs (set only for a step that needs some), removed when the attempt
// ends.
const (
	EnvStep      = "JOBFLEET_STEP"
	EnvRound     = "JOBFLEET_ROUND"
	EnvNeedsFile = "JOBFLEET_NEEDS_FILE"
)

// stepBody returns the body an "http" step's attempt sends: body itself
// for a step that needs none, else {"needs": {...}, "payload": body}
// (payload left out when body is empty).
func stepBody(a api.AttemptGrant, body []byte) []byte {
	if a.Step == nil || len(a.Step.Needs) == 0 {
		return body
	}
	out := append([]byte(`{"needs":`), a.Step.Needs...)
	if len(body) > 0 {
		out = append(append(append(out, `,"payload":`...), body...), '}')
		return out
	}
	return append(out, '}')
}

// checkResult returns res compacted, nil for none (empty or JSON null),
// or an error for a result that is not JSON or is longer than
// api.MaxStepResultBytes once compacted.
func checkResult(res []byte) (json.RawMessage, error) {
	res = bytes.TrimSpace(res)
	if len(res) == 0 || string(res) == "null" {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, res); err != nil {
		return nil, fmt.Errorf("step result is not JSON: %w", err)
	}
	if buf.Len() > api.MaxStepResultBytes {
		return nil, fmt.Errorf("step result of %d bytes refused: a step's result is at most %d bytes", buf.Len(), api.MaxStepResultBytes)
	}
	return buf.Bytes(), nil
}

// resultBuffer keeps the first api.MaxStepResultBytes+1 bytes written to
// it (enough to tell a result from a longer body) and counts the rest.
type resultBuffer struct {
	b     []byte
	total int
}

// Write keeps what it may of p; it always succeeds.
func (r *resultBuffer) Write(p []byte) (int, error) {
	r.total += len(p)
	if room := api.MaxStepResultBytes + 1 - len(r.b); room > 0 {
		r.b = append(r.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// httpResult returns the result of an "http" step from its response
// body: the body if it is JSON (none if it is not); a body declared JSON
// (Content-Type application/json or …+json) longer than
// api.MaxStepResultBytes fails the attempt.
func (r *resultBuffer) httpResult(contentType string) (json.RawMessage, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	declared := mt == "application/json" || strings.HasSuffix(mt, "+json")
	if r.total > api.MaxStepResultBytes {
		if declared {
			return nil, fmt.Errorf("step result of %d bytes refused: a step's result is at most %d bytes", r.total, api.MaxStepResultBytes)
		}
		return nil, nil
	}
	if !json.Valid(r.b) {
		if declared {
			return nil, fmt.Errorf("step result declared %s is not JSON", mt)
		}
		return nil, nil
	}
	return checkResult(r.b)
}

// lastLine keeps the last api.MaxStepResultBytes+1 bytes of a shell
// step's standard output: its last line is the step's result when it is
// JSON.
type lastLine struct {
	b []byte
}

// Write keeps the tail of what is written; it always succeeds.
func (l *lastLine) Write(p []byte) (int, error) {
	const keep = api.MaxStepResultBytes + 1
	l.b = append(l.b, p...)
	if len(l.b) > 2*keep {
		l.b = append(l.b[:0], l.b[len(l.b)-keep:]...)
	}
	return len(p), nil
}

// result returns the last non-empty line if it is JSON, at most
// api.MaxStepResultBytes; none otherwise (a last line longer than that
// is not a result).
func (l *lastLine) result() json.RawMessage {
	b := bytes.TrimRight(l.b, " \t\r\n")
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 && len(l.b) > api.MaxStepResultBytes {
		return nil // the line started before what is kept
	}
	line := bytes.TrimSpace(b[i+1:])
	if !json.Valid(line) {
		return nil
	}
	res, err := checkResult(line)
	if err != nil {
		return nil
	}
	return res
}

// shellOutput is where a shell step's standard output and error go: the
// attempt's output, and standard output's last line. Its two writers
// share a lock, as exec copies the two streams concurrently.
type shellOutput struct {
	mu   sync.Mutex
	out  *outputBuffer
	last lastLine
}

type shellStream struct {
	o      *shellOutput
	stdout bool
}

func (s shellStream) Write(p []byte) (int, error) {
	s.o.mu.Lock()
	defer s.o.mu.Unlock()
	if s.stdout {
		_, _ = s.o.last.Write(p)
	}
	return s.o.out.Write(p)
}

// writeNeedsFile writes a step's needs to a new temporary file and
// returns its name ("" for a step that needs none) and how to remove it.
func writeNeedsFile(a api.AttemptGrant) (string, func(), error) {
	if a.Step == nil || len(a.Step.Needs) == 0 {
		return "", func() {}, nil
	}
	f, err := os.CreateTemp("", "jobfleet-needs-*.json")
	if err != nil {
		return "", func() {}, fmt.Errorf("write the needs file: %w", err)
	}
	name := f.Name()
	remove := func() { _ = os.Remove(name) }
	if _, err := f.Write(a.Step.Needs); err != nil {
		f.Close()
		remove()
		return "", func() {}, fmt.Errorf("write the needs file: %w", err)
	}
	if err := f.Close(); err != nil {
		remove()
		return "", func() {}, fmt.Errorf("write the needs file: %w", err)
	}
	return name, remove, nil
}
