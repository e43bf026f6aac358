package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/jobfleet/jobfleet/internal/crontab"
	"github.com/jobfleet/jobfleet/schedule"
)

// zoneSources are where localZone looks for this machine's time zone; a
// variable so that tests can give their own.
var zoneSources = struct {
	getenv   func(string) (string, bool)
	readFile func(string) ([]byte, error)
	readlink func(string) (string, error)
}{os.LookupEnv, os.ReadFile, os.Readlink}

// localZone names this machine's time zone, the zone its cron reads
// crontabs in, as an IANA name, and says where it found it: $TZ (set and
// empty is UTC, as for the C library), /etc/timezone, or the zoneinfo
// file /etc/localtime links to. It fails when none names a zone of the
// IANA database: the import must then be given --timezone, rather than
// read the schedules in a zone the crontab never ran in.
func localZone() (zone, from string, err error) {
	var tried []string
	check := func(name, where string) bool {
		if schedule.CheckZoneName(name) != nil {
			tried = append(tried, fmt.Sprintf("%s says %q", where, name))
			return false
		}
		if _, err := schedule.LoadLocation(name); err != nil {
			tried = append(tried, fmt.Sprintf("%s says %q, which does not load", where, name))
			return false
		}
		zone, from = name, where
		return true
	}
	if tz, ok := zoneSources.getenv("TZ"); ok {
		tz = strings.TrimPrefix(tz, ":")
		if tz == "" {
			return "UTC", "$TZ (empty)", nil
		}
		if _, rest, ok := strings.Cut(tz, "/zoneinfo/"); ok && filepath.IsAbs(tz) {
			tz = rest
		}
		if check(tz, "$TZ") {
			return zone, from, nil
		}
	}
	if b, err := zoneSources.readFile("/etc/timezone"); err == nil {
		if name := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]); name != "" && check(name, "/etc/timezone") {
			return zone, from, nil
		}
	}
	if target, err := zoneSources.readlink("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(target, "zoneinfo/"); ok && check(name, "/etc/localtime") {
			return zone, from, nil
		}
		tried = append(tried, fmt.Sprintf("/etc/localtime links to %q", target))
	}
	why := "neither $TZ, /etc/timezone nor /etc/localtime names one"
	if len(tried) > 0 {
		why = strings.Join(tried, "; ")
	}
	return "", "", fmt.Errorf("cannot name this machine's time zone (%s): give --timezone, the IANA zone of the machine whose cron ran the crontab (such as Europe/Berlin; UTC if it ran in UTC)", why)
}

// notFileWord matches what defaultPrefix replaces in a file name: runs of
// characters other than letters, digits, '.', '_' and '-'.
var notFileWord = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// defaultPrefix returns the ID prefix of a crontab's jobs when --prefix
// is not given: crontab/<file name> (its base name, runs of characters
// other than letters, digits, '.', '_' and '-' made '-', at most 64
// bytes; "stdin" for "-"), so that importing (and pruning) one file
// never touches another file's jobs.
func defaultPrefix(file string) string {
	name := "stdin"
	if file != "-" {
		name = notFileWord.ReplaceAllString(filepath.Base(file), "-")
		name = strings.Trim(name, ".-")
		if len(name) > 64 {
			name = name[:64]
		}
		if name == "" {
			name = "file"
		}
	}
	return crontab.DefaultIDPrefix + "/" + name
}
