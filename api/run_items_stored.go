package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// storedItems is the compact stored form of a run's items (Run.MarshalStored):
//
//	"item_state": {
//	  "base": "2026-06-01T00:00:00.123Z",          // the run's fired_at, in milliseconds
//	  "workers": [["w-1", "cred-a"], ["w-2", "cred-a"]], // (worker, credential) pairs, listed once
//	  "items": [ITEM, ITEM, …]                     // by index
//	}
//
// An ITEM is its status letter alone ("p") when it has no attempt, pin or
// reason, else the array [status, [ATTEMPT, …], pin, registration,
// "reason", result] without its trailing empty elements (result: the
// item's JSON result, a step's, null for none); pin is an index in
// workers (-1: none). An ATTEMPT is [pair, start, duration, "error",
// "output", dropped_bytes] without its trailing empty elements: pair an
// index in workers, start the milliseconds from base, duration the
// milliseconds it ran (-1 while running). Attempts are numbered by their
// position, from 1. At 1 000 items of one short attempt each the form
// takes about 25 bytes an item.
type storedItems struct {
	Base    time.Time         `json:"base"`
	Workers [][2]string       `json:"workers"`
	Items   []json.RawMessage `json:"items"`
}

// statusLetters are the one-letter forms of item statuses.
var statusLetters = map[RunStatus]string{
	RunPending: "p", RunRunning: "r", RunFailed: "f", RunSucceeded: "s", RunDead: "d", RunSkipped: "k",
}

var letterStatuses = func() map[string]RunStatus {
	m := make(map[string]RunStatus, len(statusLetters))
	for s, l := range statusLetters {
		m[l] = s
	}
	return m
}()

// encodeItems returns the compact form of items, times counted from
// fired (in milliseconds).
func encodeItems(items []Item, fired time.Time) (*storedItems, error) {
	st := &storedItems{Base: ItemTime(fired), Workers: [][2]string{}, Items: make([]json.RawMessage, len(items))}
	pairs := map[[2]string]int{}
	pair := func(w, c string) int {
		k := [2]string{w, c}
		if i, ok := pairs[k]; ok {
			return i
		}
		pairs[k] = len(st.Workers)
		st.Workers = append(st.Workers, k)
		return len(st.Workers) - 1
	}
	ms := func(t time.Time) int64 { return ItemTime(t).Sub(st.Base).Milliseconds() }
	var b []byte
	for i, it := range items {
		if it.Index != i {
			return nil, fmt.Errorf("item %d has index %d: items must be stored by index", i, it.Index)
		}
		letter, ok := statusLetters[it.Status]
		if !ok {
			return nil, fmt.Errorf("item %d: unknown status %q", i, it.Status)
		}
		b = b[:0]
		if len(it.Attempts) == 0 && it.Worker == "" && it.Reason == "" && len(it.Result) == 0 {
			b = append(b, '"')
			b = append(b, letter...)
			st.Items[i] = append(json.RawMessage(nil), append(b, '"')...)
			continue
		}
		b = append(b, `["`...)
		b = append(b, letter...)
		b = append(b, `",[`...)
		for k, a := range it.Attempts {
			if a.Attempt != k+1 {
				return nil, fmt.Errorf("item %d: attempt %d at position %d", i, a.Attempt, k+1)
			}
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(pair(a.Worker, a.Credential)), 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, ms(a.StartedAt), 10)
			tail := [][]byte{}
			dur := int64(-1)
			if !a.FinishedAt.IsZero() {
				// At least 0: an attempt recorded finished by an owner whose
				// clock is behind the starter's must not read as running.
				dur = max(ItemTime(a.FinishedAt).Sub(ItemTime(a.StartedAt)).Milliseconds(), 0)
			}
			tail = append(tail, strconv.AppendInt(nil, dur, 10), quoteJSON(a.Error), quoteJSON(a.Output), strconv.AppendInt(nil, int64(a.DroppedBytes), 10))
			b = appendTrimmed(b, tail, []string{"-1", `""`, `""`, "0"})
			b = append(b, ']')
		}
		b = append(b, ']')
		pin := int64(-1)
		if it.Worker != "" {
			pin = int64(pair(it.Worker, pinCredential(it)))
		}
		result := []byte("null")
		if len(it.Result) > 0 {
			result = it.Result
		}
		b = appendTrimmed(b, [][]byte{strconv.AppendInt(nil, pin, 10), strconv.AppendInt(nil, it.Registration, 10), quoteJSON(it.Reason), result}, []string{"-1", "0", `""`, "null"})
		b = append(b, ']')
		st.Items[i] = append(json.RawMessage(nil), b...)
	}
	return st, nil
}

