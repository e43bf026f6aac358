#!/bin/sh
# Makes what compose.yaml needs, in this directory: a CA, certificates for
# the etcd members and the orchestrators, a client certificate for etcd,
# the bootstrap admin secret, data directories, and .env with your user
# and group IDs (the containers run as you, so that they can read these
# private files). Needs openssl. Run it once before `docker compose up`;
# it keeps what exists.
set -eu
cd "$(dirname "$0")"
umask 077
mkdir -p certs tokens data/etcd-1 data/etcd-2 data/etcd-3

cert() { # name, extended key usage, subjectAltName
	[ -s "certs/$1.crt" ] && return
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
		-keyout "certs/$1.key" -out "certs/$1.csr" 2>/dev/null
	printf 'extendedKeyUsage=%s\nsubjectAltName=%s\n' "$2" "$3" > "certs/$1.ext"
	openssl x509 -req -in "certs/$1.csr" -CA certs/ca.crt -CAkey certs/ca.key -CAcreateserial \
		-days 365 -sha256 -extfile "certs/$1.ext" -out "certs/$1.crt" 2>/dev/null
	rm -f "certs/$1.csr" "certs/$1.ext"
}

if [ ! -s certs/ca.crt ]; then
	openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
		-subj "/CN=jobfleet compose CA" -keyout certs/ca.key -out certs/ca.crt 2>/dev/null
fi
for n in 1 2 3; do
	cert "etcd-$n" serverAuth,clientAuth "DNS:etcd-$n,DNS:localhost,IP:127.0.0.1"
	cert "orchestrator-$n" serverAuth "DNS:orchestrator-$n,DNS:localhost,IP:127.0.0.1"
done
cert etcd-client clientAuth "DNS:jobfleet"
[ -s certs/admin.token ] || openssl rand -hex 32 > certs/admin.token
chmod 0644 certs/ca.crt
printf 'JOBFLEET_UID=%s\nJOBFLEET_GID=%s\n' "$(id -u)" "$(id -g)" > .env
echo "ready: docker compose up -d --build (the admin secret is in certs/admin.token)"
