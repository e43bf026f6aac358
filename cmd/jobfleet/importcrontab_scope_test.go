package main

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jobfleet/jobfleet/internal/crontab"
)

// The default prefix is the file's: --prune on a second file never
// deletes the first file's jobs, even where both files have the same
// line.
func TestImportCrontabPruneIsPerFile(t *testing.T) {
	c := newCLIEnv(t)
	fakeZone(t, "UTC")
	alice := writeFile(t, "alice", "0 1 * * * /usr/local/bin/backup\n0 2 * * * /usr/local/bin/report\n")
	bob := writeFile(t, "bob", "0 1 * * * /usr/local/bin/backup\n0 3 * * * /usr/local/bin/cleanup\n")
	c.mustRun("import-crontab", alice, "--apply", "--prune")
	c.mustRun("import-crontab", bob, "--apply", "--prune")
	under := func(prefix string) []string {
		var out []string
		for _, id := range c.ids() {
			if strings.HasPrefix(id, prefix) {
				out = append(out, id)
			}
		}
		return out
	}
	if a, b := under("crontab/alice/"), under("crontab/bob/"); len(a) != 2 || len(b) != 2 {
		t.Fatalf("after importing both: alice's %q, bob's %q; want two each", a, b)
	}
	aliceJobs := under("crontab/alice/")

	// Bob's file loses a line; pruning it deletes that line's job only.
	bob = writeFile(t, "bob", "0 3 * * * /usr/local/bin/cleanup\n")
	out := c.mustRun("import-crontab", bob, "--apply", "--prune", "-o", "json")
	var rep importReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Stale) != 1 || !strings.HasPrefix(rep.Stale[0].ID, "crontab/bob/backup-") || rep.Stale[0].Action != actionDelete {
		t.Fatalf("stale jobs of bob's second import: %+v, want bob's backup line deleted", rep.Stale)
	}
	if got := under("crontab/alice/"); !slices.Equal(got, aliceJobs) {
		t.Fatalf("alice's jobs after pruning bob's file: %q, want %q", got, aliceJobs)
	}
	if got := under("crontab/bob/"); len(got) != 1 {
		t.Fatalf("bob's jobs: %q, want the cleanup line's", got)
	}
	// --prefix still sets the prefix, and the report says where it came from.
	out = c.mustRun("import-crontab", bob, "--prefix", "ops/bob")
	if !strings.Contains(out, "IDs under ops/bob/ (from --prefix)") || !strings.Contains(out, "ops/bob/cleanup-") {
		t.Fatalf("import with --prefix:\n%s", out)
	}
}

// Jobs a file's lines got under the former default prefix (crontab/,
// shared by every file) are listed with the file's import, kept unless
// --prune, which deletes them as the file's own prefix makes them again.
func TestImportCrontabFormerPrefix(t *testing.T) {
	c := newCLIEnv(t)
	fakeZone(t, "UTC")
	file := writeFile(t, "web", "0 1 * * * /usr/local/bin/backup\n")
	// As the former default made it.
	c.mustRun("import-crontab", file, "--prefix", crontab.DefaultIDPrefix, "--apply")
	other := writeFile(t, "other", "0 4 * * * /usr/local/bin/unrelated\n")
	c.mustRun("import-crontab", other, "--prefix", crontab.DefaultIDPrefix, "--apply")
	formers := c.ids()
	if len(formers) != 2 || !crontab.Owns(crontab.DefaultIDPrefix, formers[0]) {
		t.Fatalf("jobs under the former prefix: %q", formers)
	}
	out := c.mustRun("import-crontab", file)
	if !strings.Contains(out, "keep  crontab/backup-") || !strings.Contains(out, "former default prefix") {
		t.Fatalf("dry run after the former import:\n%s", out)
	}
	c.mustRun("import-crontab", file, "--apply", "--prune")
	ids := c.ids()
	if len(ids) != 2 || !slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(id, "crontab/web/backup-") }) ||
		!slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(id, "crontab/unrelated-") }) {
		t.Fatalf("after --prune: %q, want web's job under crontab/web/ and the other file's former job kept", ids)
	}
}