// pinCredential is the credential a pinned item's pair names: that of
// its first attempt, else none (the pin is the worker).
func pinCredential(it Item) string {
	for _, a := range it.Attempts {
		if a.Worker == it.Worker {
			return a.Credential
		}
	}
	return ""
}

// appendTrimmed appends ",v" for each of vals up to the last that differs
// from its empty form in empties.
func appendTrimmed(b []byte, vals [][]byte, empties []string) []byte {
	last := -1
	for i, v := range vals {
		if string(v) != empties[i] {
			last = i
		}
	}
	for _, v := range vals[:last+1] {
		b = append(b, ',')
		b = append(b, v...)
	}
	return b
}

func quoteJSON(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

var errStoredItem = errors.New("malformed item")

// decode returns the items of the compact form.
func (st *storedItems) decode() ([]Item, error) {
	items := make([]Item, len(st.Items))
	at := func(off int64) time.Time { return st.Base.Add(time.Duration(off) * time.Millisecond).UTC() }
	worker := func(i int64) ([2]string, error) {
		if i < 0 || i >= int64(len(st.Workers)) {
			return [2]string{}, fmt.Errorf("%w: worker %d of %d", errStoredItem, i, len(st.Workers))
		}
		return st.Workers[i], nil
	}
	for i, raw := range st.Items {
		it := Item{Index: i, Attempts: []Attempt{}}
		var letter string
		if len(raw) > 0 && raw[0] == '"' {
			if err := json.Unmarshal(raw, &letter); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
		} else {
			var parts []json.RawMessage
			if err := json.Unmarshal(raw, &parts); err != nil || len(parts) < 2 {
				return nil, fmt.Errorf("item %d: %w", i, errStoredItem)
			}
			var attempts [][]json.RawMessage
			if err := json.Unmarshal(parts[0], &letter); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			if err := json.Unmarshal(parts[1], &attempts); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			for k, fs := range attempts {
				a, err := decodeStoredAttempt(fs, worker, at)
				if err != nil {
					return nil, fmt.Errorf("item %d attempt %d: %w", i, k+1, err)
				}
				a.Attempt = k + 1
				it.Attempts = append(it.Attempts, a)
			}
			var pin, rev int64 = -1, 0
			if err := unmarshalOptional(parts, 2, &pin); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			if err := unmarshalOptional(parts, 3, &rev); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			if err := unmarshalOptional(parts, 4, &it.Reason); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			if len(parts) > 5 && string(parts[5]) != "null" {
				it.Result = bytes.Clone(parts[5])
			}
			if pin >= 0 {
				p, err := worker(pin)
				if err != nil {
					return nil, fmt.Errorf("item %d: %w", i, err)
				}
				it.Worker, it.Registration = p[0], rev
			}
		}
		s, ok := letterStatuses[letter]
		if !ok {
			return nil, fmt.Errorf("item %d: %w: status %q", i, errStoredItem, letter)
		}
		it.Status = s
		items[i] = it
	}
	return items, nil
}

func decodeStoredAttempt(fs []json.RawMessage, worker func(int64) ([2]string, error), at func(int64) time.Time) (Attempt, error) {
	if len(fs) < 2 {
		return Attempt{}, errStoredItem
	}
	var w, start, dur int64 = 0, 0, -1
	if err := json.Unmarshal(fs[0], &w); err != nil {
		return Attempt{}, err
	}
	if err := json.Unmarshal(fs[1], &start); err != nil {
		return Attempt{}, err
	}
	p, err := worker(w)
	if err != nil {
		return Attempt{}, err
	}
	a := Attempt{Worker: p[0], Credential: p[1], StartedAt: at(start)}
	if err := unmarshalOptional(fs, 2, &dur); err != nil {
		return Attempt{}, err
	}
	if dur >= 0 {
		a.FinishedAt = a.StartedAt.Add(time.Duration(dur) * time.Millisecond)
	}
	if err := unmarshalOptional(fs, 3, &a.Error); err != nil {
		return Attempt{}, err
	}
	if err := unmarshalOptional(fs, 4, &a.Output); err != nil {
		return Attempt{}, err
	}
	if err := unmarshalOptional(fs, 5, &a.DroppedBytes); err != nil {
		return Attempt{}, err
	}
	return a, nil
}

// unmarshalOptional decodes parts[i] into v if there is one.
func unmarshalOptional(parts []json.RawMessage, i int, v any) error {
	if i >= len(parts) {
		return nil
	}
	return json.Unmarshal(parts[i], v)
}
