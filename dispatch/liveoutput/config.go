package liveoutput

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/jobfleet/jobfleet/internal/settings"
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("liveoutput: invalid config")

// Defaults of Config.
const (
	// DefaultAttemptBytes is each attempt's ring: 64 KiB, a few hundred
	// lines of a log.
	DefaultAttemptBytes = 64 << 10
	// DefaultAttempts bounds the attempts held: with DefaultAttemptBytes,
	// 64 MiB at most.
	DefaultAttempts = 1024
	// minAttemptBytes is the smallest ring: a few lines.
	minAttemptBytes = 1 << 10
	// maxAttemptBytes is the largest ring: 16 MiB.
	maxAttemptBytes = 16 << 20
)

// Config bounds a Table. Zero fields take the defaults (WithDefaults).
type Config struct {
	// AttemptBytes is how many of the last bytes of one attempt's output
	// are held. 1 KiB to 16 MiB; default DefaultAttemptBytes
	// (--live-output-bytes).
	AttemptBytes int64
	// Attempts is the most attempts held at once; past it the attempt
	// that ended longest ago (or, if none has ended, the one that
	// started longest ago) is dropped. Negative: no bound. Default
	// DefaultAttempts (--live-output-attempts).
	Attempts int
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	settings.Default(&c.AttemptBytes, DefaultAttemptBytes)
	settings.Default(&c.Attempts, DefaultAttempts)
	return c
}

// Validate reports the first problem of c after WithDefaults, as a
// *settings.Error naming the flag, wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if c.AttemptBytes < minAttemptBytes || c.AttemptBytes > maxAttemptBytes {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, settings.Invalid("live-output-bytes", settings.FormatBytes(c.AttemptBytes),
			"want %s to %s (0: the default, %s)", settings.FormatBytes(minAttemptBytes), settings.FormatBytes(maxAttemptBytes), settings.FormatBytes(DefaultAttemptBytes)))
	}
	return nil
}

// AddFlags defines --live-output-bytes and --live-output-attempts in fs,
// bound to c's fields with their current values as defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	settings.BytesVar(fs, &c.AttemptBytes, "live-output-bytes", c.AttemptBytes, "last bytes of each running attempt's output this member holds in memory for GET /v1/runs/{id}/output (like 64KiB)")
	fs.IntVar(&c.Attempts, "live-output-attempts", c.Attempts, "attempts whose live output this member holds at once (those that ended longest ago are dropped first)")
	settings.Unbounded(fs, "live-output-attempts", "no bound on the attempts")
}