func TestLocalZone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tz       *string
		file     string
		link     string
		zone     string
		from     string
		errMatch string
	}{
		{name: "TZ", tz: ptrStr("Europe/Berlin"), file: "Asia/Tokyo", zone: "Europe/Berlin", from: "$TZ"},
		{name: "TZ with a colon", tz: ptrStr(":America/New_York"), zone: "America/New_York", from: "$TZ"},
		{name: "TZ as a path", tz: ptrStr("/usr/share/zoneinfo/Asia/Kolkata"), zone: "Asia/Kolkata", from: "$TZ"},
		{name: "empty TZ is UTC", tz: ptrStr(""), file: "Asia/Tokyo", zone: "UTC", from: "$TZ (empty)"},
		{name: "a TZ rule, then the file", tz: ptrStr("CET-1CEST"), file: "Europe/Paris", zone: "Europe/Paris", from: "/etc/timezone"},
		{name: "/etc/timezone", file: "Asia/Tokyo", link: "/usr/share/zoneinfo/UTC", zone: "Asia/Tokyo", from: "/etc/timezone"},
		{name: "/etc/localtime", link: "/usr/share/zoneinfo/Australia/Lord_Howe", zone: "Australia/Lord_Howe", from: "/etc/localtime"},
		{name: "a relative link", link: "../usr/share/zoneinfo/Etc/UTC", zone: "Etc/UTC", from: "/etc/localtime"},
		{name: "nothing names it", errMatch: "cannot name this machine's time zone (neither $TZ, /etc/timezone nor /etc/localtime names one): give --timezone"},
		{name: "a copied localtime", link: "/etc/localtime.local", errMatch: `/etc/localtime links to "/etc/localtime.local"`},
		{name: "a bad file", file: "Europe/Berlinn", errMatch: `/etc/timezone says "Europe/Berlinn"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := zoneSources
			defer func() { zoneSources = saved }()
			zoneSources.getenv = func(string) (string, bool) {
				if tc.tz == nil {
					return "", false
				}
				return *tc.tz, true
			}
			zoneSources.readFile = func(string) ([]byte, error) {
				if tc.file == "" {
					return nil, os.ErrNotExist
				}
				return []byte(tc.file + "\n"), nil
			}
			zoneSources.readlink = func(string) (string, error) {
				if tc.link == "" {
					return "", errors.New("not a link")
				}
				return tc.link, nil
			}
			zone, from, err := localZone()
			if tc.errMatch != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errMatch) {
					t.Fatalf("got %q from %q, %v; want an error with %q", zone, from, err, tc.errMatch)
				}
				return
			}
			if err != nil || zone != tc.zone || from != tc.from {
				t.Fatalf("got %q from %q, %v; want %q from %q", zone, from, err, tc.zone, tc.from)
			}
		})
	}
}

// Without --timezone the import reads schedules in this machine's zone,
// named; it refuses when the zone cannot be named, and --timezone makes
// it go on.
func TestImportCrontabZoneDefault(t *testing.T) {
	c := newCLIEnv(t)
	file := writeFile(t, "tab", "0 9 * * * /usr/local/bin/report\nCRON_TZ=Europe/Berlin\n0 9 * * * /usr/local/bin/other\n")
	fakeZone(t, "America/Chicago")
	out := c.mustRun("import-crontab", file, "-o", "json")
	var rep importReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Timezone != "America/Chicago" || len(rep.Jobs) != 2 || rep.Jobs[0].Job.Timezone != "America/Chicago" || rep.Jobs[1].Job.Timezone != "Europe/Berlin" ||
		rep.Jobs[1].ZoneFrom != "CRON_TZ, line 2" || !strings.Contains(rep.Jobs[0].ZoneFrom, "this machine's zone") {
		t.Fatalf("report %+v", rep)
	}
	fakeZone(t, "")
	c.mustFail([]string{"import-crontab", file}, "cannot name this machine's time zone")
	out = c.mustRun("import-crontab", file, "--timezone", "UTC")
	if !strings.Contains(out, "in UTC (--timezone)") {
		t.Fatalf("with --timezone UTC:\n%s", out)
	}
}

func ptrStr(s string) *string { return &s }
