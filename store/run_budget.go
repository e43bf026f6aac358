package store

import (
	"fmt"
	"unicode/utf8"
)

// Run document budget: a run keeps every attempt's output and error, and
// a job may make up to MaxAttempts attempts of up to 64 KiB of each, far
// more than etcd accepts in one request (1.5 MiB by default). FitRun keeps
// a run's stored document within a budget.
const (
	// DefaultMaxRunBytes is the default budget of a run document.
	DefaultMaxRunBytes = 256 << 10
	// MinMaxRunBytes is the smallest budget FitRun guarantees to meet: a
	// run of MaxAttempts attempts stripped of their outputs and errors fits
	// in it whatever its worker IDs.
	MinMaxRunBytes = 128 << 10
	// middleErrorBytes is what an attempt between the first and the last
	// keeps of its error when the document is over budget.
	middleErrorBytes = 256
)

// FitRun returns r with its attempts' outputs and errors shortened so
// that its stored document is at most maxBytes (at least MinMaxRunBytes),
// and the stored document. Within budget, r is returned unchanged.
// Otherwise, in this order until it fits: the attempts between the first
// and the last lose their output and keep the first 256 bytes of their
// error; then the first and last attempts' outputs and errors are cut to
// their head and tail around a marker ("…[N bytes dropped]…"), halving
// what they keep until the document fits; then every remaining output and
// error goes. Each shortened attempt counts the bytes it lost in
// DroppedBytes. Attempts are never removed, so their count and numbers
// stay exact. r is not modified.
//
// A run with items (api.Run.Items) is fitted by fitItems instead. The
// results of a run of steps' items (at most api.MaxRunResultsBytes) are
// never cut and come on top of maxBytes: they must not squeeze out the
// attempts' errors.
func FitRun(r Run, maxBytes int) (Run, []byte, error) {
	maxBytes = max(maxBytes, MinMaxRunBytes) + r.ResultsBytes()
	val, err := EncodeRun(r)
	if err != nil || len(val) <= maxBytes {
		return r, val, err
	}
	if len(r.Items) > 0 {
		return fitItems(r, maxBytes)
	}
	r.Attempts = append([]Attempt(nil), r.Attempts...)
	n := len(r.Attempts)
	for i := 1; i < n-1; i++ {
		shorten(&r.Attempts[i], 0, middleErrorBytes)
	}
	if val, err = EncodeRun(r); err != nil || len(val) <= maxBytes {
		return r, val, err
	}
	var ends []int // the first and last attempts
	if n > 0 {
		ends = append(ends, 0)
	}
	if n > 1 {
		ends = append(ends, n-1)
	}
	for keep := MaxOutputKeep / 2; keep >= 64; keep /= 2 {
		for _, i := range ends {
			shorten(&r.Attempts[i], keep, keep)
		}
		if val, err = EncodeRun(r); err != nil || len(val) <= maxBytes {
			return r, val, err
		}
	}
	for i := range r.Attempts {
		shorten(&r.Attempts[i], 0, 0)
	}
	if val, err = EncodeRun(r); err != nil {
		return r, nil, err
	}
	if len(val) > maxBytes {
		return r, nil, fmt.Errorf("run %s: %d bytes without any output: %w", r.ID, len(val), ErrTooLarge)
	}
	return r, val, nil
}

// MaxOutputKeep is the most FitRun keeps of one output or error of an
// over-budget run: 64 KiB, what a worker reports at most.
const MaxOutputKeep = 64 << 10

// shorten cuts a's output to at most out bytes and its error to at most
// errBytes, counting what it drops.
func shorten(a *Attempt, out, errBytes int) {
	var d int
	a.Output, d = cut(a.Output, out)
	a.DroppedBytes += d
	a.Error, d = cut(a.Error, errBytes)
	a.DroppedBytes += d
}

// cut returns s cut to at most n bytes, keeping its head and tail around a
// marker (or only its head when n is small), on UTF-8 boundaries, and how
// many bytes of s it dropped.
func cut(s string, n int) (string, int) {
	if len(s) <= n {
		return s, 0
	}
	if n < 64 {
		head := prefix(s, n)
		return head, len(s) - len(head)
	}
	half := (n - 32) / 2 // room for the marker
	head, tail := prefix(s, half), suffix(s, half)
	dropped := len(s) - len(head) - len(tail)
	return fmt.Sprintf("%s…[%d bytes dropped]…%s", head, dropped, tail), dropped
}

// prefix returns the longest prefix of s of at most n bytes that ends on a
// rune boundary.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// suffix returns the longest suffix of s of at most n bytes that starts on
// a rune boundary.
func suffix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
