package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfleet/jobfleet/api"
)

// userCrontab is a realistic user crontab with the odd lines real ones
// have; the comments at the right are not part of it.
var userCrontab = strings.Join([]string{
	"# m h  dom mon dow   command",      // 1
	"MAILTO=ops@example.com",            // 2: ignored
	"SHELL=/bin/bash",                   // 3
	"PATH=/usr/local/bin:/usr/bin:/bin", // 4
	"",                                  // 5
	"*/5 * * * * /usr/local/bin/healthcheck.sh --quiet >/dev/null 2>&1", // 6
	"0 2 * * * cd /srv/app && ./backup.sh --full # nightly backup",      // 7
	"@hourly\t/usr/bin/php /var/www/artisan schedule:run",               // 8
	"@reboot /usr/local/bin/start-tunnel",                               // 9: unsupported
	`30 6 * * 1-5 tar czf /backups/home-$(date +\%Y\%m\%d).tgz /home`,   // 10
	`0 0 * * * echo "%s" | mail -s report root`,                         // 11: unescaped %
	"61 * * * * echo bad minute",                                        // 12: bad field
	"* * * * echo too few fields",                                       // 13: bad field
	"0 12 * * 7 echo sunday",                                            // 14: day 7 is Sunday
	"CRON_TZ=Mars/Olympus",                                              // 15: unknown zone
	"0 9 2 * * /usr/local/bin/never-converted",                          // 16: in that zone
	"CRON_TZ=Europe/Berlin",                                             // 17
	"0 9 1 * * /usr/local/bin/monthly-report",                           // 18
	"0 1 * * *", // 19: no command
}, "\n") + "\n"

// fakeZone makes this machine's time zone, as import-crontab finds it,
// zone (in /etc/timezone) for the test.
func fakeZone(t *testing.T, zone string) {
	t.Helper()
	saved := zoneSources
	t.Cleanup(func() { zoneSources = saved })
	zoneSources.getenv = func(string) (string, bool) { return "", false }
	zoneSources.readFile = func(name string) ([]byte, error) {
		if name == "/etc/timezone" && zone != "" {
			return []byte(zone + "\n"), nil
		}
		return nil, os.ErrNotExist
	}
	zoneSources.readlink = func(string) (string, error) { return "", os.ErrNotExist }
}

