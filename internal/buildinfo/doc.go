// Package buildinfo tells which build of jobfleet is running: its
// version, the commit it was built from, and the Go version that built
// it, for `jobfleet version`, the start-up log line and the
// jobfleet_build_info metric.
//
// Guarantees:
//
//   - The version comes from git tags. deploy/build.sh reads them with
//     git describe and links the result in (-ldflags "-X <this
//     package>.version=… -X <this package>.commit=…"): "v1.4.0" for
//     the tagged commit, "v1.4.0-3-g0123abc" three commits after it,
//     "-dirty" appended for a work tree with uncommitted changes. Link
//     flags win, so a build outside git (a source archive, a container
//     build without .git) sets them from build.sh's VERSION and COMMIT.
//   - Without link flags (go build, go install) the version is the one
//     the go command recorded: the tag of a tagged checkout, a
//     pseudo-version after it ("v1.4.1-0.20261201093000-0123456789ab"),
//     "+dirty" for uncommitted changes, the module version for go
//     install of a module version; the commit is the VCS revision it
//     stamped.
//   - The Go version is always the runtime's.
//
// Not guaranteed: that a version names a tag (it is whatever the builder
// passed), or a commit at all: the go command records nothing in a
// linked git worktree, for go run, or with -buildvcs=false; such a
// build reports "(devel)" and commit "unknown" unless link flags set
// them.
package buildinfo
