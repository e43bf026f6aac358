package crontab

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/schedule"
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
	// DefaultIDPrefix starts generated job IDs, followed by '/'.
	DefaultIDPrefix = "crontab"
	// DefaultShell runs commands unless the crontab sets SHELL.
	DefaultShell = "/bin/sh"
	// EnvProgram passes a crontab's environment assignments to a command.
	EnvProgram = "/usr/bin/env"
	// DefaultPath is the PATH cron (cronie, Vixie cron) gives commands
	// of a crontab that sets none.
	DefaultPath = "/usr/bin:/bin"

	maxPrefixBytes = 100
	maxSlugBytes   = 40
)

// Options control Parse. The zero Options read a user crontab in UTC.
type Options struct {
	// SystemFormat reads /etc/crontab and /etc/cron.d files, whose job lines
	// have a user name after the time fields. The format is not guessed,
	// but lines that look like the other format are refused with a hint:
	// in a user crontab, a command starting with a user name such as
	// "root"; in a system crontab, a user column that is a path, a script
	// or a program followed by its options.
	SystemFormat bool
	// WorkerUser is the user that the workers which run shell jobs run as.
	// jobfleet workers run commands as themselves, so a system crontab
	// line is converted only if its user column names WorkerUser; other
	// lines are refused, never run as someone else. Empty refuses every
	// line of a system crontab.
	WorkerUser string
	// Timeout of the generated jobs; zero means api.NoTimeout, because
	// cron does not limit how long a job runs.
	Timeout api.Duration
	// Timezone is the IANA zone of jobs before any CRON_TZ line, and
	// after an empty one: the zone of the machine the crontab ran on,
	// whose cron read the schedules in its local time. Default "UTC"
	// (the command line defaults it to the local zone, named).
	Timezone string
	// IDPrefix starts every generated job ID; default DefaultIDPrefix. Use
	// distinct prefixes to import several crontabs side by side. At most
	// 100 bytes of printable UTF-8.
	IDPrefix string
	// MisfirePolicy of the generated jobs; default api.MisfireSkip,
	// because cron does not run jobs missed while it was down.
	MisfirePolicy api.MisfirePolicy
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
	// User is the user column of a system crontab, always
	// Options.WorkerUser (lines of other users are not converted); empty
	// for a user crontab.
	User string
	// Job is the converted job, normalized and valid under
	// api.DefaultLimits.
	Job api.Job
	// ZoneLine is the line of the CRON_TZ assignment that set the job's
	// zone; 0 if the zone is Options.Timezone.
	ZoneLine int
}

// idRest matches what follows "<prefix>/" in the IDs Parse makes: a slug,
// the command's hash and, for a repeated command, its ordinal.
var idRest = regexp.MustCompile(`^(?:[a-z0-9-]+-)?[0-9a-f]{8}(?:-[0-9]+)?$`)

