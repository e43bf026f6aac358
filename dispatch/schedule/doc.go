// Package schedule computes when jobs fire: it turns a job's schedule
// (cron expression, descriptor, "@every" interval or one-off run_at) and
// time zone into a Schedule, and decides with Due which scheduled times
// fire now under a job's misfire policy.
//
// Everything here is pure: no goroutines, no I/O, no clock. Callers pass
// the times in, so the same inputs give the same answer on every
// orchestrator, which is what lets run IDs be derived from scheduled times.
//
// # Guarantees
//
//   - Schedule.Next(t) is strictly after t, or zero when the schedule has
//     no further instant (within robfig/cron's five-year search horizon for
//     cron expressions). Parse rejects cron expressions that never fire.
//   - Due returns fires that are strictly increasing, each after last and
//     not after now, at most Policy.MaxFires of them; a Next after now; and
//     accounts for every scheduled time in (last, now] exactly once, as
//     fired, skipped or dropped. Passing Decision.Last back as last makes
//     successive decisions disjoint.
//   - "@every d" instants are multiples of d since the Unix epoch, so they do
//     not depend on when or where they are computed.
//
// # Cron parsing and daylight saving time
//
// Cron expressions are parsed and evaluated by github.com/robfig/cron/v3
// (v3.0.1), in the job's IANA time zone. Its wall-clock semantics around
// daylight saving time differ from Vixie cron, and this package keeps them
// as they are (tests pin them down):
//
//   - Spring forward: a wall time that does not exist that day is skipped
//     for that day. "30 2 * * *" in America/New_York does not fire on
//     2026-03-08 at all (Vixie cron would run it at 03:00). Hourly and
//     finer schedules simply have no fires in the missing hour.
//   - Fall back: a wall time that occurs twice fires twice. "30 1 * * *" in
//     America/New_York fires on 2026-11-01 at 01:30 EDT (05:30Z) and again
//     at 01:30 EST (06:30Z). The two fires are distinct scheduled times, so
//     they are two runs with two run IDs.
//
// Jobs that must run exactly once a day should be scheduled outside the
// local transition hours, or in UTC.
//
// # What it does not do
//
// It does not store anything, remember what has fired or read the clock;
// the dispatcher keeps the last scheduled time per job and calls Due. It
// does not accept a "CRON_TZ=" prefix in a spec (the time zone is a
// separate field), nor Quartz extensions (L, W, #), nor @reboot.
package schedule
