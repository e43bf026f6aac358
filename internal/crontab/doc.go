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
//     comment nor blank. Assignments that are ignored (a non-empty MAILTO,
//     an unknown CRON_TZ, ...) are reported as Problems too. Nothing is
//     dropped silently.
//   - Every converted job is normalized and passes store validation with
//     the default limits, has a "shell" executor running the line's command
//     with /bin/sh -c (or the crontab's SHELL), and an ID
//     "crontab-<line>-<slug>" that is unique within one Parse and the same
//     on every run over the same file.
//   - Features without a jobfleet equivalent (@reboot, '%' as standard
//     input) are reported, not approximated. The remaining differences
//     from Vixie cron (daylight saving time, day of week 7, a default
//     timeout) are listed on Parse.
//
// # What it does not do
//
// It does not guess whether a file is a user or a system crontab (see
// Options.SystemFormat), run commands as the user of a system crontab's
// user column (the user is reported in Entry.User), expand variables in
// assignments, mail output, or store the jobs: the caller submits
// Result.Jobs through the API. Workers must be started with --allow-shell
// to run them. Cron's default environment (PATH=/usr/bin:/bin, HOME,
// LOGNAME) is not recreated; the worker's environment applies, plus the
// crontab's own assignments.
package crontab
