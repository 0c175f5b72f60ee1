#!/usr/bin/env bash
# The project's test command (README "Test it"; .ci/run runs it): installs the Prometheus tools the
# end-to-end tests need when any is missing, and Chromium for the /status browser test, then
# builds, lints and tests with the locked dependencies. Tests that need `prometheus`, `promtool`
# or `chromium` fail rather than skip when CI is set.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

missing=()
for tool in prometheus promtool vmagent; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "scripts/test.sh: installing prometheus and victoria-metrics (missing: ${missing[*]})"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus victoria-metrics
fi

# Headless Chromium renders /status in tests/it/status_browser.rs (a DOM check and a screenshot
# kept in target/test-artefacts/). Debian's package; the test fails rather than skips under CI.
if [ ! -x /usr/bin/chromium ] && ! command -v chromium >/dev/null 2>&1; then
  echo "scripts/test.sh: installing chromium (missing)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver
fi

# Python's prometheus_client: its strict OpenMetrics parser reads /metrics in
# crates/service/src/exposition/render_tests.rs (the test fails rather than skips under CI).
if ! python3 -c 'import prometheus_client.openmetrics.parser' >/dev/null 2>&1; then
  echo "scripts/test.sh: installing Python's prometheus_client (missing)"
  python3 -m pip install --user 'prometheus_client>=0.20'
fi

cargo fmt --all --check   # rustfmt.toml: defaults, edition 2024
# Every repository path, link and quoted heading a doc or a code comment cites exists.
python3 scripts/doc_paths_test.py
python3 scripts/doc_paths.py
# Sibling modules form no cycle (docs/ARCHITECTURE.md, "Rules of the layout").
python3 scripts/module_cycles_test.py
python3 scripts/module_cycles.py
cargo build --locked --workspace --all-targets
cargo clippy --locked --workspace --all-targets -- -D warnings
cargo bench --locked --no-run --bench ingest --bench alloc   # the benchmarks must build; run by hand (docs/PERFORMANCE.md)
# The two accuracy chains (Prometheus, vmagent) each run real senders against a real-time simulator;
# they run after the rest, one at a time, so their timing does not compete with the other tests.
cargo test --locked --workspace -- --skip accuracy_e2e
cargo test --locked --test it accuracy_e2e -- --test-threads=1

# Deploy assets: Dockerfile lint and build steps, manifests against their schemas, alert rule tests.
bash scripts/check-deploy.sh
