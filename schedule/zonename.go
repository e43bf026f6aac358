package schedule

import (
	"fmt"
	"path"
	"strings"
	"sync"
)

// The names of the IANA time zone database that a job may name. They are
// the names of the database as Go ships it (zoneNames, generated from
// $GOROOT/lib/time/zoneinfo.zip by TestZoneNames), so the set is the same
// on every machine whatever zone files its system has: every Zone and
// every Link of the database (backward-compatible names such as
// "US/Eastern" and "Asia/Calcutta" are Links, and name the same rules as
// their targets), except "Factory", a placeholder that is no place's time.
//
// Not names of the database, and so refused: the "right/" and "posix/"
// trees and "posixrules", which are build variants of it (a "right/" zone
// counts leap seconds and computes instants 27 s off); "Local"; paths
// ("/etc/localtime", "../x", "Europe//Berlin", "Europe/Berlin/"); and any
// spelling in another case ("europe/berlin").

// zoneSet holds zoneNames as a set, built on first use.
var zoneSet = sync.OnceValue(func() map[string]struct{} {
	names := strings.Fields(zoneNames)
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		if n != "Factory" {
			set[n] = struct{}{}
		}
	}
	return set
})

// CheckZoneName checks that name names a zone of the IANA time zone
// database exactly as the database spells it (see above): "" and "UTC"
// are UTC; "Europe/Berlin" and "US/Eastern" are fine; "right/UTC",
// "posixrules", "Factory", "Local", "Europe//Berlin", "europe/berlin" and
// file paths are not. The error wraps ErrUnknownZone and suggests the
// name meant when it can. It does not load the zone (see LoadLocation);
// zones already stored under other names still load, so jobs saved before
// this rule stay readable.
func CheckZoneName(name string) error {
	if name == "" {
		return nil
	}
	if _, ok := zoneSet()[name]; ok {
		return nil
	}
	if want := suggestZone(name); want != "" {
		return fmt.Errorf("%w %q: not a zone name of the IANA database as written; did you mean %q?", ErrUnknownZone, name, want)
	}
	return fmt.Errorf("%w %q: want a zone name of the IANA database, such as \"Europe/Berlin\" or \"America/New_York\"", ErrUnknownZone, name)
}

// suggestZone returns the zone name that name probably means: the same
// name in the database's case, without a "right/" or "posix/" tree,
// without doubled or trailing slashes, or "" if none.
func suggestZone(name string) string {
	clean := strings.TrimPrefix(path.Clean("/"+name), "/")
	for _, tree := range []string{"right/", "posix/"} {
		clean = strings.TrimPrefix(clean, tree)
	}
	if clean == "posixrules" {
		return "America/New_York" // what posixrules is a copy of
	}
	for n := range zoneSet() {
		if strings.EqualFold(n, clean) {
			return n
		}
	}
	return ""
}
