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
//     no further instant (within a five-year search horizon for cron
//     expressions). Parse rejects cron expressions that never fire.
//   - Due returns fires that are strictly increasing, each after last and
//     not after now, at most Policy.MaxFires of them; a Next after now; and
//     accounts for every scheduled time in (last, now] exactly once, as
//     fired, skipped or dropped. Passing Decision.Last back as last makes
//     successive decisions disjoint.
//   - "@every d" instants are multiples of d since the Unix epoch, so they do
//     not depend on when or where they are computed.
//
// # Cron dialect
//
// Cron expressions follow Vixie cron as cronie implements it (see Parse
// for the fields, names, steps and the day-of-month/day-of-week rule),
// with an optional leading seconds field. Fields are parsed here, with
// errors that name the field and the rule broken; robfig/cron/v3's
// SpecSchedule matches the resulting bit sets against wall-clock times.
//
// # Daylight saving time
//
// Cron fields name wall-clock times of the job's zone. Where the zone's
// UTC offset changes, they map onto instants as in cronie:
//
//   - Fall back: a wall time that occurs twice fires once, at its first
//     occurrence, for a fixed-time job, one whose second, minute and hour
//     fields do not start with '*' ("30 1 * * *", "0 9-17 * * *",
//     @daily). "30 1 * * *" in America/New_York fires on 2026-11-01 at
//     01:30 EDT (05:30Z) only. An interval or wildcard-hour job
//     ("*/15 * * * *", "30 * * * *", @hourly) follows real time and fires
//     in both passes of the repeated hour.
//   - Spring forward: a fixed-time job whose wall time does not exist that
//     day fires at the instant of the jump, once however many of its times
//     fall in the gap: "30 2 * * *" in America/New_York fires on
//     2026-03-08 at 03:00 EDT (07:00Z). An interval or wildcard-hour job
//     has no fires in the gap; it goes on at the next wall time that
//     exists.
//
// Every fire is still a distinct instant, so run IDs stay unique. A
// fixed-time job with an hour list ("0 0-23 * * *") is fixed-time: on a
// fall-back night it skips the repeated hour; write "0 * * * *" for
// hourly in real time.
//
// # Time zone names
//
// CheckZoneName accepts the zone names of the IANA database as the Go
// release ships it (zonenames.go, generated from
// $GOROOT/lib/time/zoneinfo.zip), Links such as "US/Eastern" included,
// "Factory" excluded, spelled exactly as the database spells them; it
// refuses "right/" and "posix/" zones, "posixrules", "Local", paths and
// case variants. LoadLocation does not apply it, so that a job stored
// under such a name before still loads: callers check names when a job is
// saved.
//
// # What it does not do
//
// It does not store anything, remember what has fired or read the clock;
// the dispatcher keeps the last scheduled time per job and calls Due. It
// does not accept a "CRON_TZ=" prefix in a spec (the time zone is a
// separate field), nor Quartz or Jenkins extensions (L, W, #, H), nor
// @reboot: each is refused with a message naming it.
package schedule
