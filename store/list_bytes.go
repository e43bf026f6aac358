package store

import "sync/atomic"

// MaxListPageBytes bounds the stored bytes of the documents one listing
// page holds (List, ListPrefix and their Docs forms): a page ends at
// limit documents or as soon as its documents reach 4 MiB, whichever
// comes first, and its cursor continues after its last document. Job
// documents may each be up to api.DefaultMaxDocumentBytes (1 MiB), so a
// page of 1 000 counted only by jobs could otherwise hold 1 GiB.
const MaxListPageBytes = 4 << 20

// firstWindowKeys is how many documents a listing fetches in one read
// before the store has seen any document's size.
const firstWindowKeys = 64

// docSizes tracks the mean stored size of the job documents listings
// have read, so that each read fetches about as many documents as the
// page's remaining bytes hold instead of limit of them at once. Safe for
// concurrent use; the zero value knows no size yet.
type docSizes struct {
	mean atomic.Int64 // bytes; 0: unknown
}

// learn folds a read of n documents of total bytes into the mean: a read
// of larger documents than the mean replaces it at once, a read of
// smaller ones weighs a quarter, so that the estimate errs on the side of
// smaller reads (more of them) rather than of larger ones.
func (d *docSizes) learn(n, bytes int) {
	if d == nil || n <= 0 {
		return
	}
	m := int64(max(1, bytes/n))
	if old := d.mean.Load(); old > m {
		m = (3*old + m + 3) / 4
	}
	d.mean.Store(m)
}

// keys returns how many documents a read should fetch for a page with
// room left bytes and need more documents: a quarter more than the mean
// size says fit, at least 1 and at most need; firstWindowKeys (or need)
// while no size is known.
func (d *docSizes) keys(room, need int) int {
	var m int64
	if d != nil {
		m = d.mean.Load()
	}
	if m <= 0 {
		return max(1, min(need, firstWindowKeys))
	}
	n := int64(room)*5/(4*m) + 1
	return int(max(1, min(int64(need), n)))
}
