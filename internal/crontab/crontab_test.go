package crontab

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// userCrontab is a realistic user crontab with the odd lines real ones have.
const userCrontab = `# m h  dom mon dow   command
MAILTO=ops@example.com
SHELL=/bin/bash
PATH = /usr/local/bin:/usr/bin:/bin

   # an indented comment
*/5 * * * * /usr/local/bin/healthcheck.sh --quiet >/dev/null 2>&1
0 2 * * * cd /srv/app && ./backup.sh --full # nightly backup
@hourly	/usr/bin/php /var/www/artisan schedule:run
@reboot /usr/local/bin/start-tunnel
30 6 * * mon-fri tar czf /backups/home-$(date +\%Y\%m\%d).tgz /home
0 0 * * * echo "%s" | mail -s report root
GREETING="  hello world  "
0 12 * * 7 echo "$GREETING"
0 0 30 2 * echo never
61 * * * * echo bad minute
* * * * echo too few fields
0 1 * * *
@every 5m echo not crontab
CRON_TZ=Europe/Berlin
0 9 1 * * /usr/local/bin/monthly-report
CRON_TZ=Mars/Olympus
0 9 2 * * /usr/local/bin/never-converted
CRON_TZ=
TZ=America/New_York
15 3 * * 0 /usr/local/bin/weekly
RANDOM_DELAY=10
2BAD=value
@daily echo 'unterminated
`

