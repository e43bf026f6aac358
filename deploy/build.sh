#!/bin/sh
# Builds the release binary of jobfleet: static (CGO off), with trimmed
# paths, stripped, and the version and commit set at link time (printed by
# `jobfleet version`, exported as jobfleet_build_info). The container
# image's build stage runs exactly this script, and the deploy module's
# tests run it too.
#
#   VERSION  release version (default: git describe, else "dev")
#   COMMIT   commit it is built from (default: git rev-parse HEAD, else "unknown")
#   OUT      output file (default: jobfleet in the repository's root;
#            a relative path is taken from the repository's root)
#   GOOS, GOARCH as for go build (cross-compiling needs nothing else: no cgo)
set -eu
cd "$(dirname "$0")/.."
pkg=github.com/jobfleet/jobfleet/internal/buildinfo
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
OUT=${OUT:-jobfleet}
for v in "$VERSION" "$COMMIT"; do
	case $v in
	'' | *[!A-Za-z0-9._+-]*)
		echo "build.sh: VERSION and COMMIT may hold only letters, digits and . _ + - (got '$v')" >&2
		exit 2
		;;
	esac
done
CGO_ENABLED=0 exec go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X $pkg.version=$VERSION -X $pkg.commit=$COMMIT" \
	-o "$OUT" ./cmd/jobfleet