// Owns reports whether id has the form of the IDs Parse makes under
// prefix: "<prefix>/<slug>-<hash>" (see Parse). Jobs of another prefix, or
// with more path segments ("<prefix>/team/x"), are not matched, so that
// pruning one import never touches another's jobs.
func Owns(prefix, id string) bool {
	rest, ok := strings.CutPrefix(id, prefix+"/")
	return ok && idRest.MatchString(rest)
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
	ids    map[string]int // ID without ordinal -> jobs that have it

	shell  string
	env    []string          // names in order of first assignment
	values map[string]string // name -> value
	cronTZ zone              // from CRON_TZ
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
//     follow, as in cronie. Blanks around '=' are allowed; a value wholly
//     enclosed in matching single or double quotes is unquoted; nothing
//     is expanded. Every assignment made before a job line is in its
//     command's environment, passed through EnvProgram: ["/usr/bin/env",
//     "NAME=value", …, shell, "-c", command], with PATH=DefaultPath (cron's)
//     if the crontab set no PATH. Some also mean something to cron:
//     SHELL (an absolute path) is the shell that runs the commands;
//     CRON_TZ is the time zone of the schedules of the job lines after it
//     (until the next CRON_TZ; an empty one goes back to
//     Options.Timezone; an unknown one skips the lines it applies to); TZ
//     is only the commands' zone, not their schedules' (reported, so that
//     a TZ line meant as the schedule's is seen); LOGNAME and USER are
//     set by cron to the crontab's owner whatever the crontab says, so
//     they are reported and not passed (the worker's apply). What cron
//     does with MAILTO, MAILFROM, CONTENT_TYPE and
//     CONTENT_TRANSFER_ENCODING (mail the output), RANDOM_DELAY (start
//     jobs late at random) and MLS_LEVEL (an SELinux context) is not
//     reproduced and is reported (an empty MAILTO, no mail, is not); the
//     variables are still passed, as cron passes them.
//   - A job line is five time fields, or one of @yearly, @annually,
//     @monthly, @weekly, @daily, @midnight or @hourly; then, in
//     SystemFormat, a user name; then the command, the rest of the line.
//     @reboot is reported as unsupported.
//   - In the command, "\%" becomes '%'. An unescaped '%' is reported as
//     unsupported: cron would turn it into a newline and feed the text
//     after it to the command's standard input.
//
// The command runs as ["/bin/sh", "-c", command] (or with SHELL). Each job
// gets ID "<prefix>/<slug>-<hash>": the slug is up to 40 characters of
// a-z, 0-9 and '-' taken from the command, for people to read; the hash
// is the first 8 hex digits of SHA-256 over the user column and the
// command. So an ID depends on the line's own command only: editing,
// adding or removing other lines, or this line's schedule, zone or
// environment, keeps it (the job is updated, not duplicated). A command
// that occurs more than once gets "-2", "-3", ... on its later lines, in
// file order. Owns recognizes these IDs.
//
// Jobs get Options.MisfirePolicy, Options.Timeout (by default none: cron
// has no timeout) and jobfleet's defaults otherwise.
//
// Time fields are read by schedule.Parse, whose dialect is cronie's: day
// of week 7 is Sunday, a day field starting with '*' combines the two day
// fields with AND, and daylight saving time changes are handled as cronie
// does; so jobs fire when cron would have fired them.
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
		opts.MisfirePolicy = api.MisfireSkip
	case api.MisfireRunOnce, api.MisfireSkip, api.MisfireRunAll:
	default:
		return Result{}, fmt.Errorf("%w: unknown misfire policy %q", ErrInvalidOptions, string(opts.MisfirePolicy))
	}
	if opts.Timeout == 0 {
		opts.Timeout = api.NoTimeout
	}
	probe := api.Job{ID: opts.IDPrefix + "/x", Executor: api.Executor{Type: api.ExecutorShell, Command: []string{"true"}}, Timeout: opts.Timeout}
	if err := probe.Validate(api.DefaultLimits()); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	if opts.WorkerUser != "" && !plausibleUser(opts.WorkerUser) {
		return Result{}, fmt.Errorf("%w: worker user %q is not a user name", ErrInvalidOptions, opts.WorkerUser)
	}

	p := &parser{opts: opts, shell: DefaultShell, values: make(map[string]string), ids: make(map[string]int)}
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
	case strings.HasSuffix(prefix, "/"):
		return fmt.Errorf("%w: ID prefix %q ends with '/'; IDs are \"<prefix>/<name>\"", ErrInvalidOptions, prefix)
	}
	return nil
}