func TestImportCrontabCommand(t *testing.T) {
	c := newCLIEnv(t)
	fakeZone(t, "Asia/Tokyo")
	file := writeFile(t, "crontab", userCrontab)

	out := c.mustRun("import-crontab", file)
	for _, want := range []string{
		"6 jobs converted, 8 lines not converted or ignored",
		"IDs under crontab/crontab/ (from the file's name); schedules before any CRON_TZ line in Asia/Tokyo (this machine's zone, from /etc/timezone)",
		"crontab/crontab/echo-sunday-",
		"crontab/crontab/healthcheck-sh-quiet-dev-null-2-1-",
		"crontab/crontab/cd-srv-app-backup-sh-full-nightly-backup-",
		"crontab/crontab/php-var-www-artisan-schedule-run-",
		"crontab/crontab/tar-czf-backups-home-date-y-m-d-tgz-home-",
		"crontab/crontab/monthly-report-",
		"Europe/Berlin (CRON_TZ, line 17)",
		"Asia/Tokyo",
		"TIMEOUT",
		"none",
		"line 2: MAILTO not reproduced",
		"line 9: @reboot is not supported",
		"line 11: unescaped % in the command is not supported",
		"line 12: schedule:",
		"line 13: schedule:",
		"line 15: unknown time zone",
		`line 16: time zone "Mars/Olympus" set on line 15 is unknown`,
		"line 19: missing command",
		"      @reboot /usr/local/bin/start-tunnel",
		"Dry run: nothing was changed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("import-crontab: output lacks %q:\n%s", want, out)
		}
	}
	if ids := c.ids(); len(ids) != 0 {
		t.Fatalf("import-crontab without --apply created jobs %q", ids)
	}

	if !strings.Contains(out, "6 to create, 0 to update, 0 unchanged, 0 to delete") {
		t.Errorf("import-crontab dry run: output lacks the plan:\n%s", out)
	}

	out = c.mustRun("import-crontab", file, "--apply")
	if got := strings.Count(out, "created"); got != 6 {
		t.Errorf("import-crontab --apply: got %d \"created\", want 6:\n%s", got, out)
	}
	if strings.Contains(out, "Dry run") {
		t.Errorf("import-crontab --apply: output says dry run:\n%s", out)
	}
	ids := c.ids()
	if len(ids) != 6 {
		t.Fatalf("after --apply: got jobs %q, want 6", ids)
	}
	monthly := ""
	for _, id := range ids {
		if strings.HasPrefix(id, "crontab/crontab/monthly-report-") {
			monthly = id
		}
	}
	j, err := c.get(monthly)
	if err != nil {
		t.Fatal(err)
	}
	wantCmd := []string{"/usr/bin/env", "MAILTO=ops@example.com", "SHELL=/bin/bash", "PATH=/usr/local/bin:/usr/bin:/bin", "CRON_TZ=Europe/Berlin", "/bin/bash", "-c", "/usr/local/bin/monthly-report"}
	if j.Schedule != "0 9 1 * *" || j.Timezone != "Europe/Berlin" || !slices.Equal(j.Executor.Command, wantCmd) || j.MisfirePolicy != api.MisfireSkip || j.Timeout != api.NoTimeout {
		t.Errorf("imported job: got schedule %q zone %q command %q misfire %q timeout %v", j.Schedule, j.Timezone, j.Executor.Command, j.MisfirePolicy, j.Timeout)
	}

	// Importing the same file again, with a comment added at the top,
	// changes nothing: same IDs, nothing created twice.
	again := writeFile(t, "crontab", "# managed by ops\n"+userCrontab)
	out = c.mustRun("import-crontab", again, "--apply", "-o", "json")
	var rep importReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("import-crontab -o json: %v\n%s", err, out)
	}
	if len(rep.Jobs) != 6 || len(rep.Results) != 6 || !rep.Applied || len(rep.Stale) != 0 {
		t.Errorf("import-crontab -o json: got %d jobs, %d results, %d stale, applied %v", len(rep.Jobs), len(rep.Results), len(rep.Stale), rep.Applied)
	}
	for _, r := range rep.Results {
		if r.Result != "unchanged" {
			t.Errorf("second import: job %q %s %s, want unchanged", r.ID, r.Result, r.Error)
		}
	}
	var skipped []int
	for _, p := range rep.Skipped {
		skipped = append(skipped, p.Line)
	}
	if want := []int{3, 10, 12, 13, 14, 16, 17, 20}; !slices.Equal(skipped, want) {
		t.Errorf("import-crontab -o json: got skipped lines %v, want %v", skipped, want)
	}
	if after := c.ids(); !slices.Equal(after, ids) {
		t.Errorf("second import: got jobs %q, want %q", after, ids)
	}

	// The user pauses a job, edits one line's schedule and removes another.
	backup := ""
	for _, id := range ids {
		if strings.HasPrefix(id, "crontab/crontab/cd-srv-app-backup-sh-full-nightly-backup-") {
			backup = id
		}
	}
	c.mustRun("pause", backup)
	edited := strings.Replace(userCrontab, "0 2 * * * cd /srv/app", "30 3 * * * cd /srv/app", 1)
	edited = strings.Replace(edited, "@hourly\t/usr/bin/php /var/www/artisan schedule:run\n", "", 1)
	editedFile := writeFile(t, "crontab", edited)
	out = c.mustRun("import-crontab", editedFile)
	for _, want := range []string{`0 to create, 1 to update, 4 unchanged, 0 to delete, 1 no longer in the file \(kept; --prune deletes them\)`,
		`\bupdate\s+` + regexp.QuoteMeta(backup), `\bkeep\s+crontab/crontab/php-var-www-artisan-schedule-run-`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("dry run of the edited crontab: output lacks %q:\n%s", want, out)
		}
	}
	c.mustFail([]string{"import-crontab", editedFile, "--prune"}, "--prune deletes jobs: give --apply too")
	out = c.mustRun("import-crontab", editedFile, "--apply", "--prune")
	if !strings.Contains(out, "deleted") || !strings.Contains(out, "updated") {
		t.Errorf("import-crontab --apply --prune: got\n%s", out)
	}
	if got := c.ids(); len(got) != 5 || slices.ContainsFunc(got, func(id string) bool { return strings.HasPrefix(id, "crontab/crontab/php-") }) {
		t.Errorf("after --prune: got jobs %q, want 5 without the removed line's", got)
	}
	if j, err := c.get(backup); err != nil || j.Schedule != "30 3 * * *" || !j.Paused {
		t.Errorf("updated job %q: got schedule %q paused %v (%v), want the new schedule, still paused", backup, j.Schedule, j.Paused, err)
	}
}