func TestParseUserCrontab(t *testing.T) {
	res, err := Parse(strings.NewReader(userCrontab), Options{Timezone: "UTC"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	// Every assignment reaches the commands of the lines after it, as in
	// cronie (MAILTO, CRON_TZ and RANDOM_DELAY included).
	env := []string{EnvProgram, "MAILTO=ops@example.com", "SHELL=/bin/bash", "PATH=/usr/local/bin:/usr/bin:/bin"}
	withEnv := func(extra ...string) []string {
		return append(slices.Clone(env), extra...)
	}
	wantJobs := []struct {
		line     int
		id       string
		schedule string
		timezone string
		command  []string
	}{
		{7, "crontab/healthcheck-sh-quiet-dev-null-2-1-a39866b2", "*/5 * * * *", "UTC",
			withEnv("/bin/bash", "-c", "/usr/local/bin/healthcheck.sh --quiet >/dev/null 2>&1")},
		{8, "crontab/cd-srv-app-backup-sh-full-nightly-backup-dda1c828", "0 2 * * *", "UTC",
			withEnv("/bin/bash", "-c", "cd /srv/app && ./backup.sh --full # nightly backup")},
		{9, "crontab/php-var-www-artisan-schedule-run-0d809021", "@hourly", "UTC",
			withEnv("/bin/bash", "-c", "/usr/bin/php /var/www/artisan schedule:run")},
		{11, "crontab/tar-czf-backups-home-date-y-m-d-tgz-home-70956c91", "30 6 * * mon-fri", "UTC",
			withEnv("/bin/bash", "-c", "tar czf /backups/home-$(date +%Y%m%d).tgz /home")},
		{14, "crontab/echo-greeting-77b5d853", "0 12 * * 7", "UTC",
			withEnv("GREETING=  hello world  ", "/bin/bash", "-c", `echo "$GREETING"`)},
		{21, "crontab/monthly-report-ec5bb5a1", "0 9 1 * *", "Europe/Berlin",
			withEnv("GREETING=  hello world  ", "CRON_TZ=Europe/Berlin", "/bin/bash", "-c", "/usr/local/bin/monthly-report")},
		// TZ is the command's zone: the schedule stays in the crontab's.
		{26, "crontab/weekly-dc8b4024", "15 3 * * 0", "UTC",
			withEnv("GREETING=  hello world  ", "CRON_TZ=", "TZ=America/New_York", "/bin/bash", "-c", "/usr/local/bin/weekly")},
		{29, "crontab/echo-unterminated-b22ec5a4", "@daily", "UTC",
			withEnv("GREETING=  hello world  ", "CRON_TZ=", "TZ=America/New_York", "RANDOM_DELAY=10", "/bin/bash", "-c", "echo 'unterminated")},
	}
	wantSkipped := []struct {
		line   int
		reason string
	}{
		{2, "MAILTO not reproduced"},
		{10, "@reboot is not supported"},
		{12, "unescaped % in the command is not supported"},
		{15, `schedule: "0 0 30 2 *" never fires`},
		{16, `schedule: invalid cron expression "61 * * * *"`},
		{17, `schedule: invalid cron expression "* * * * echo"`},
		{18, "missing command"},
		{19, `unknown special string "@every"`},
		{22, `unknown time zone "Mars/Olympus"; the job lines it applies to are skipped`},
		{23, `time zone "Mars/Olympus" set on line 22 is unknown`},
		{25, "TZ is the commands' time zone, not their schedule's: it is passed to the commands of the lines after it, whose schedules stay in UTC"},
		{27, "RANDOM_DELAY not reproduced: cron starts each job up to 10 minutes late"},
		{28, `invalid environment variable name "2BAD"`},
	}

	t.Run("jobs", func(t *testing.T) {
		if len(res.Jobs) != len(wantJobs) {
			for _, e := range res.Jobs {
				t.Logf("job line %d: %s", e.Line, e.Job.ID)
			}
			t.Fatalf("len(Jobs): got %d, want %d", len(res.Jobs), len(wantJobs))
		}
		for i, w := range wantJobs {
			e := res.Jobs[i]
			if e.Line != w.line {
				t.Errorf("Jobs[%d].Line: got %d, want %d", i, e.Line, w.line)
			}
			if e.User != "" {
				t.Errorf("Jobs[%d].User: got %q, want none in a user crontab", i, e.User)
			}
			if e.Job.ID != w.id {
				t.Errorf("line %d ID: got %q, want %q", w.line, e.Job.ID, w.id)
			}
			if e.Job.Schedule != w.schedule {
				t.Errorf("line %d Schedule: got %q, want %q", w.line, e.Job.Schedule, w.schedule)
			}
			if e.Job.Timezone != w.timezone {
				t.Errorf("line %d Timezone: got %q, want %q", w.line, e.Job.Timezone, w.timezone)
			}
			if e.Job.Executor.Type != api.ExecutorShell {
				t.Errorf("line %d executor type: got %q, want %q", w.line, e.Job.Executor.Type, api.ExecutorShell)
			}
			if !slices.Equal(e.Job.Executor.Command, w.command) {
				t.Errorf("line %d Command:\n got %q\nwant %q", w.line, e.Job.Executor.Command, w.command)
			}
			if e.Job.MisfirePolicy != api.MisfireSkip {
				t.Errorf("line %d MisfirePolicy: got %q, want %q", w.line, e.Job.MisfirePolicy, api.MisfireSkip)
			}
			if e.Job.Timeout != api.NoTimeout {
				t.Errorf("line %d Timeout: got %v, want none (cron has no timeout)", w.line, e.Job.Timeout)
			}
			if err := e.Job.Validate(api.DefaultLimits()); err != nil {
				t.Errorf("line %d Validate: %v", w.line, err)
			}
		}
	})
	t.Run("skipped", func(t *testing.T) {
		lines := strings.Split(userCrontab, "\n")
		if len(res.Skipped) != len(wantSkipped) {
			for _, p := range res.Skipped {
				t.Logf("skipped line %d: %s", p.Line, p.Reason)
			}
			t.Fatalf("len(Skipped): got %d, want %d", len(res.Skipped), len(wantSkipped))
		}
		for i, w := range wantSkipped {
			p := res.Skipped[i]
			if p.Line != w.line {
				t.Errorf("Skipped[%d].Line: got %d, want %d (%s)", i, p.Line, w.line, p.Reason)
				continue
			}
			if p.Text != lines[w.line-1] {
				t.Errorf("line %d Text: got %q, want %q", w.line, p.Text, lines[w.line-1])
			}
			if !strings.Contains(p.Reason, w.reason) {
				t.Errorf("line %d Reason: got %q, want it to contain %q", w.line, p.Reason, w.reason)
			}
		}
	})
}

// systemCrontab is a /etc/crontab in Debian's style, with CRLF line endings.
const systemCrontab = "SHELL=/bin/sh\r\n" +
	"PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin\r\n" +
	"\r\n" +
	"# Example of job definition:\r\n" +
	"17 *\t* * *\troot\tcd / && run-parts --report /etc/cron.hourly\r\n" +
	"25 6\t* * *\troot\ttest -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )\r\n" +
	"@weekly www-data /usr/bin/php /var/www/cron.php\r\n" +
	"0 4 * * * root\r\n" +
	"@daily\r\n" +
	"47 6\t* * 7\troot\ttest -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.weekly )\r\n"

func TestParseSystemCrontab(t *testing.T) {
	res, err := Parse(strings.NewReader(systemCrontab), Options{SystemFormat: true, WorkerUser: "root", IDPrefix: "etc-crontab"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	env := []string{EnvProgram, "SHELL=/bin/sh", "PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin", "/bin/sh", "-c"}
	wantJobs := []Entry{
		{Line: 5, User: "root", Job: api.Job{ID: "etc-crontab/cd-run-parts-report-etc-cron-hourly-" + hash8("root", "cd / && run-parts --report /etc/cron.hourly"), Schedule: "17 * * * *",
			Executor: api.Executor{Command: append(slices.Clone(env), "cd / && run-parts --report /etc/cron.hourly")}}},
		{Line: 6, User: "root", Job: api.Job{ID: "etc-crontab/test-x-usr-sbin-anacron-cd-run-parts-rep-" + hash8("root", "test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )"), Schedule: "25 6 * * *",
			Executor: api.Executor{Command: append(slices.Clone(env), "test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )")}}},
		{Line: 10, User: "root", Job: api.Job{ID: "etc-crontab/test-x-usr-sbin-anacron-cd-run-parts-rep-" + hash8("root", "test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.weekly )"), Schedule: "47 6 * * 7",
			Executor: api.Executor{Command: append(slices.Clone(env), "test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.weekly )")}}},
	}
	if len(res.Jobs) != len(wantJobs) {
		t.Fatalf("len(Jobs): got %d, want %d: %+v (skipped %+v)", len(res.Jobs), len(wantJobs), res.Jobs, res.Skipped)
	}
	for i, w := range wantJobs {
		t.Run(w.Job.ID, func(t *testing.T) {
			got := res.Jobs[i]
			if got.Line != w.Line || got.User != w.User {
				t.Errorf("Line, User: got %d, %q, want %d, %q", got.Line, got.User, w.Line, w.User)
			}
			if got.Job.ID != w.Job.ID {
				t.Errorf("ID: got %q, want %q", got.Job.ID, w.Job.ID)
			}
			if got.Job.Schedule != w.Job.Schedule {
				t.Errorf("Schedule: got %q, want %q", got.Job.Schedule, w.Job.Schedule)
			}
			if !slices.Equal(got.Job.Executor.Command, w.Job.Executor.Command) {
				t.Errorf("Command:\n got %q\nwant %q", got.Job.Executor.Command, w.Job.Executor.Command)
			}
		})
	}
	wantSkipped := []Problem{
		{Line: 7, Text: "@weekly www-data /usr/bin/php /var/www/cron.php",
			Reason: `runs as user "www-data", but the workers run commands as "root" (--worker-user); not converted, so that it never runs as someone else`},
		{Line: 8, Text: "0 4 * * * root", Reason: `missing command (if "root" is the command, this is a user crontab: import it without --system)`},
		{Line: 9, Text: "@daily", Reason: "missing user and command"},
	}
	if !slices.Equal(res.Skipped, wantSkipped) {
		t.Errorf("Skipped:\n got %+v\nwant %+v", res.Skipped, wantSkipped)
	}

	// Debian's weekly line fires on Sundays (day of week 7).
	s, err := res.Jobs[2].Job.ParseSchedule()
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) // a Monday
	if got, want := s.Next(from), time.Date(2026, 12, 6, 6, 47, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("next fire of %q after %v: got %v, want %v (a Sunday)", res.Jobs[2].Job.Schedule, from, got, want)
	}
}

// hash8 is the hash part of the ID of a job running command as user.
func hash8(user, command string) string {
	sum := sha256.Sum256([]byte(user + "\x00" + command))
	return hex.EncodeToString(sum[:4])
}

// TestParseUserColumn checks that a system crontab line runs only as the
// workers' user: other users' lines are refused, never converted to run as
// someone else.
func TestParseUserColumn(t *testing.T) {
	const tab = "* * * * * root id\n* * * * * nobody id\n* * * * * backup id\n"
	tests := []struct {
		name       string
		workerUser string
		wantUsers  []string
		wantReason map[int]string
	}{
		{name: "no worker user", wantReason: map[int]string{
			1: `runs as user "root", but jobfleet workers run commands as their own user; not converted unless --worker-user root says the workers that run shell jobs are root`,
			2: `runs as user "nobody"`, 3: `runs as user "backup"`,
		}},
		{name: "workers run as root", workerUser: "root", wantUsers: []string{"root"}, wantReason: map[int]string{
			2: `runs as user "nobody", but the workers run commands as "root" (--worker-user)`, 3: `runs as user "backup"`,
		}},
		{name: "workers run as nobody", workerUser: "nobody", wantUsers: []string{"nobody"}, wantReason: map[int]string{
			1: `runs as user "root", but the workers run commands as "nobody"`, 3: `runs as user "backup"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Parse(strings.NewReader(tab), Options{SystemFormat: true, WorkerUser: tt.workerUser})
			if err != nil {
				t.Fatal(err)
			}
			var users []string
			for _, e := range res.Jobs {
				users = append(users, e.User)
			}
			if !slices.Equal(users, tt.wantUsers) {
				t.Errorf("converted users: got %q, want %q", users, tt.wantUsers)
			}
			if len(res.Skipped) != len(tt.wantReason) {
				t.Fatalf("skipped: got %+v, want lines %v", res.Skipped, tt.wantReason)
			}
			for _, p := range res.Skipped {
				if want, ok := tt.wantReason[p.Line]; !ok || !strings.HasPrefix(p.Reason, want) {
					t.Errorf("line %d: got reason %q, want it to start with %q", p.Line, p.Reason, want)
				}
			}
		})
	}
}

// TestParseFormatMixUp checks that a system crontab read as a user crontab,
// and a user crontab read as a system crontab, are refused with a hint
// instead of taking a user name for a command or a command for a user.
func TestParseFormatMixUp(t *testing.T) {
	tests := []struct {
		name       string
		line       string
		system     bool
		wantReason string // "": converted
	}{
		{name: "system line as user", line: "17 * * * * root cd / && run-parts --report /etc/cron.hourly",
			wantReason: `the command starts with "root", a user name: this looks like a system crontab (/etc/crontab, /etc/cron.d), which has a user column; import it with --system`},
		{name: "www-data line as user", line: "*/5 * * * * www-data php /var/www/cron.php", wantReason: `starts with "www-data", a user name`},
		{name: "user program named like a word", line: "0 3 * * * backup --all"},
		{name: "curl as user", line: "*/10 * * * * curl -fsS https://example.com/ping", system: true,
			wantReason: `"curl" is followed by "-fsS", an option of a program: this looks like a user crontab, which has no user column; import it without --system`},
		{name: "curl with a url as user", line: "*/10 * * * * curl https://example.com/ping", system: true, wantReason: `"curl" is followed by a URL`},
		{name: "path as user", line: "0 1 * * * /usr/local/bin/sync.sh", system: true, wantReason: `"/usr/local/bin/sync.sh" is not a user name: this looks like a user crontab`},
		{name: "script as user", line: "0 1 * * * sync.sh --now", system: true, wantReason: `"sync.sh" is a script, not a user name`},
		{name: "user column as system", line: "0 1 * * * root /usr/local/bin/sync.sh", system: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Parse(strings.NewReader(tt.line+"\n"), Options{SystemFormat: tt.system, WorkerUser: "root"})
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantReason == "" {
				if len(res.Jobs) != 1 {
					t.Errorf("got jobs %+v, skipped %+v; want the line converted", res.Jobs, res.Skipped)
				}
				return
			}
			if len(res.Jobs) != 0 || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, tt.wantReason) {
				t.Errorf("got jobs %+v, skipped %+v; want the line refused with %q", res.Jobs, res.Skipped, tt.wantReason)
			}
		})
	}
}

// TestParseIDsSurviveEdits checks that a job's ID depends on its own
// command only: adding a comment at the top, removing a line, and changing
// another line's schedule or environment keep every other ID, so a second
// import updates jobs instead of duplicating them.
func TestParseIDsSurviveEdits(t *testing.T) {
	before, err := Parse(strings.NewReader(userCrontab), Options{})
	if err != nil {
		t.Fatal(err)
	}
	edited := "# managed by ops; do not edit\n" +
		strings.Replace(strings.Replace(userCrontab, "0 2 * * * cd /srv/app", "30 3 * * 1-5 cd /srv/app", 1),
			"@hourly\t/usr/bin/php /var/www/artisan schedule:run\n", "", 1)
	edited = strings.Replace(edited, "PATH = /usr/local/bin:/usr/bin:/bin", "PATH = /opt/bin:/usr/bin:/bin", 1)
	after, err := Parse(strings.NewReader(edited), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(r Result) map[string]Entry {
		m := make(map[string]Entry)
		for _, e := range r.Jobs {
			m[e.Job.ID] = e
		}
		return m
	}
	was, is := ids(before), ids(after)
	if len(is) != len(was)-1 {
		t.Fatalf("got %d jobs after removing one of %d", len(is), len(was))
	}
	for id, e := range is {
		old, ok := was[id]
		if !ok {
			t.Errorf("job %q (line %d) is new after the edit; want every ID kept", id, e.Line)
			continue
		}
		if e.Line != old.Line+1 && e.Line != old.Line {
			t.Errorf("job %q: line %d, was %d", id, e.Line, old.Line)
		}
	}
	backup := "crontab/cd-srv-app-backup-sh-full-nightly-backup-dda1c828"
	if got := is[backup].Job.Schedule; got != "30 3 * * 1-5" {
		t.Errorf("job %q after its schedule changed: got schedule %q, want the new one under the same ID", backup, got)
	}
}

// TestParseRepeatedCommands checks that repeated commands get distinct
// IDs, numbered in file order, and that the numbering does not depend on
// other commands.
func TestParseRepeatedCommands(t *testing.T) {
	res, err := Parse(strings.NewReader("0 1 * * * run\n0 2 * * * other\n0 3 * * * run\n0 4 * * * run\n"), Options{IDPrefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	run, other := "p/run-"+hash8("", "run"), "p/other-"+hash8("", "other")
	var got []string
	for _, e := range res.Jobs {
		got = append(got, e.Job.ID)
	}
	if want := []string{run, other, run + "-2", run + "-3"}; !slices.Equal(got, want) {
		t.Errorf("IDs: got %q, want %q", got, want)
	}
	for _, id := range got {
		if !Owns("p", id) {
			t.Errorf("Owns(%q, %q): got false, want true", "p", id)
		}
	}
}

func TestOwns(t *testing.T) {
	tests := []struct {
		prefix, id string
		want       bool
	}{
		{"crontab", "crontab/backup-sh-1a2b3c4d", true},
		{"crontab", "crontab/1a2b3c4d", true},
		{"crontab", "crontab/backup-sh-1a2b3c4d-2", true},
		{"crontab", "crontab/backup-sh", false},
		{"crontab", "crontab-web/backup-sh-1a2b3c4d", false},
		{"crontab", "crontab/web/backup-sh-1a2b3c4d", false},
		{"crontab", "crontab-7-backup-sh", false},
		{"crontab", "other/backup-sh-1a2b3c4d", false},
		{"team/a", "team/a/x-1a2b3c4d", true},
		{"team", "team/a/x-1a2b3c4d", false},
		{"crontab", "crontab/Backup-1a2b3c4d", false},
	}
	for _, tt := range tests {
		if got := Owns(tt.prefix, tt.id); got != tt.want {
			t.Errorf("Owns(%q, %q): got %v, want %v", tt.prefix, tt.id, got, tt.want)
		}
	}
}

// TestParseDayFieldsAsCron checks that a day-of-month step with a weekday
// converts to a job that fires as cron fires it: on days that match both.
func TestParseDayFieldsAsCron(t *testing.T) {
	res, err := Parse(strings.NewReader("0 16 */2 * SAT /usr/local/bin/weekend-odd\n"), Options{})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("Parse: %v, %+v", err, res)
	}
	s, err := res.Jobs[0].Job.ParseSchedule()
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) // a Monday
	if got, want := s.Next(from), time.Date(2026, 12, 5, 16, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("next fire after %v: got %v, want %v (Saturday the 5th, an odd day)", from, got, want)
	}
}

func TestParseTimeout(t *testing.T) {
	res, err := Parse(strings.NewReader("@daily backup\n"), Options{Timeout: api.Duration(3 * time.Hour)})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("Parse: %v, %+v", err, res)
	}
	if got := res.Jobs[0].Job.Timeout; got != api.Duration(3*time.Hour) {
		t.Errorf("Timeout: got %v, want 3h", got)
	}
	if _, err := Parse(strings.NewReader(""), Options{Timeout: api.Duration(48 * time.Hour)}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Parse with a 48h timeout: got %v, want %v", err, ErrInvalidOptions)
	}
}

func TestParseLines(t *testing.T) {
	tests := []struct {
		name        string
		crontab     string
		opts        Options
		wantCommand []string // nil: want no job
		wantReason  string   // "": want nothing skipped
		wantTZ      string
	}{
		{name: "plain", crontab: "* * * * * echo hi", wantCommand: []string{"/bin/sh", "-c", "echo hi"}, wantTZ: "UTC"},
		{name: "options time zone", crontab: "* * * * * echo hi", opts: Options{Timezone: "Asia/Tokyo"}, wantCommand: []string{"/bin/sh", "-c", "echo hi"}, wantTZ: "Asia/Tokyo"},
		{name: "cron tz, not tz, is the schedule's", crontab: "TZ=Asia/Tokyo\nCRON_TZ=Europe/Paris\n* * * * * date", wantCommand: []string{EnvProgram, "TZ=Asia/Tokyo", "CRON_TZ=Europe/Paris", "/bin/sh", "-c", "date"}, wantTZ: "Europe/Paris",
			wantReason: "TZ is the commands' time zone, not their schedule's"},
		{name: "empty cron tz resets", crontab: "CRON_TZ=Europe/Paris\nCRON_TZ=\n* * * * * date", opts: Options{Timezone: "Asia/Tokyo"}, wantCommand: []string{EnvProgram, "CRON_TZ=", "/bin/sh", "-c", "date"}, wantTZ: "Asia/Tokyo"},
		{name: "escaped percent", crontab: `* * * * * date +\%F`, wantCommand: []string{"/bin/sh", "-c", "date +%F"}},
		{name: "other backslashes kept", crontab: `* * * * * printf 'a\tb\n'`, wantCommand: []string{"/bin/sh", "-c", `printf 'a\tb\n'`}},
		{name: "escaped backslash then percent", crontab: `* * * * * echo \\%`, wantReason: "unescaped %"},
		{name: "trailing backslash", crontab: `* * * * * echo \`, wantCommand: []string{"/bin/sh", "-c", `echo \`}},
		{name: "percent as stdin", crontab: "* * * * * mail -s hi root%line one%line two", wantReason: "unescaped %"},
		{name: "single-quoted value", crontab: "A='x y'\n* * * * * env", wantCommand: []string{EnvProgram, "A=x y", "/bin/sh", "-c", "env"}},
		{name: "mismatched quotes kept", crontab: "A='x y\"\n* * * * * env", wantCommand: []string{EnvProgram, "A='x y\"", "/bin/sh", "-c", "env"}},
		{name: "reassignment keeps order", crontab: "A=1\nB=2\nA=3\n* * * * * env", wantCommand: []string{EnvProgram, "A=3", "B=2", "/bin/sh", "-c", "env"}},
		{name: "value with equals", crontab: "OPTS=--a=b\n* * * * * env", wantCommand: []string{EnvProgram, "OPTS=--a=b", "/bin/sh", "-c", "env"}},
		{name: "relative shell ignored", crontab: "SHELL=bash\n* * * * * env", wantCommand: []string{"/bin/sh", "-c", "env"}, wantReason: `SHELL ignored: "bash" is not an absolute path`},
		{name: "job with assignment in command", crontab: "* * * * * FOO=bar env", wantCommand: []string{"/bin/sh", "-c", "FOO=bar env"}},
		{name: "descriptor with assignment in command", crontab: "@daily X=1 env", wantCommand: []string{"/bin/sh", "-c", "X=1 env"}},
		{name: "lone word", crontab: "hello", wantReason: "needs 5 time fields and a command"},
		{name: "names", crontab: "0 0 1 jan,jul sun echo", wantCommand: []string{"/bin/sh", "-c", "echo"}},
		{name: "invalid utf-8 command", crontab: "* * * * * echo \xff", wantReason: "executor.command[4]: must be valid UTF-8"},
		{name: "empty mailto is quiet", crontab: "MAILTO=\"\"\n@daily true", wantCommand: []string{EnvProgram, "MAILTO=", "/bin/sh", "-c", "true"}},
		{name: "run once policy", crontab: "@hourly true", opts: Options{MisfirePolicy: api.MisfireRunOnce}, wantCommand: []string{"/bin/sh", "-c", "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Parse(strings.NewReader(tt.crontab), tt.opts)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			switch {
			case tt.wantReason == "" && len(res.Skipped) != 0:
				t.Errorf("Skipped: got %+v, want none", res.Skipped)
			case tt.wantReason != "" && (len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, tt.wantReason)):
				t.Errorf("Skipped: got %+v, want one with a reason containing %q", res.Skipped, tt.wantReason)
			}
			if tt.wantCommand == nil {
				if len(res.Jobs) != 0 {
					t.Errorf("Jobs: got %+v, want none", res.Jobs)
				}
				return
			}
			if len(res.Jobs) != 1 {
				t.Fatalf("Jobs: got %d (skipped %+v), want 1", len(res.Jobs), res.Skipped)
			}
			j := res.Jobs[0].Job
			if want := withCronPath(tt.wantCommand); !slices.Equal(j.Executor.Command, want) {
				t.Errorf("Command: got %q, want %q", j.Executor.Command, want)
			}
			if tt.wantTZ != "" && j.Timezone != tt.wantTZ {
				t.Errorf("Timezone: got %q, want %q", j.Timezone, tt.wantTZ)
			}
			if want := tt.opts.MisfirePolicy; want != "" && j.MisfirePolicy != want {
				t.Errorf("MisfirePolicy: got %q, want %q", j.MisfirePolicy, want)
			}
		})
	}
}

// withCronPath returns the command line cmd with cron's PATH
// (DefaultPath) passed through EnvProgram, as Parse makes it for a
// crontab that sets none.
func withCronPath(cmd []string) []string {
	if len(cmd) > 0 && cmd[0] != EnvProgram {
		return append([]string{EnvProgram, "PATH=" + DefaultPath}, cmd...)
	}
	for _, a := range cmd {
		if strings.HasPrefix(a, "PATH=") {
			return cmd
		}
	}
	i := slices.Index(cmd, "/bin/sh")
	return slices.Insert(slices.Clone(cmd), i, "PATH="+DefaultPath)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		opts Options
		want error
	}{
		{name: "unknown time zone", opts: Options{Timezone: "Nowhere"}, want: ErrInvalidOptions},
		{name: "local time zone", opts: Options{Timezone: "Local"}, want: ErrInvalidOptions},
		{name: "long prefix", opts: Options{IDPrefix: strings.Repeat("p", 101)}, want: ErrInvalidOptions},
		{name: "prefix with newline", opts: Options{IDPrefix: "a\nb"}, want: ErrInvalidOptions},
		{name: "prefix with trailing slash", opts: Options{IDPrefix: "team/"}, want: ErrInvalidOptions},
		{name: "prefix with zero-width space", opts: Options{IDPrefix: "cron\u200btab"}, want: ErrInvalidOptions},
		{name: "worker user with a slash", opts: Options{WorkerUser: "/root"}, want: ErrInvalidOptions},
		{name: "unknown misfire policy", opts: Options{MisfirePolicy: "later"}, want: ErrInvalidOptions},
		{name: "line too long", in: "* * * * * echo " + strings.Repeat("x", MaxLineBytes), want: ErrLineTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.in), tt.opts)
			if !errors.Is(err, tt.want) {
				t.Errorf("Parse: got %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("read error", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := Parse(iotest.ErrReader(boom), Options{})
		if !errors.Is(err, boom) {
			t.Errorf("Parse: got %v, want it to wrap %v", err, boom)
		}
	})
}

func TestSlug(t *testing.T) {
	tests := []struct {
		command string
		want    string
	}{
		{"/usr/local/bin/backup.sh --full", "backup-sh-full"},
		{"cd /srv && make", "cd-srv-make"},
		{"   ", ""},
		{"!!! ???", ""},
		{"ÜBER täglich", "ber-t-glich"},
		{strings.Repeat("abc ", 30), "abc-abc-abc-abc-abc-abc-abc-abc-abc-abc"},
		{"./run", "run"},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			got := slug(tt.command)
			if got != tt.want {
				t.Errorf("slug(%q): got %q, want %q", tt.command, got, tt.want)
			}
			if len(got) > maxSlugBytes {
				t.Errorf("slug(%q): got %d bytes, want at most %d", tt.command, len(got), maxSlugBytes)
			}
		})
	}
}

// TestParseStableIDs checks that IDs are the same on every parse and
// unique within one.
func TestParseStableIDs(t *testing.T) {
	crontab := strings.Repeat("* * * * * echo same\n", 50)
	a, err := Parse(strings.NewReader(crontab), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(strings.NewReader(crontab), Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for i := range a.Jobs {
		id := a.Jobs[i].Job.ID
		if id != b.Jobs[i].Job.ID {
			t.Errorf("Jobs[%d].ID: got %q then %q, want the same", i, id, b.Jobs[i].Job.ID)
		}
		if seen[id] {
			t.Errorf("ID %q: got twice, want unique", id)
		}
		seen[id] = true
	}
	if len(seen) != 50 {
		t.Errorf("distinct IDs: got %d, want 50", len(seen))
	}
}
