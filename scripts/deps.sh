#!/usr/bin/env bash
# Installs what cellgate needs to build, test and run, from Debian packages.
# Idempotent: does nothing when everything is already there.
set -euo pipefail

PKGS=(build-essential cmake pkg-config libuv1-dev libhiredis-dev libyaml-dev
      libcriterion-dev redis-server redis-tools nutcracker)
# TLS on both sides (-DPX_TLS=ON, the default): OpenSSL's headers; the
# openssl CLI makes the test certificates; redis-sentinel for Sentinel mode.
PKGS+=(libssl-dev openssl redis-sentinel)
# The fuzz targets (scripts/fuzz.sh, tests/fuzz): clang and its libFuzzer
# runtime, libclang_rt.fuzzer, which Debian 12 ships in libclang-rt-14-dev
# (clang is clang 14 there; libfuzzer-14-dev is the standalone libFuzzer.a).
PKGS+=(clang libclang-rt-14-dev)
# The client-compatibility suite (tests/clients): redis-py, and Node.js with
# npm for ioredis and node-redis (kept when Node is already installed).
PKGS+=(python3-redis)
if ! command -v node >/dev/null 2>&1; then
    PKGS+=(nodejs npm)
elif ! command -v npm >/dev/null 2>&1; then
    PKGS+=(npm)
fi

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi
echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts a system redis-server on 6379 when the package is installed;
# cellgate's scripts and tests start their own on free ports.
if command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true
    $SUDO systemctl disable --now redis-sentinel >/dev/null 2>&1 || true
fi
