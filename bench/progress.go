package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Progress shows what a long run is doing, on one line rewritten in place
// when it writes to a terminal and as plain lines (at most one a second)
// otherwise. A nil *Progress shows nothing. Safe for concurrent use.
type Progress struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	last time.Time
	line string
}

// NewProgress returns a progress display on w (nil: none).
func NewProgress(w io.Writer) *Progress {
	if w == nil {
		return nil
	}
	// A terminal gets one line rewritten in place; anything else (a file,
	// a pipe, /dev/null, which is a character device too) whole lines.
	f, ok := w.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	return &Progress{w: w, tty: tty}
}

// Update shows the current state; it may be dropped if the previous one
// was shown less than a moment ago.
func (p *Progress) Update(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	every := time.Second
	if p.tty {
		every = 100 * time.Millisecond
	}
	if now.Sub(p.last) < every {
		return
	}
	p.last = now
	p.line = fmt.Sprintf(format, args...)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", p.line)
	} else {
		fmt.Fprintln(p.w, p.line)
	}
}

// Step reports a finished step; it is always shown, on a line of its own.
func (p *Progress) Step(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, format+"\n", args...)
	p.last = time.Time{}
}
