package skewclock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
)

// ErrUnsupported is returned by New when this Go runtime's time.Time cannot
// be shifted without touching its monotonic reading.
var ErrUnsupported = errors.New("skewclock: cannot shift wall readings on this Go runtime")

// Clock is a clockwork.Clock whose Now is the real time plus an offset.
// It is safe for concurrent use; SetOffset may be called at any time.
type Clock struct {
	real   clockwork.Clock
	offset atomic.Int64 // nanoseconds
}

var _ clockwork.Clock = (*Clock)(nil)

// New returns a clock with offset 0. It returns ErrUnsupported if the
// wall-only shift does not work on this runtime.
func New() (*Clock, error) {
	if err := selfCheck(); err != nil {
		return nil, err
	}
	return &Clock{real: clockwork.NewRealClock()}, nil
}

// SetOffset sets the offset of every later reading: positive is ahead of
// real time, negative behind.
func (c *Clock) SetOffset(d time.Duration) { c.offset.Store(int64(d)) }

// Offset returns the current offset.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Now returns the real time with its wall reading shifted by the offset
// and its monotonic reading untouched.
func (c *Clock) Now() time.Time { return shiftWall(time.Now(), c.Offset()) }

// Since returns the time elapsed since t, measured like time.Since: on the
// monotonic clock if t has a monotonic reading, else on the (skewed) wall
// clock.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns the duration until t, measured like Since.
func (c *Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// Sleep sleeps d of real time.
func (c *Clock) Sleep(d time.Duration) { c.real.Sleep(d) }

// After waits d of real time, then sends the (skewed) time.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).Chan() }

// NewTicker returns a ticker of real time.
func (c *Clock) NewTicker(d time.Duration) clockwork.Ticker { return c.real.NewTicker(d) }

// NewTimer returns a timer of real time.
func (c *Clock) NewTimer(d time.Duration) clockwork.Timer { return c.real.NewTimer(d) }

// AfterFunc calls f in its own goroutine after d of real time.
func (c *Clock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	return c.real.AfterFunc(d, f)
}

// timeLayout mirrors time.Time's fields: wall holds the wall-clock reading
// (and a flag saying whether ext is a monotonic reading), ext the
// monotonic reading when it has one.
type timeLayout struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

// shiftWall returns t with its wall reading moved by d and its monotonic
// reading, if any, kept. A time without a monotonic reading is just moved.
func shiftWall(t time.Time, d time.Duration) time.Time {
	s := t.Add(d) // moves both readings (or drops the monotonic one if out of range)
	if d == 0 || s.Round(0) == s {
		return s
	}
	(*timeLayout)(unsafe.Pointer(&s)).ext = (*timeLayout)(unsafe.Pointer(&t)).ext
	return s
}

// selfCheck verifies that shiftWall moves the wall reading and keeps the
// monotonic one.
func selfCheck() error {
	if unsafe.Sizeof(time.Time{}) != unsafe.Sizeof(timeLayout{}) {
		return ErrUnsupported
	}
	t := time.Now()
	for _, d := range []time.Duration{7 * time.Second, -7 * time.Second} {
		s := shiftWall(t, d)
		if s.Sub(t) != 0 || !s.Equal(t) || s.Round(0).Sub(t.Round(0)) != d || s.Add(time.Second).Sub(t) != time.Second {
			return ErrUnsupported
		}
	}
	return nil
}

// ParseOffset parses an offset file's content: a Go duration ("5s",
// "-2.5s", "0"), surrounding space ignored; an empty file means 0.
func ParseOffset(b []byte) (time.Duration, error) {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("skewclock: offset %q: %w", s, err)
	}
	if d > 24*time.Hour || d < -24*time.Hour {
		return 0, fmt.Errorf("skewclock: offset %v beyond a day", d)
	}
	return d, nil
}

// Follow sets c's offset from the file at path, read every interval (of
// real time) until ctx ends; it returns then. A missing file means offset
// 0; a file that does not parse is logged and leaves the offset as it
// was. Each change is logged at info level with field "offset".
func Follow(ctx context.Context, c *Clock, path string, interval time.Duration, lg *zap.Logger) {
	if lg == nil {
		lg = zap.NewNop()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var bad string
	for {
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			b, err = nil, nil
		case err != nil:
			if err.Error() != bad {
				lg.Warn("clock offset file unreadable", zap.String("path", path), zap.Error(err))
				bad = err.Error()
			}
		}
		if err == nil {
			d, perr := ParseOffset(b)
			switch {
			case perr != nil:
				if perr.Error() != bad {
					lg.Warn("clock offset file ignored", zap.String("path", path), zap.Error(perr))
					bad = perr.Error()
				}
			case d != c.Offset():
				c.SetOffset(d)
				bad = ""
				lg.Info("clock offset changed", zap.Duration("offset", d))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
