package crontab

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/jobfleet/jobfleet/store"
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
	env := []string{EnvProgram, "SHELL=/bin/bash", "PATH=/usr/local/bin:/usr/bin:/bin"}
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
		{7, "crontab-7-healthcheck-sh-quiet-dev-null-2-1", "*/5 * * * *", "UTC",
			withEnv("/bin/bash", "-c", "/usr/local/bin/healthcheck.sh --quiet >/dev/null 2>&1")},
		{8, "crontab-8-cd-srv-app-backup-sh-full-nightly-backup", "0 2 * * *", "UTC",
			withEnv("/bin/bash", "-c", "cd /srv/app && ./backup.sh --full # nightly backup")},
		{9, "crontab-9-php-var-www-artisan-schedule-run", "@hourly", "UTC",
			withEnv("/bin/bash", "-c", "/usr/bin/php /var/www/artisan schedule:run")},
		{11, "crontab-11-tar-czf-backups-home-date-y-m-d-tgz-home", "30 6 * * mon-fri", "UTC",
			withEnv("/bin/bash", "-c", "tar czf /backups/home-$(date +%Y%m%d).tgz /home")},
		{14, "crontab-14-echo-greeting", "0 12 * * 7", "UTC",
			withEnv("GREETING=  hello world  ", "/bin/bash", "-c", `echo "$GREETING"`)},
		{21, "crontab-21-monthly-report", "0 9 1 * *", "Europe/Berlin",
			withEnv("GREETING=  hello world  ", "/bin/bash", "-c", "/usr/local/bin/monthly-report")},
		{26, "crontab-26-weekly", "15 3 * * 0", "America/New_York",
			withEnv("GREETING=  hello world  ", "TZ=America/New_York", "/bin/bash", "-c", "/usr/local/bin/weekly")},
		{29, "crontab-29-echo-unterminated", "@daily", "America/New_York",
			withEnv("GREETING=  hello world  ", "TZ=America/New_York", "/bin/bash", "-c", "echo 'unterminated")},
	}
	wantSkipped := []struct {
		line   int
		reason string
	}{
		{2, "MAILTO ignored"},
		{10, "@reboot is not supported"},
		{12, "unescaped % in the command is not supported"},
		{15, `schedule: "0 0 30 2 *" never fires`},
		{16, `schedule: invalid cron expression "61 * * * *"`},
		{17, `schedule: invalid cron expression "* * * * echo"`},
		{18, "missing command"},
		{19, `unknown special string "@every"`},
		{22, `unknown time zone "Mars/Olympus"; the job lines it applies to are skipped`},
		{23, `time zone "Mars/Olympus" set on line 22 is unknown`},
		{27, "RANDOM_DELAY ignored"},
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
			if e.Job.Executor.Type != store.ExecutorShell {
				t.Errorf("line %d executor type: got %q, want %q", w.line, e.Job.Executor.Type, store.ExecutorShell)
			}
			if !slices.Equal(e.Job.Executor.Command, w.command) {
				t.Errorf("line %d Command:\n got %q\nwant %q", w.line, e.Job.Executor.Command, w.command)
			}
			if e.Job.MisfirePolicy != store.MisfireSkip {
				t.Errorf("line %d MisfirePolicy: got %q, want %q", w.line, e.Job.MisfirePolicy, store.MisfireSkip)
			}
			if err := e.Job.Validate(store.DefaultLimits()); err != nil {
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
	"@daily\r\n"

func TestParseSystemCrontab(t *testing.T) {
	res, err := Parse(strings.NewReader(systemCrontab), Options{SystemFormat: true, IDPrefix: "etc-crontab"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	env := []string{EnvProgram, "SHELL=/bin/sh", "PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin", "/bin/sh", "-c"}
	wantJobs := []Entry{
		{Line: 5, User: "root", Job: store.Job{ID: "etc-crontab-5-cd-run-parts-report-etc-cron-hourly", Schedule: "17 * * * *",
			Executor: store.Executor{Command: append(slices.Clone(env), "cd / && run-parts --report /etc/cron.hourly")}}},
		{Line: 6, User: "root", Job: store.Job{ID: "etc-crontab-6-test-x-usr-sbin-anacron-cd-run-parts-rep", Schedule: "25 6 * * *",
			Executor: store.Executor{Command: append(slices.Clone(env), "test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )")}}},
		{Line: 7, User: "www-data", Job: store.Job{ID: "etc-crontab-7-php-var-www-cron-php", Schedule: "@weekly",
			Executor: store.Executor{Command: append(slices.Clone(env), "/usr/bin/php /var/www/cron.php")}}},
	}
	if len(res.Jobs) != len(wantJobs) {
		t.Fatalf("len(Jobs): got %d, want %d: %+v", len(res.Jobs), len(wantJobs), res.Jobs)
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
		{Line: 8, Text: "0 4 * * * root", Reason: "missing command"},
		{Line: 9, Text: "@daily", Reason: "missing user and command"},
	}
	if !slices.Equal(res.Skipped, wantSkipped) {
		t.Errorf("Skipped:\n got %+v\nwant %+v", res.Skipped, wantSkipped)
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
		{name: "cron tz beats tz", crontab: "TZ=Asia/Tokyo\nCRON_TZ=Europe/Paris\n* * * * * date", wantCommand: []string{EnvProgram, "TZ=Asia/Tokyo", "/bin/sh", "-c", "date"}, wantTZ: "Europe/Paris"},
		{name: "empty cron tz resets", crontab: "CRON_TZ=Europe/Paris\nCRON_TZ=\n* * * * * date", opts: Options{Timezone: "Asia/Tokyo"}, wantCommand: []string{"/bin/sh", "-c", "date"}, wantTZ: "Asia/Tokyo"},
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
		{name: "invalid utf-8 command", crontab: "* * * * * echo \xff", wantReason: "executor.command[2]: must be valid UTF-8"},
		{name: "empty mailto is quiet", crontab: "MAILTO=\"\"\n@daily true", wantCommand: []string{"/bin/sh", "-c", "true"}},
		{name: "run once policy", crontab: "@hourly true", opts: Options{MisfirePolicy: store.MisfireRunOnce}, wantCommand: []string{"/bin/sh", "-c", "true"}},
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
			if !slices.Equal(j.Executor.Command, tt.wantCommand) {
				t.Errorf("Command: got %q, want %q", j.Executor.Command, tt.wantCommand)
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
