# syntax=docker/dockerfile:1.7
#
# vllm-corrector container image: a glibc build on Debian 12 (bookworm), run on
# distroless cc-debian12, whose glibc (2.36) is the builder's. The runtime image has
# no shell and no package manager; the process runs as UID/GID 65532 (distroless
# "nonroot"), numeric so that Kubernetes can verify runAsNonRoot.
#
# Build:  docker build -t vllm-corrector:0.1.0 .
# Run:    docker run --rm -p 9490:9490 vllm-corrector:0.1.0
#
# The build stage runs scripts/docker-build-steps.sh, the same script that CI runs
# (scripts/check-deploy.sh) in a copy of exactly the files this build context holds.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-slim-bookworm AS build
WORKDIR /src
# .dockerignore is an allow-list: only the sources of the crate reach the context.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    ./scripts/docker-build-steps.sh /out

FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="vllm-corrector" \
      org.opencontainers.image.description="Prometheus remote-write receiver that exports corrected vLLM latency metrics" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/vllm-corrector /usr/local/bin/vllm-corrector
USER 65532:65532
# --web.listen-address defaults to 0.0.0.0:9490 (remote write in, /metrics out).
EXPOSE 9490
ENTRYPOINT ["/usr/local/bin/vllm-corrector"]
