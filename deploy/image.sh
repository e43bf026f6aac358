#!/bin/sh
# Builds jobfleet's container image (Containerfile: FROM scratch) around a
# static linux binary of release.sh or build.sh. Nothing is pulled: the
# image holds the binary and the build machine's CA certificates, and no
# registry is contacted.
#
#   sh deploy/image.sh dist/v0.1.0/jobfleet-v0.1.0-linux-amd64 jobfleet:v0.1.0
#
#   ENGINE     podman, buildah or docker (default: the first on PATH)
#   CA_BUNDLE  the CA certificates to copy in (default: $SSL_CERT_FILE,
#              else Debian's /etc/ssl/certs/ca-certificates.crt, from the
#              ca-certificates package)
set -eu
if [ $# -ne 2 ]; then
	echo "usage: sh deploy/image.sh BINARY TAG" >&2
	exit 2
fi
bin=$1 tag=$2
here=$(cd "$(dirname "$0")" && pwd)
# The platform is the binary's: its ELF header's machine field.
case $(od -An -tx1 -j18 -N1 "$bin" | tr -d ' \n') in
3e) arch=amd64 ;;
b7) arch=arm64 ;;
*)
	echo "image.sh: $bin is not a linux amd64 or arm64 binary" >&2
	exit 2
	;;
esac
ca=${CA_BUNDLE:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
if [ ! -f "$ca" ]; then
	echo "image.sh: no CA certificates at $ca: install ca-certificates or set CA_BUNDLE" >&2
	exit 2
fi
engine=${ENGINE:-}
if [ -z "$engine" ]; then
	for e in podman buildah docker; do
		if command -v $e >/dev/null; then
			engine=$e
			break
		fi
	done
fi
if [ -z "$engine" ]; then
	echo "image.sh: no podman, buildah or docker on PATH (Debian: apt-get install podman)" >&2
	exit 2
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$bin" "$ctx/jobfleet"
chmod 0755 "$ctx/jobfleet"
cp "$ca" "$ctx/ca-certificates.crt"
chmod 0644 "$ctx/ca-certificates.crt"
case $engine in
buildah) set -- buildah build ;;
*) set -- "$engine" build ;;
esac
"$@" --platform "linux/$arch" -f "$here/Containerfile" -t "$tag" "$ctx"
