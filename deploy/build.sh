#!/bin/sh
# Builds the jobfleet binary as releases ship it: static (CGO off), with
# trimmed paths, stripped. release.sh runs it once per platform, the
# container image's build stage (Dockerfile) runs it, and the deploy
# module's tests run it too.
#
# The version `jobfleet version` prints (and jobfleet_build_info exports)
# comes from git tags: in a git checkout this script asks git (git
# describe): the tag on a tagged commit (v0.1.0), the tag, the number of
# commits since and the commit after it (v0.1.0-3-g0123abc), with -dirty
# when the work tree has uncommitted changes; and the commit (git
# rev-parse). Without a v* tag it leaves the version to the go command,
# which stamps a pseudo-version (v0.0.0-20261201093000-0123456789ab) in a
# clone and none, "(devel)", in a linked worktree (go does not recognise
# one).
#
#   VERSION  the version, for a build outside git (a source archive, a
#            container build without .git); wins over git's
#   COMMIT   the commit, likewise
#   OUT      output file (default: jobfleet in the repository's root;
#            a relative path is taken from the repository's root)
#   GOOS, GOARCH as for go build (cross-compiling needs nothing else: no cgo)
set -eu
cd "$(dirname "$0")/.."
pkg=github.com/jobfleet/jobfleet/internal/buildinfo
ldflags="-s -w"
if git rev-parse --git-dir >/dev/null 2>&1; then
	VERSION=${VERSION:-$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || true)}
	COMMIT=${COMMIT:-$(git rev-parse HEAD)}
fi
for name in VERSION COMMIT; do
	eval "v=\${$name:-}"
	[ -n "$v" ] || continue
	case $v in
	*[!A-Za-z0-9._+-]*)
		echo "build.sh: VERSION and COMMIT may hold only letters, digits and . _ + - (got '$v')" >&2
		exit 2
		;;
	esac
	case $name in
	VERSION) ldflags="$ldflags -X $pkg.version=$v" ;;
	COMMIT) ldflags="$ldflags -X $pkg.commit=$v" ;;
	esac
done
# -buildvcs=auto lets the go command record what it finds of git (the
# link flags win); it overrides a -buildvcs=false in GOFLAGS.
CGO_ENABLED=0 exec go build -trimpath -buildvcs=auto -ldflags "$ldflags" -o "${OUT:-jobfleet}" ./cmd/jobfleet
