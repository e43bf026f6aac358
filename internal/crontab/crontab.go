package crontab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jobfleet/jobfleet/dispatch/schedule"
	"github.com/jobfleet/jobfleet/store"
)

// Errors returned by Parse. Problems with single lines are not errors;
// they are reported in Result.Skipped.
var (
	// ErrInvalidOptions means Options cannot produce valid jobs.
	ErrInvalidOptions = errors.New("crontab: invalid options")
	// ErrLineTooLong means a line exceeds MaxLineBytes.
	ErrLineTooLong = errors.New("crontab: line too long")
)

// Limits and defaults.
const (
	// MaxLineBytes is the longest line Parse reads.
	MaxLineBytes = 64 << 10
	// DefaultIDPrefix starts generated job IDs.
	DefaultIDPrefix = "crontab"
	// DefaultShell runs commands unless the crontab sets SHELL.
	DefaultShell = "/bin/sh"
	// EnvProgram passes a crontab's environment assignments to a command.
	EnvProgram = "/usr/bin/env"

	maxPrefixBytes = 100
	maxSlugBytes   = 40
)

// Options control Parse. The zero Options read a user crontab in UTC.
type Options struct {
	// SystemFormat reads /etc/crontab and /etc/cron.d files, whose job lines
	// have a user name after the time fields. The format is not guessed:
	// "0 * * * * root echo" is a valid line in both formats.
	SystemFormat bool
	// Timezone is the IANA zone of jobs before any CRON_TZ or TZ line: the
	// zone of the machine the crontab came from. Default "UTC".
	Timezone string
	// IDPrefix starts every generated job ID; default DefaultIDPrefix. Use
	// distinct prefixes to import several crontabs side by side. At most
	// 100 bytes of printable UTF-8.
	IDPrefix string
	// MisfirePolicy of the generated jobs; default store.MisfireSkip,
	// because cron does not run jobs missed while it was down.
	MisfirePolicy store.MisfirePolicy
}

// Result is what Parse made of a crontab.
type Result struct {
	// Jobs are the converted job lines, in file order.
	Jobs []Entry
	// Skipped are the lines that were not converted, and assignments that
	// were ignored, in file order.
	Skipped []Problem
}

// Entry is one converted job line.
type Entry struct {
	// Line is the 1-based line number in the crontab.
	Line int
	// User is the user column of a system crontab; empty for a user
	// crontab. jobfleet workers run commands as themselves: the user is
	// reported, not enforced.
	User string
	// Job is the converted job, normalized and valid under
	// store.DefaultLimits.
	Job store.Job
}

// Problem is a line Parse did not convert, or an assignment it ignored.
type Problem struct {
	// Line is the 1-based line number in the crontab.
	Line int
	// Text is the line as written, without its line ending.
	Text string
	// Reason says why, in a sentence fragment.
	Reason string
}

// special are the crontab(5) special strings jobfleet supports; each is
// also a schedule.Parse descriptor with the same meaning.
var special = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

// parser holds the state carried from line to line.
type parser struct {
	opts   Options
	result Result

	shell   string
	env     []string          // names in order of first assignment
	values  map[string]string // name -> value
	cronTZ  zone              // from CRON_TZ
	plainTZ zone              // from TZ
}

// zone is a time zone set by an assignment line.
type zone struct {
	name string
	line int   // 0 if never set
	err  error // set if name is unknown
}

