# cellgate from Debian packages only (the run set of scripts/deps.sh).
#
#   docker build -t cellgate .
#   docker run --rm -p 127.0.0.1:7777:7777 cellgate                 # embedded
#   docker run --rm -p 127.0.0.1:7777:7777 cellgate --upstream redis:6379
#
# The image's configuration is /etc/cellgate/proxy.yaml (conf/docker.yaml:
# listens on 0.0.0.0:7777, metrics on 0.0.0.0:9121, the example limits
# tree); the ENTRYPOINT loads it and the flags given to `docker run` come
# after it, so they override it key by key. docs/docker.md has the rest.
FROM debian:bookworm-slim AS build
# libssl-dev and libssl3 below: OpenSSL, for TLS (-DPX_TLS, on by default
# once the build has it); a build without it leaves libssl3 unused.
RUN apt-get update && apt-get install -y --no-install-recommends \
        build-essential cmake pkg-config libuv1-dev libhiredis-dev libyaml-dev \
        libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# .dockerignore keeps host build trees (build*/), .git and node_modules out.
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPX_TESTS=OFF \
    && cmake --build build -j"$(nproc)" --target cellgate

FROM debian:bookworm-slim
# A user of its own, with a fixed numeric id so that runAsNonRoot-style
# checks (which cannot resolve names) see it is not root.
RUN apt-get update && apt-get install -y --no-install-recommends \
        libuv1 libhiredis0.14 libyaml-0-2 libssl3 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 cellgate \
    && useradd --system --uid 10001 --gid cellgate --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin cellgate
COPY --from=build /src/build/cellgate /usr/local/bin/cellgate
COPY conf/docker.yaml /etc/cellgate/proxy.yaml
COPY conf/limits.example.yaml /etc/cellgate/limits.yaml
# 7777: clients (RESP); 9121: Prometheus metrics.
EXPOSE 7777 9121
USER 10001:10001
# Healthy when the RESP port answers PING (+PONG, or -NOAUTH when
# requirepass is set: either way the event loop is serving). bash's
# /dev/tcp needs no extra package; listening elsewhere than port 7777
# needs --health-cmd (or --no-healthcheck).
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/7777 && printf 'PING\\r\\n' >&3 && read -r -t 2 reply <&3 && [[ $reply == +PONG* || $reply == -NOAUTH* ]]"]
ENTRYPOINT ["/usr/local/bin/cellgate", "--config", "/etc/cellgate/proxy.yaml"]
# No default flags: everything comes from the file above, and what you pass
# to `docker run IMAGE ...` is added after it.
CMD []