// userName is a plausible user name for a crontab's user column: letters,
// digits, '_', '-' and '.', not starting with a digit, '-' or '.', at most
// 32 bytes; Samba machine accounts end with '$'.
var userName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$`)

func plausibleUser(s string) bool { return userName.MatchString(s) }

// wellKnownUsers are account names that are not commands, so a user
// crontab line whose command starts with one is a system crontab line.
var wellKnownUsers = []string{"root", "daemon", "bin", "sys", "nobody", "www-data", "_www"}

// scriptSuffixes end file names that are programs, not user names.
var scriptSuffixes = []string{".sh", ".bash", ".py", ".pl", ".rb", ".php", ".js"}

// mixUp returns why a system crontab line's user column looks like a
// user crontab's command, or "".
func mixUp(user, command string) string {
	switch {
	case !plausibleUser(user):
		return fmt.Sprintf("%q is not a user name", user)
	case slices.ContainsFunc(scriptSuffixes, func(s string) bool { return strings.HasSuffix(user, s) }):
		return fmt.Sprintf("%q is a script, not a user name", user)
	case strings.HasPrefix(command, "-"):
		return fmt.Sprintf("%q is followed by %q, an option of a program", user, strings.Fields(command)[0])
	case strings.HasPrefix(command, "http://"), strings.HasPrefix(command, "https://"):
		return fmt.Sprintf("%q is followed by a URL, an argument of a program", user)
	}
	return ""
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
	// As cronie: every assignment is in the environment of the commands
	// of the lines after it (cron runs them with the crontab's
	// environment as it stands at their line); some also mean something
	// to cron itself, which the cases below reproduce or report.
	switch name {
	case "MAILTO", "MAILFROM", "CONTENT_TYPE", "CONTENT_TRANSFER_ENCODING":
		if value != "" { // an empty MAILTO turns mail off, as jobfleet has it
			p.skip(n, text, "%s not reproduced: cron mails a job's output, jobfleet records it in each run's attempts; %s is still passed to the commands, as cron passes it", name, name)
		}
	case "RANDOM_DELAY":
		p.skip(n, text, "RANDOM_DELAY not reproduced: cron starts each job up to %s minutes late at random, jobfleet at its scheduled time; it is still passed to the commands, as cron passes it", value)
	case "MLS_LEVEL":
		p.skip(n, text, "MLS_LEVEL not reproduced: the commands run in the workers' security context; it is still passed to them, as cron passes it")
	case "LOGNAME", "USER":
		p.skip(n, text, "%s ignored, as cron ignores it: cron sets LOGNAME and USER to the crontab's owner whatever the crontab says; the commands get the worker's", name)
		return
	case "CRON_TZ":
		p.cronTZ = p.zone(n, text, value)
	case "TZ":
		cur := p.opts.Timezone
		if p.cronTZ.line != 0 {
			cur = p.cronTZ.name
		}
		p.skip(n, text, "TZ is the commands' time zone, not their schedule's: it is passed to the commands of the lines after it, whose schedules stay in %s (CRON_TZ sets the zone of the schedules, as in cronie)", zoneName(cur))
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

// zoneName is a zone's name as messages show it.
func zoneName(z string) string {
	if z == "" {
		return "UTC"
	}
	return z
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
	if p.opts.SystemFormat {
		if why := mixUp(user, command); why != "" {
			p.skip(n, text, "%s: this looks like a user crontab, which has no user column; import it without --system", why)
			return
		}
	} else if word, _ := cutField(command); slices.Contains(wellKnownUsers, word) && len(strings.Fields(command)) > 1 {
		p.skip(n, text, "the command starts with %q, a user name: this looks like a system crontab (/etc/crontab, /etc/cron.d), which has a user column; import it with --system", word)
		return
	}
	if command == "" {
		if p.opts.SystemFormat {
			p.skip(n, text, "missing command (if %q is the command, this is a user crontab: import it without --system)", user)
		} else {
			p.skip(n, text, "missing command")
		}
		return
	}
	if p.opts.SystemFormat && user != p.opts.WorkerUser {
		if p.opts.WorkerUser == "" {
			p.skip(n, text, "runs as user %q, but jobfleet workers run commands as their own user; not converted unless --worker-user %s says the workers that run shell jobs are %s",
				user, user, user)
		} else {
			p.skip(n, text, "runs as user %q, but the workers run commands as %q (--worker-user); not converted, so that it never runs as someone else", user, p.opts.WorkerUser)
		}
		return
	}
	command, ok := unescapePercent(command)
	if !ok {
		p.skip(n, text, "unescaped %% in the command is not supported (cron sends the text after it to standard input); write \\%% for a literal %%")
		return
	}

	tz, zoneLine := p.opts.Timezone, 0
	if z := p.cronTZ; z.line != 0 {
		if z.err != nil {
			p.skip(n, text, "time zone %q set on line %d is unknown", z.name, z.line)
			return
		}
		tz, zoneLine = z.name, z.line
	}

	id, base := p.id(user, command)
	job := api.Job{
		ID:            id,
		Schedule:      spec,
		Timezone:      tz,
		Executor:      api.Executor{Type: api.ExecutorShell, Command: p.argv(command)},
		MisfirePolicy: p.opts.MisfirePolicy,
		Timeout:       p.opts.Timeout,
	}
	job.Normalize()
	if err := job.Validate(api.DefaultLimits()); err != nil {
		p.skip(n, text, "%v", err)
		return
	}
	p.ids[base]++
	p.result.Jobs = append(p.result.Jobs, Entry{Line: n, User: user, Job: job, ZoneLine: zoneLine})
}

// id returns the ID of a job running command as user (see Parse), and
// that ID without the ordinal of a repeated command.
func (p *parser) id(user, command string) (id, base string) {
	sum := sha256.Sum256([]byte(user + "\x00" + command))
	base = p.opts.IDPrefix + "/" + hex.EncodeToString(sum[:4])
	if s := slug(command); s != "" {
		base = p.opts.IDPrefix + "/" + s + "-" + hex.EncodeToString(sum[:4])
	}
	if n := p.ids[base]; n > 0 {
		return base + "-" + strconv.Itoa(n+1), base
	}
	return base, base
}

// argv returns the command line of a job: the shell running command,
// with the assignments so far passed through EnvProgram, and cron's PATH
// (DefaultPath) if the crontab set none.
func (p *parser) argv(command string) []string {
	argv := []string{EnvProgram}
	for _, name := range p.env {
		argv = append(argv, name+"="+p.values[name])
	}
	if _, ok := p.values["PATH"]; !ok {
		argv = append(argv, "PATH="+DefaultPath)
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
