#!/bin/sh
# The build steps of the Dockerfile's build stage, kept in one script so that CI
# runs exactly what `docker build` runs (scripts/check-deploy.sh calls it in a copy
# of the Docker build context, since no Docker engine runs on the CI machines).
#
# Usage: scripts/docker-build-steps.sh OUT_DIR
#   Run from the workspace root. Builds the release binary from the committed
#   Cargo.lock (--locked: a lock file out of date is an error, not an update) and
#   copies it to OUT_DIR/vllm-corrector. Honours CARGO_TARGET_DIR.
set -eu

out="${1:?usage: docker-build-steps.sh OUT_DIR}"

cargo build --release --locked --bin vllm-corrector

mkdir -p "$out"
cp "${CARGO_TARGET_DIR:-target}/release/vllm-corrector" "$out/vllm-corrector"
