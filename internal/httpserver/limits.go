package httpserver

import (
	"fmt"
	"syscall"
)

// FileLimit is the process's limit on open file descriptors
// (RLIMIT_NOFILE).
type FileLimit struct {
	// Soft is the limit in force; Hard is the most Soft may be raised to.
	Soft, Hard uint64
}

// RaiseOpenFileLimit raises the process's soft limit on open files to its
// hard limit, and returns the limits before and after. Listeners, etcd's
// files and clients all count against the soft limit; the hard limit is
// the most an unprivileged process may have. (The Go runtime already does
// this at start on most systems; calling it again is harmless and tells
// the caller what is in force.) It returns an error if the limit cannot
// be read; failing to raise it is not an error: after is then the limit
// in force.
func RaiseOpenFileLimit() (before, after FileLimit, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return FileLimit{}, FileLimit{}, fmt.Errorf("read the open-file limit: %w", err)
	}
	before = FileLimit{Soft: uint64(rl.Cur), Hard: uint64(rl.Max)}
	if rl.Cur < rl.Max {
		raised := rl
		raised.Cur = rl.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			rl = raised
		}
	}
	// Read again: some systems (macOS) cap the soft limit below the hard
	// one they report.
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return before, before, nil
	}
	return before, FileLimit{Soft: uint64(rl.Cur), Hard: uint64(rl.Max)}, nil
}

// minConnections is the smallest per-listener cap ConnectionCap hands out:
// below it a listener is of little use.
const minConnections = 16

// Budget says how many of the process's open files its listeners may
// hold: all of OpenFiles but Reserve, which is kept for everything else
// (etcd clients and, in `jobfleet dev`, the embedded etcd's files and
// connections, outgoing connections, log files).
type Budget struct {
	// OpenFiles is the soft limit in force (FileLimit.Soft).
	OpenFiles uint64
	// Reserve is the part of OpenFiles no listener may use.
	Reserve uint64
}

// Listeners returns the open files left for listeners: OpenFiles less
// Reserve, or 0.
func (b Budget) Listeners() uint64 {
	if b.OpenFiles <= b.Reserve {
		return 0
	}
	return b.OpenFiles - b.Reserve
}

// ConnectionCap returns the connection cap to use for each of n listeners
// (n ≥ 1) whose caps must together fit b.Listeners(), when want was asked
// for, besides fixed connections already promised to other listeners of
// the process. If want fits, it is returned. If it does not and explicit
// is false (want is a default), the largest cap that fits is returned and
// lowered reports it. If it does not fit and explicit is true, or not even
// a minimal cap fits, it returns an error saying what fits.
func ConnectionCap(b Budget, n, fixed, want int, explicit bool) (perListener int, lowered bool, err error) {
	if n < 1 {
		return 0, false, fmt.Errorf("connection cap for %d listeners", n)
	}
	if want < 1 {
		return 0, false, fmt.Errorf("a connection cap must be at least 1, got %d", want)
	}
	avail := b.Listeners()
	if uint64(fixed) >= avail {
		avail = 0
	} else {
		avail -= uint64(fixed)
	}
	fits := int(min(avail/uint64(n), uint64(1<<30)))
	switch {
	case want <= fits:
		return want, false, nil
	case fits < minConnections:
		return 0, false, fmt.Errorf("the open-file limit %d leaves too few descriptors for %d listeners after %d kept for the rest of the process; raise the limit (ulimit -n)",
			b.OpenFiles, n, b.Reserve+uint64(fixed))
	case explicit:
		return 0, false, fmt.Errorf("%d connections on each of %d listeners do not fit the open-file limit %d with %d kept for the rest of the process; at most %d fit (or raise the limit: ulimit -n)",
			want, n, b.OpenFiles, b.Reserve+uint64(fixed), fits)
	default:
		return fits, true, nil
	}
}