// Parse converts a crontab into jobfleet jobs, one per job line, each with
// a "shell" executor. It returns an error only for bad options, a read
// error or a line longer than MaxLineBytes; every other problem is
// reported per line in Result.Skipped and the rest of the file is still
// converted.
//
// Lines are read as crontab(5) describes them:
//
//   - Blank lines and lines whose first non-blank character is '#' are
//     ignored. A '#' later in a line is part of the command.
//   - "NAME = value" assigns an environment variable for the job lines that
//     follow. Blanks around '=' are allowed; a value wholly enclosed in
//     matching single or double quotes is unquoted; nothing is expanded.
//     Assigned variables are passed to each later command through
//     EnvProgram: ["/usr/bin/env", "NAME=value", …, shell, "-c", command].
//     SHELL (an absolute path) also chooses the shell. CRON_TZ sets the
//     time zone of the following jobs; TZ does too when CRON_TZ is not
//     set, and is also passed to the command like any other variable. An
//     empty value resets the zone to Options.Timezone. An unknown zone
//     skips every job line it would apply to. MAILTO, MAILFROM and
//     RANDOM_DELAY are ignored and reported (MAILTO only if not empty):
//     jobfleet records output in each run's attempts instead of mailing it.
//   - A job line is five time fields, or one of @yearly, @annually,
//     @monthly, @weekly, @daily, @midnight or @hourly; then, in
//     SystemFormat, a user name; then the command, the rest of the line.
//     @reboot is reported as unsupported.
//   - In the command, "\%" becomes '%'. An unescaped '%' is reported as
//     unsupported: cron would turn it into a newline and feed the text
//     after it to the command's standard input.
//
// The command runs as ["/bin/sh", "-c", command] (or with SHELL). Each job
// gets ID "<prefix>-<line>-<slug>", the slug being up to 40 characters of
// a-z, 0-9 and '-' taken from the command, so IDs are readable and stay
// the same as long as the line keeps its number and command. Jobs get
// Options.MisfirePolicy and jobfleet's defaults otherwise (notably a 1h
// timeout, which cron does not have).
//
// Time fields are parsed by schedule.Parse (robfig/cron), so they follow
// its rules rather than Vixie cron's where the two differ: day of week 7
// is rejected (use 0 for Sunday), and at daylight saving time changes a
// skipped wall time does not run that day and a repeated one runs twice.
func Parse(r io.Reader, opts Options) (Result, error) {
	if opts.IDPrefix == "" {
		opts.IDPrefix = DefaultIDPrefix
	}
	if err := checkPrefix(opts.IDPrefix); err != nil {
		return Result{}, err
	}
	if _, err := schedule.LoadLocation(opts.Timezone); err != nil {
		return Result{}, fmt.Errorf("%w: timezone: %v", ErrInvalidOptions, err)
	}
	switch opts.MisfirePolicy {
	case "":
		opts.MisfirePolicy = store.MisfireSkip
	case store.MisfireRunOnce, store.MisfireSkip, store.MisfireRunAll:
	default:
		return Result{}, fmt.Errorf("%w: unknown misfire policy %q", ErrInvalidOptions, string(opts.MisfirePolicy))
	}

	p := &parser{opts: opts, shell: DefaultShell, values: make(map[string]string)}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		p.line(n, strings.TrimSuffix(sc.Text(), "\r"))
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Result{}, fmt.Errorf("%w: line %d is longer than %d bytes", ErrLineTooLong, n+1, MaxLineBytes)
		}
		return Result{}, fmt.Errorf("crontab: read line %d: %w", n+1, err)
	}
	return p.result, nil
}

