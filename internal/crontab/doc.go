// Package crontab converts crontab files into jobfleet jobs, for
// migrating from cron: user crontabs (as edited with crontab -e) and
// system crontabs (/etc/crontab, /etc/cron.d/*) with a user column.
//
// # Guarantees
//
//   - Parse is pure: it reads the given io.Reader and nothing else (no
//     environment, no files, no clock).
//   - Every job line ends up either as exactly one job in Result.Jobs or
//     as a Problem in Result.Skipped with its line number, text and
//     reason; so does every line that is neither a job, an assignment, a
//     comment nor blank. Assignments whose meaning to cron is not
//     reproduced or differs from what they may seem to mean (a non-empty
//     MAILTO, RANDOM_DELAY, TZ, LOGNAME, an unknown CRON_TZ, ...) are
//     reported as Problems too. Nothing is dropped silently.
//   - Environment lines mean what they mean to cronie: CRON_TZ, not TZ,
//     is the schedules' zone, a later CRON_TZ for the lines after it;
//     every assignment is in the environment of the commands after it.
//   - Every converted job is normalized and passes store validation with
//     the default limits, has a "shell" executor running the line's command
//     with /bin/sh -c (or the crontab's SHELL), no timeout (cron has none)
//     unless Options.Timeout sets one, and an ID "<prefix>/<slug>-<hash>"
//     that is unique within one Parse and depends only on the line's user
//     and command: edits of other lines, and of the line's schedule, keep
//     it. Owns tells such IDs apart from every other job's.
//   - A system crontab line is converted only if its user column names
//     the user the workers run as (Options.WorkerUser): a job never runs
//     as another user than the crontab said. Lines that look like the
//     other crontab format (a user name as a command, a command as a user
//     name) are refused with a hint.
//   - Schedules are read in cronie's dialect (day of week 7, the
//     day-of-month/day-of-week rule, daylight saving time), so converted
//     jobs fire when cron would have. Features without a jobfleet
//     equivalent (@reboot, '%' as standard input) are reported, not
//     approximated.
//
// # What it does not do
//
// It does not guess whether a file is a user or a system crontab (see
// Options.SystemFormat), switch users (lines of other users than the
// workers' are refused), expand variables in assignments, mail output, or
// store the jobs: the caller submits Result.Jobs through the API, and
// decides what to do with jobs of an earlier import that are no longer in
// the file (see Owns). Workers must be started with --allow-shell
// to run them. Of cron's default environment only PATH (/usr/bin:/bin,
// when the crontab sets none) is recreated: HOME, LOGNAME and USER come
// from the crontab's owner's account, which the file does not name, so
// the worker's apply, plus the crontab's own assignments (HOME among
// them).
package crontab
