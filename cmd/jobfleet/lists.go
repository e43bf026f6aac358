package main

// The list flags of the commands: comma-separated values.

import (
	"fmt"
	"strconv"
	"strings"
)

// parseInts parses comma-separated integers: "1,2,4".
func parseInts(s string) ([]int, error) {
	var xs []int
	for _, f := range splitList(s) {
		x, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		xs = append(xs, x)
	}
	return xs, nil
}

// joinInts formats xs as parseInts reads them.
func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// splitList splits a comma-separated flag value into its non-empty
// fields, spaces trimmed.
func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseCounts parses comma-separated counts with optional k (thousand) and
// M (million) suffixes: "10k,100k,1M".
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		mult := 1
		switch {
		case strings.HasSuffix(f, "k"), strings.HasSuffix(f, "K"):
			mult, f = 1_000, f[:len(f)-1]
		case strings.HasSuffix(f, "M"), strings.HasSuffix(f, "m"):
			mult, f = 1_000_000, f[:len(f)-1]
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count (like 10k or 1M)", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}
