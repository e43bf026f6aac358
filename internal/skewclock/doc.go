// Package skewclock provides a clock whose wall-clock readings are off by
// an offset that can be changed while the program runs: the clock of a
// host whose time is wrong, or was just stepped. The fault-injection suite
// (internal/chaos) gives it to an orchestrator, through a hidden flag, to
// skew one member of a fleet.
//
// Guarantees: Now returns the real time shifted by the current offset, as
// a skewed host's time.Now would: its wall reading (what is printed, sent,
// stored, and compared with times that carry no monotonic reading, such as
// scheduled times) is off by the offset, while its monotonic reading is
// the real one, so durations between two readings (Sub, Since, After,
// Before) are real durations even across a change of the offset, exactly
// as Go measures them on a host whose clock is stepped. Timers, tickers,
// Sleep and After run on real time.
//
// Not guaranteed: the clock shifts the monotonic-carrying form of
// time.Time by adjusting its wall reading only, which needs the layout of
// time.Time; New checks at run time that the adjustment behaves as
// described and returns an error otherwise. It is a tool for tests, not a
// way to correct a host's clock.
package skewclock