func checkPrefix(prefix string) error {
	switch {
	case len(prefix) > maxPrefixBytes:
		return fmt.Errorf("%w: ID prefix is longer than %d bytes", ErrInvalidOptions, maxPrefixBytes)
	case !utf8.ValidString(prefix):
		return fmt.Errorf("%w: ID prefix is not valid UTF-8", ErrInvalidOptions)
	case strings.IndexFunc(prefix, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: ID prefix contains a control character", ErrInvalidOptions)
	}
	return nil
}

func (p *parser) skip(n int, text, format string, args ...any) {
	p.result.Skipped = append(p.result.Skipped, Problem{Line: n, Text: text, Reason: fmt.Sprintf(format, args...)})
}

// line handles line n.
func (p *parser) line(n int, text string) {
	body := strings.TrimLeft(text, " \t")
	switch {
	case body == "" || body[0] == '#':
		return
	case isAssignment(body):
		p.assign(n, text, body)
	default:
		p.job(n, text, body)
	}
}

// isAssignment reports whether a line is "NAME = value": a word without
// blanks, optional blanks, then '='. A job line cannot look like that: its
// first field is followed by a blank and another field before any '='.
func isAssignment(body string) bool {
	name, _, ok := strings.Cut(body, "=")
	name = strings.TrimRight(name, " \t")
	return ok && name != "" && !strings.ContainsAny(name, " \t")
}

func (p *parser) assign(n int, text, body string) {
	name, value, _ := strings.Cut(body, "=")
	name = strings.TrimRight(name, " \t")
	value = unquote(strings.TrimSpace(value))
	if !isName(name) {
		p.skip(n, text, "invalid environment variable name %q", name)
		return
	}
	switch name {
	case "MAILTO", "MAILFROM":
		if value != "" { // an empty MAILTO turns mail off, as jobfleet has it
			p.skip(n, text, "%s ignored: jobfleet does not mail output; it records it in each run's attempts", name)
		}
		return
	case "RANDOM_DELAY":
		p.skip(n, text, "RANDOM_DELAY ignored: jobfleet does not delay jobs randomly")
		return
	case "CRON_TZ":
		p.cronTZ = p.zone(n, text, value)
		return // affects scheduling only, not the command's environment
	case "TZ":
		p.plainTZ = p.zone(n, text, value)
	case "SHELL":
		if !path.IsAbs(value) || strings.ContainsRune(value, '=') {
			p.skip(n, text, "SHELL ignored: %q is not an absolute path; commands still run with %s", value, p.shell)
			return
		}
		p.shell = value
	}
	if _, ok := p.values[name]; !ok {
		p.env = append(p.env, name)
	}
	p.values[name] = value
}

// zone returns the zone an assignment on line n sets, reporting an
// unknown one.
func (p *parser) zone(n int, text, name string) zone {
	if name == "" {
		return zone{} // back to Options.Timezone
	}
	_, err := schedule.LoadLocation(name)
	if err != nil {
		p.skip(n, text, "%v; the job lines it applies to are skipped", err)
	}
	return zone{name: name, line: n, err: err}
}

// unquote removes one pair of matching quotes enclosing the whole value.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// isName reports whether s is a portable environment variable name.
func isName(s string) bool {
	for i, r := range s {
		letter := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}

// cutField returns the first blank-separated field of s and the rest of s
// after it, rest keeping its leading blanks.
func cutField(s string) (field, rest string) {
	s = strings.TrimLeft(s, " \t")
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

func (p *parser) job(n int, text, body string) {
	var spec string
	rest := body
	if body[0] == '@' {
		spec, rest = cutField(body)
		switch {
		case spec == "@reboot":
			p.skip(n, text, "@reboot is not supported: jobfleet has no notion of a machine starting")
			return
		case !special[spec]:
			p.skip(n, text, "unknown special string %q; want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly", spec)
			return
		}
	} else {
		fields := make([]string, 5)
		for i := range fields {
			fields[i], rest = cutField(rest)
			if fields[i] == "" {
				p.skip(n, text, "not an assignment, and a job line needs 5 time fields and a command")
				return
			}
		}
		spec = strings.Join(fields, " ")
	}
	var user string
	if p.opts.SystemFormat {
		if user, rest = cutField(rest); user == "" {
			p.skip(n, text, "missing user and command")
			return
		}
	}
	command := strings.Trim(rest, " \t")
	if command == "" {
		p.skip(n, text, "missing command")
		return
	}
	command, ok := unescapePercent(command)
	if !ok {
		p.skip(n, text, "unescaped %% in the command is not supported (cron sends the text after it to standard input); write \\%% for a literal %%")
		return
	}

	tz := p.opts.Timezone
	for _, z := range []zone{p.cronTZ, p.plainTZ} {
		if z.line == 0 {
			continue
		}
		if z.err != nil {
			p.skip(n, text, "time zone %q set on line %d is unknown", z.name, z.line)
			return
		}
		tz = z.name
		break
	}

	job := store.Job{
		ID:            fmt.Sprintf("%s-%d", p.opts.IDPrefix, n),
		Schedule:      spec,
		Timezone:      tz,
		Executor:      store.Executor{Type: store.ExecutorShell, Command: p.argv(command)},
		MisfirePolicy: p.opts.MisfirePolicy,
	}
	if s := slug(command); s != "" {
		job.ID += "-" + s
	}
	job.Normalize()
	if err := job.Validate(store.DefaultLimits()); err != nil {
		p.skip(n, text, "%v", err)
		return
	}
	p.result.Jobs = append(p.result.Jobs, Entry{Line: n, User: user, Job: job})
}

// argv returns the command line of a job: the shell running command, with
// the assignments so far passed through EnvProgram.
func (p *parser) argv(command string) []string {
	var argv []string
	if len(p.env) > 0 {
		argv = append(argv, EnvProgram)
		for _, name := range p.env {
			argv = append(argv, name+"="+p.values[name])
		}
	}
	return append(argv, p.shell, "-c", command)
}

// unescapePercent applies crontab(5)'s rule for '%' in commands: "\%" is a
// literal '%'; ok is false if an unescaped '%' remains. Other backslashes
// are kept, and the character after one is never taken as an escape.
func unescapePercent(command string) (out string, ok bool) {
	if !strings.ContainsRune(command, '%') {
		return command, true
	}
	var b strings.Builder
	for i := 0; i < len(command); i++ {
		switch c := command[i]; {
		case c == '%':
			return "", false
		case c == '\\' && i+1 < len(command):
			if command[i+1] != '%' {
				b.WriteByte('\\')
			}
			b.WriteByte(command[i+1])
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// slug makes a readable ID fragment from a command: its words, the first
// reduced to its base name, lower-cased, with every run of other
// characters than a-z and 0-9 turned into one '-', at most 40 bytes.
func slug(command string) string {
	words := strings.Fields(command)
	if len(words) == 0 {
		return ""
	}
	words[0] = path.Base(words[0])
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(strings.Join(words, " ")) {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			dash = b.Len() > 0
			continue
		}
		if dash && b.Len()+2 > maxSlugBytes || b.Len()+1 > maxSlugBytes {
			break
		}
		if dash {
			b.WriteByte('-')
			dash = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
