package api

import "time"

// TimeFormat is the fixed-width UTC form of scheduled times in keys and
// run IDs, with millisecond precision.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime formats t for keys and run IDs (UTC, milliseconds).
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }
