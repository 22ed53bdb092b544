#!/usr/bin/env bash
# Makes a throwaway certificate authority and the certificates a local TLS
# setup needs, with the openssl CLI, for scripts/run.sh --tls, the client
# suite and the benchmarks (never for production: the keys are unprotected).
#
#   scripts/tls-certs.sh DIR
#
# DIR gets ca.crt/ca.key (the CA), server.crt/server.key (signed by it, for
# the names localhost and 127.0.0.1: Redis nodes and cellgate's TLS port
# both use it), client.crt/client.key (a client certificate signed by the
# CA, for tls-auth-clients / tls_auth_clients yes). Existing files are kept,
# so a second run is free.
set -euo pipefail
DIR=${1:?usage: $0 DIR}
mkdir -p "$DIR"
cd "$DIR"
[ -s ca.crt ] && [ -s server.crt ] && [ -s client.crt ] && exit 0
command -v openssl >/dev/null || { echo "tls-certs.sh: openssl missing (scripts/deps.sh)" >&2; exit 1; }

# EC P-256 keys: generated in milliseconds, unlike RSA.
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=cellgate test CA" \
    -out ca.crt 2>/dev/null

sign() {  # name, subject, extensions
    key "$1.key"
    openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
    printf '%s\n' "$3" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
        -days 3650 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}
sign server "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
sign client "/CN=cellgate test client" "extendedKeyUsage=clientAuth"
chmod 600 ./*.key
