#!/usr/bin/env bash
# Builds local stand-ins for the two images the Dockerfile and
# docker-compose.yml pull, for a machine that reaches Debian's mirror but
# not Docker Hub:
#   debian:bookworm-slim  a minbase debootstrap of bookworm, imported
#   redis:7.0             Debian's redis-server 7.0 on it, shaped like the
#                         official image where the testbench relies on it
#                         (VOLUME /data as its working directory, an
#                         entrypoint that drops from root to the redis user,
#                         redis-cli); unlike the official image it keeps
#                         Redis's default protected mode, so the testbench's
#                         explicit --protected-mode no is tried.
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
    ctx=$(mktemp -d "${TMPDIR:-/tmp}/redis-standin.XXXXXX")
    trap 'rm -rf "$ctx" ${rootfs:+"$rootfs"}' EXIT
    # As the official image's entrypoint: flags alone run redis-server; as
    # root, it gives the working directory (a volume or tmpfs mounted
    # root-owned) to the redis user and drops to it.
    cat >"$ctx/entrypoint.sh" <<'SH'
#!/bin/sh
set -e
if [ "${1#-}" != "$1" ]; then
    set -- redis-server "$@"
fi
if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
    chown redis:redis .
    exec setpriv --reuid=redis --regid=redis --init-groups "$@"
fi
exec "$@"
SH
    cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server redis-tools \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data && chown redis:redis /data
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN chmod 755 /usr/local/bin/docker-entrypoint.sh
VOLUME /data
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["redis-server"]
DOCKERFILE
    docker build -t redis:7.0 "$ctx"
fi
docker image ls debian:bookworm-slim
docker image ls redis:7.0