func TestImportCrontabSystemFormat(t *testing.T) {
	c := newCLIEnv(t)
	fakeZone(t, "UTC")
	file := writeFile(t, "cron.d-app", strings.Join([]string{
		"SHELL=/bin/sh",
		"17 * * * * root cd / && run-parts --report /etc/cron.hourly",
		"25 6 * * * www-data /usr/bin/php /srv/app/cron.php",
		"@daily root",
		"47 6 * * 7 root test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.weekly )",
	}, "\n"))
	out, err := c.run("", "import-crontab", file, "--system", "--worker-user", "root", "--job-timeout", "2h", "--timezone", "America/New_York", "--prefix", "app", "--apply")
	if err != nil {
		t.Fatalf("import-crontab --system: %v\n%s", err, out)
	}
	for _, want := range []string{"2 jobs converted, 2 lines not converted", "root", "America/New_York", "2h",
		`line 3: runs as user "www-data", but the workers run commands as "root"`, "line 4: missing command"} {
		if !strings.Contains(out, want) {
			t.Errorf("import-crontab --system: output lacks %q:\n%s", want, out)
		}
	}
	ids := c.ids()
	if len(ids) != 2 || !strings.HasPrefix(ids[0], "app/cd-run-parts-report-etc-cron-hourly-") || !strings.HasPrefix(ids[1], "app/test-x-usr-sbin-anacron-cd-run-parts-rep-") {
		t.Errorf("import-crontab --system --apply: got jobs %q", ids)
	}
	if j, err := c.get(ids[1]); err != nil || j.Schedule != "47 6 * * 7" || j.Timeout != api.Duration(2*time.Hour) {
		t.Errorf("imported weekly job: got %+v, %v; want schedule 47 6 * * 7 and timeout 2h", j, err)
	}
	c.mustFail([]string{"import-crontab", file, "--job-timeout", "soon"}, "--job-timeout")

	c.mustFail([]string{"import-crontab", file, "--timezone", "Mars/Olympus"}, "timezone")
	c.mustFail([]string{"import-crontab", filepath.Join(t.TempDir(), "none")}, "no such file")

	// Without a server to compare with, the dry run still shows the
	// conversion; --apply fails.
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone.Close()
	offline := &cliEnv{t: t, url: "http://" + gone.Addr().String()}
	out, err = offline.run("", "import-crontab", file, "--system", "--worker-user", "root")
	if err != nil || !strings.Contains(out, "Not compared with the jobs on the server") || !strings.Contains(out, "crontab/cron.d-app/cd-run-parts-report-etc-cron-hourly-") {
		t.Errorf("dry run without a server: got %q, %v; want the conversion and a note", out, err)
	}
	if _, err := offline.run("", "import-crontab", file, "--system", "--worker-user", "root", "--apply"); err == nil {
		t.Error("--apply without a server: got success, want an error")
	}

	stdinOut, err := c.run("0 3 * * * /usr/bin/true\n", "import-crontab", "-")
	if err != nil || !strings.Contains(stdinOut, "crontab/stdin/true-") {
		t.Errorf("import-crontab -: got %q, %v", stdinOut, err)
	}
}
