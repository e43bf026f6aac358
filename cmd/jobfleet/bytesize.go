package main

import (
	"fmt"
	"math"

	"github.com/dustin/go-humanize"
)

// byteSize is a flag value in bytes that also reads sizes with units
// ("2GiB", "512MB", "8589934592").
type byteSize int64

func (b *byteSize) String() string {
	if *b == 0 {
		return "0"
	}
	return humanize.IBytes(uint64(*b))
}

func (b *byteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("not a size in bytes (like 2GiB or 8589934592): %q", s)
	}
	if n > math.MaxInt64 {
		return fmt.Errorf("size %q is too large", s)
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) Type() string { return "bytes" }
