#!/bin/sh
# Builds a release of jobfleet: static binaries for linux/amd64 and
# linux/arm64 (build.sh: CGO off, -trimpath), a SHA256SUMS file of them,
# and with IMAGES=1 the container image of each (image.sh: FROM scratch,
# no registry contacted). Release from a clean checkout of a version tag:
#
#   git tag -a v0.1.0 -m v0.1.0 && sh deploy/release.sh
#   # dist/v0.1.0/jobfleet-v0.1.0-linux-amd64, …-linux-arm64, SHA256SUMS
#   (cd dist/v0.1.0 && sha256sum -c SHA256SUMS)
#
#   VERSION  the version, for a release outside git (a source archive);
#            in git it defaults to the tag of HEAD, and a checkout that
#            is not exactly a v* tag, or has uncommitted changes, is
#            refused
#   COMMIT   the commit, outside git (passed to build.sh)
#   DIST     output folder (default: dist in the repository's root); the
#            release goes to DIST/VERSION, replacing what was there
#   ARCHS    the linux architectures (default: "amd64 arm64")
#   IMAGES   1: also build the images jobfleet:VERSION-linux-ARCH
#            (ENGINE as for image.sh)
set -eu
cd "$(dirname "$0")/.."
if [ -z "${VERSION:-}" ]; then
	if ! git rev-parse --git-dir >/dev/null 2>&1; then
		echo "release.sh: not a git checkout: set VERSION (and COMMIT)" >&2
		exit 2
	fi
	if ! VERSION=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null); then
		echo "release.sh: HEAD ($(git rev-parse --short HEAD)) has no v* tag: tag it (git tag -a v0.1.0 -m v0.1.0) or set VERSION" >&2
		exit 2
	fi
	if [ -n "$(git status --porcelain)" ]; then
		echo "release.sh: the work tree has uncommitted changes (git status): release $VERSION from a clean checkout" >&2
		exit 2
	fi
fi
case $VERSION in
v[0-9]*) ;;
*)
	echo "release.sh: VERSION must look like v1.2.3 (got '$VERSION')" >&2
	exit 2
	;;
esac
export VERSION
dist=${DIST:-dist}/$VERSION
rm -rf "$dist"
mkdir -p "$dist"
names=
for arch in ${ARCHS:-amd64 arm64}; do
	name=jobfleet-$VERSION-linux-$arch
	GOOS=linux GOARCH=$arch OUT=$dist/$name sh deploy/build.sh
	names="$names $name"
done
if command -v sha256sum >/dev/null; then
	(cd "$dist" && sha256sum $names >SHA256SUMS)
else
	(cd "$dist" && shasum -a 256 $names >SHA256SUMS)
fi
if [ "${IMAGES:-}" = 1 ]; then
	for arch in ${ARCHS:-amd64 arm64}; do
		sh deploy/image.sh "$dist/jobfleet-$VERSION-linux-$arch" "jobfleet:$VERSION-linux-$arch"
	done
fi
echo "release $VERSION in $dist:"
cat "$dist/SHA256SUMS"
