#!/usr/bin/env bash
# Builds local stand-ins for the two images the Dockerfile and
# docker-compose.yml pull, for a machine that reaches Debian's mirror but
# not Docker Hub:
#   debian:bookworm-slim  a minbase debootstrap of bookworm, imported
#   redis:7.0             Debian's redis-server 7.0 on it, shaped like the
#                         official image where the testbench relies on it
#                         (VOLUME /data as its working directory, a non-root
#                         user, redis-cli); unlike the official image it
#                         keeps Redis's default protected mode, so the
#                         testbench's explicit --protected-mode no is tried.
# An image that already exists is kept (`docker rmi` it to rebuild).
# Needs root, debootstrap (apt-get install debootstrap) and a running
# docker daemon. MIRROR=URL picks the Debian mirror (default: debootstrap's).
#
#   bash scripts/docker_standins.sh
#   docker compose up --build        (or docker-compose up --build)
set -euo pipefail

if ! docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
    rootfs=$(mktemp -d "${TMPDIR:-/tmp}/bookworm-rootfs.XXXXXX")
    trap 'rm -rf "$rootfs"' EXIT
    debootstrap --variant=minbase bookworm "$rootfs" ${MIRROR:+"$MIRROR"}
    # What the slim image leaves out too: downloaded packages, apt lists.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" --numeric-owner -c . |
        docker import --change 'CMD ["bash"]' - debian:bookworm-slim
fi

if ! docker image inspect redis:7.0 >/dev/null 2>&1; then
    docker build -t redis:7.0 - <<'DOCKERFILE'
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server redis-tools \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data && chown redis:redis /data
VOLUME /data
WORKDIR /data
USER redis
EXPOSE 6379
CMD ["redis-server"]
DOCKERFILE
fi
docker image ls debian:bookworm-slim
docker image ls redis:7.0
