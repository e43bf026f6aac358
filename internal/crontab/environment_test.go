package crontab

import (
	"slices"
	"strings"
	"testing"
)

// TestParseEnvironmentLines: each environment line means what it means to
// cronie. Every assignment is in the environment of the commands of the
// lines after it; CRON_TZ is the zone of their schedules (a later one for
// the lines after it), TZ only their environment; SHELL runs them; PATH
// defaults to cron's; LOGNAME and USER are cron's to set; what cron does
// with MAILTO, MAILFROM, CONTENT_TYPE, CONTENT_TRANSFER_ENCODING,
// RANDOM_DELAY and MLS_LEVEL is reported as not reproduced.
func TestParseEnvironmentLines(t *testing.T) {
	type job struct {
		zone     string
		zoneLine int
		env      []string // the assignments the command gets, in order
		shell    string   // "" is DefaultShell
	}
	tests := []struct {
		name    string
		crontab string
		jobs    []job
		reports map[int]string // line -> part of its reason
	}{
		{name: "no assignment: cron's PATH", crontab: "@daily a",
			jobs: []job{{zone: "Asia/Tokyo", env: []string{"PATH=/usr/bin:/bin"}}}},
		{name: "CRON_TZ applies to the lines after it, a later one to the lines after that",
			crontab: "@daily a\nCRON_TZ=Europe/Berlin\n@daily b\nCRON_TZ=America/New_York\n@daily c\nCRON_TZ=\n@daily d",
			jobs: []job{
				{zone: "Asia/Tokyo", env: []string{"PATH=/usr/bin:/bin"}},
				{zone: "Europe/Berlin", zoneLine: 2, env: []string{"CRON_TZ=Europe/Berlin", "PATH=/usr/bin:/bin"}},
				{zone: "America/New_York", zoneLine: 4, env: []string{"CRON_TZ=America/New_York", "PATH=/usr/bin:/bin"}},
				{zone: "Asia/Tokyo", env: []string{"CRON_TZ=", "PATH=/usr/bin:/bin"}},
			}},
		{name: "TZ after CRON_TZ is the command's zone only", crontab: "CRON_TZ=Europe/Berlin\nTZ=UTC\n@daily a",
			jobs:    []job{{zone: "Europe/Berlin", zoneLine: 1, env: []string{"CRON_TZ=Europe/Berlin", "TZ=UTC", "PATH=/usr/bin:/bin"}}},
			reports: map[int]string{2: "TZ is the commands' time zone, not their schedule's: it is passed to the commands of the lines after it, whose schedules stay in Europe/Berlin"}},
		{name: "a bare TZ leaves the schedule in the crontab's zone", crontab: "TZ=America/Chicago\n@daily a",
			jobs:    []job{{zone: "Asia/Tokyo", env: []string{"TZ=America/Chicago", "PATH=/usr/bin:/bin"}}},
			reports: map[int]string{1: "whose schedules stay in Asia/Tokyo"}},
		{name: "an unknown CRON_TZ skips the lines it applies to", crontab: "CRON_TZ=Mars/Olympus\n@daily a\nCRON_TZ=UTC\n@daily b",
			jobs:    []job{{zone: "UTC", zoneLine: 3, env: []string{"CRON_TZ=UTC", "PATH=/usr/bin:/bin"}}},
			reports: map[int]string{1: `unknown time zone "Mars/Olympus"`, 2: `time zone "Mars/Olympus" set on line 1 is unknown`}},
		{name: "SHELL runs the commands and is in their environment", crontab: "SHELL=/bin/bash\n@daily a",
			jobs: []job{{zone: "Asia/Tokyo", shell: "/bin/bash", env: []string{"SHELL=/bin/bash", "PATH=/usr/bin:/bin"}}}},
		{name: "a relative SHELL is refused", crontab: "SHELL=bash\n@daily a",
			jobs:    []job{{zone: "Asia/Tokyo", env: []string{"PATH=/usr/bin:/bin"}}},
			reports: map[int]string{1: `SHELL ignored: "bash" is not an absolute path`}},
		{name: "PATH replaces cron's", crontab: "PATH=/opt/bin:/usr/bin\n@daily a",
			jobs: []job{{zone: "Asia/Tokyo", env: []string{"PATH=/opt/bin:/usr/bin"}}}},
		{name: "PATH set after a line is not that line's", crontab: "@daily a\nPATH=/opt/bin\n@daily b",
			jobs: []job{{zone: "Asia/Tokyo", env: []string{"PATH=/usr/bin:/bin"}}, {zone: "Asia/Tokyo", env: []string{"PATH=/opt/bin"}}}},
		{name: "HOME is the commands'", crontab: "HOME=/srv/app\n@daily a",
			jobs: []job{{zone: "Asia/Tokyo", env: []string{"HOME=/srv/app", "PATH=/usr/bin:/bin"}}}},
		{name: "mail settings are reported and passed", crontab: "MAILTO=ops@example.com\nMAILFROM=cron@example.com\nCONTENT_TYPE=text/html\nCONTENT_TRANSFER_ENCODING=8bit\n@daily a",
			jobs:    []job{{zone: "Asia/Tokyo", env: []string{"MAILTO=ops@example.com", "MAILFROM=cron@example.com", "CONTENT_TYPE=text/html", "CONTENT_TRANSFER_ENCODING=8bit", "PATH=/usr/bin:/bin"}}},
			reports: map[int]string{1: "MAILTO not reproduced: cron mails", 2: "MAILFROM not reproduced", 3: "CONTENT_TYPE not reproduced", 4: "CONTENT_TRANSFER_ENCODING not reproduced"}},
		{name: "an empty MAILTO is what jobfleet does", crontab: "MAILTO=\n@daily a",
			jobs: []job{{zone: "Asia/Tokyo", env: []string{"MAILTO=", "PATH=/usr/bin:/bin"}}}},
		{name: "RANDOM_DELAY is reported and passed", crontab: "RANDOM_DELAY=30\n@daily a",
			jobs:    []job{{zone: "Asia/Tokyo", env: []string{"RANDOM_DELAY=30", "PATH=/usr/bin:/bin"}}},
			reports: map[int]string{1: "RANDOM_DELAY not reproduced: cron starts each job up to 30 minutes late at random"}},
		{name: "MLS_LEVEL is reported and passed", crontab: "MLS_LEVEL=SystemHigh\n@daily a",
			jobs:    []job{{zone: "Asia/Tokyo", env: []string{"MLS_LEVEL=SystemHigh", "PATH=/usr/bin:/bin"}}},
			reports: map[int]string{1: "MLS_LEVEL not reproduced"}},
		{name: "LOGNAME and USER are cron's to set", crontab: "LOGNAME=alice\nUSER=alice\n@daily a",
			jobs:    []job{{zone: "Asia/Tokyo", env: []string{"PATH=/usr/bin:/bin"}}},
			reports: map[int]string{1: "LOGNAME ignored, as cron ignores it", 2: "USER ignored, as cron ignores it"}},
		{name: "any other variable is the commands'", crontab: "GREETING=hello\nA = 'x y'\n@daily a",
			jobs: []job{{zone: "Asia/Tokyo", env: []string{"GREETING=hello", "A=x y", "PATH=/usr/bin:/bin"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Parse(strings.NewReader(tt.crontab+"\n"), Options{Timezone: "Asia/Tokyo"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Jobs) != len(tt.jobs) {
				t.Fatalf("%d jobs (skipped %+v), want %d", len(res.Jobs), res.Skipped, len(tt.jobs))
			}
			for i, w := range tt.jobs {
				got := res.Jobs[i]
				if got.Job.Timezone != w.zone || got.ZoneLine != w.zoneLine {
					t.Errorf("job %d: zone %q from line %d, want %q from line %d", i, got.Job.Timezone, got.ZoneLine, w.zone, w.zoneLine)
				}
				shell := w.shell
				if shell == "" {
					shell = DefaultShell
				}
				want := append(append([]string{EnvProgram}, w.env...), shell, "-c", strings.Fields(strings.Split(tt.crontab, "\n")[got.Line-1])[1])
				if !slices.Equal(got.Job.Executor.Command, want) {
					t.Errorf("job %d: command\n got %q\nwant %q", i, got.Job.Executor.Command, want)
				}
			}
			if len(res.Skipped) != len(tt.reports) {
				t.Fatalf("reported %+v, want lines %v", res.Skipped, tt.reports)
			}
			for _, p := range res.Skipped {
				if want, ok := tt.reports[p.Line]; !ok || !strings.Contains(p.Reason, want) {
					t.Errorf("line %d reported %q, want %q", p.Line, p.Reason, want)
				}
			}
		})
	}
}
