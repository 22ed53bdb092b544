#!/usr/bin/env bash
# Installs what cellgate needs, from Debian packages (Debian 12), and the npm
# packages of the client suite. Two sets, each one list:
#
#   scripts/deps.sh         build and run: scripts/run.sh, a build by hand
#                           (the default build includes the test binaries)
#   scripts/deps.sh test    and everything scripts/test.sh runs: the fuzz
#                           targets, the formatting and layer checks, the
#                           client suite's runtimes and libraries
#
# Idempotent: does nothing when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

SET=${1:-run}
case "$SET" in
run | test) ;;
*)
    echo "deps: usage: scripts/deps.sh [test] (not '$SET')" >&2
    exit 2
    ;;
esac

# ---------------------------------------------------------------- run set
PKGS=(build-essential cmake pkg-config libuv1-dev libhiredis-dev libyaml-dev
      libcriterion-dev redis-server redis-tools)
# TLS on both sides (-DPX_TLS=ON, the default): OpenSSL's headers; the
# openssl CLI makes the test certificates; redis-sentinel for Sentinel mode.
PKGS+=(libssl-dev openssl redis-sentinel)
# The README's metrics example (curl http://.../metrics); a minimal Debian
# has no curl.
PKGS+=(curl)

# ---------------------------------------------------------------- test set
if [ "$SET" = test ]; then
    # The fuzz targets (scripts/fuzz.sh, tests/fuzz): clang and its
    # libFuzzer runtime, libclang_rt.fuzzer, which Debian 12 ships in
    # libclang-rt-14-dev (clang is clang 14 there; libfuzzer-14-dev is the
    # standalone libFuzzer.a).
    PKGS+=(clang libclang-rt-14-dev)
    # test.sh's checks: clang-format (every C file formatted), python3
    # (scripts/check_layers.sh), pkill (procps: no server outlives a run).
    PKGS+=(clang-format python3 procps)
    # The forwarding benchmark's comparison (tests/bench/forward.sh).
    PKGS+=(nutcracker)
    # The client suite (tests/clients), everything it runs: redis-py for the
    # system python; redis-rb; phpredis with the PHP CLI; Perl's Redis;
    # redigo, built offline in GOPATH mode with Debian's Go; ss (iproute2)
    # for the connection counts.
    PKGS+=(python3-redis ruby-redis php-cli php-redis libredis-perl golang-go
           golang-github-gomodule-redigo-dev iproute2)
    # Node.js with npm for ioredis, node-redis and BullMQ, kept when a Node
    # is already installed (Debian 12's is Node 18; ioredis 6 and node-redis
    # 6 ask for 20, see tests/clients/README.md).
    if ! command -v node >/dev/null 2>&1; then
        PKGS+=(nodejs npm)
    elif ! command -v npm >/dev/null 2>&1; then
        PKGS+=(npm)
    fi
fi

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        # A minimal Debian has no sudo: say what to do rather than
        # "sudo: command not found".
        if ! command -v sudo >/dev/null 2>&1; then
            echo "deps: installing ${missing[*]} needs root, and there is no sudo: run this as root (or, as root, apt-get install sudo)" >&2
            exit 1
        fi
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # Debian starts a system redis-server on 6379 when the package is
    # installed; cellgate's scripts and tests start their own on free ports.
    if command -v systemctl >/dev/null 2>&1; then
        $SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true
        $SUDO systemctl disable --now redis-sentinel >/dev/null 2>&1 || true
    fi
fi

# The client suite's npm packages, the exact versions of
# tests/clients/package-lock.json, into tests/clients/node_modules.
if [ "$SET" = test ]; then
    clients=tests/clients
    if ! (cd "$clients" && node -e 'for (const m of ["ioredis", "ioredis5",
            "redis", "redis6", "bullmq", "express"]) require(m)') 2>/dev/null; then
        echo "deps: npm ci in $clients" >&2
        # npm 11 refuses `npm ci` when the lock file lacks optional packages
        # of other platforms (msgpackr-extract's, under BullMQ) even though
        # it wrote that lock itself; `npm install --no-save` then installs
        # the same locked versions without rewriting the lock file (and says
        # why, if it fails too).
        (cd "$clients" && { npm ci --no-audit --no-fund --loglevel=error 2>/dev/null ||
            npm install --no-save --no-audit --no-fund --loglevel=error; }) >&2
    fi
fi
