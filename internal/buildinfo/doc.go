// Package buildinfo tells which build of jobfleet is running: its
// version, the commit it was built from, and the Go version that built
// it, for `jobfleet version`, the start-up log line and the
// jobfleet_build_info metric.
//
// Guarantees:
//
//   - A release build sets the version and commit at link time
//     (deploy/build.sh passes -ldflags "-X <this package>.version=…
//     -X <this package>.commit=…"); those values win.
//   - Without them (go build, go install, go run) the version is the
//     module version that the go command recorded ("(devel)" for a build
//     from a work tree) and the commit is the VCS revision it stamped,
//     marked modified when the work tree had uncommitted changes.
//   - The Go version is always the runtime's.
//
// Not guaranteed: that a version names a tag (it is whatever the builder
// passed), or a commit at all: a build without VCS information and
// without link flags reports "unknown".
package buildinfo
