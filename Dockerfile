# cellgate from Debian packages only (the same ones scripts/deps.sh installs).
FROM debian:bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
        build-essential cmake pkg-config libuv1-dev libhiredis-dev libyaml-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPX_TESTS=OFF \
    && cmake --build build -j"$(nproc)" --target cellgate

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
        libuv1 libhiredis0.14 libyaml-0-2 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/cellgate /usr/local/bin/cellgate
COPY conf/proxy.example.yaml /etc/cellgate/proxy.yaml
EXPOSE 7777
USER nobody
ENTRYPOINT ["/usr/local/bin/cellgate"]
CMD ["--config", "/etc/cellgate/proxy.yaml", "--listen", "0.0.0.0:7777", "--upstream", "redis:6379"]
