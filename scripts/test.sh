#!/usr/bin/env bash
# The project's test command (README "Test it"; .ci/run runs it): installs the Prometheus tools the
# end-to-end tests need when any is missing, fetches Debian sid's Prometheus 3 and vmagent into
# target/debian-sid, and Chromium for the /status browser test, then builds, lints and tests with
# the locked dependencies. A test whose external tool is missing fails, unless it is named in
# VLLM_CORRECTOR_TESTS_WITHOUT_TOOLS (docs/TESTING.md, "External tools").
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

# --- Prometheus 3 and vmagent 1.145 beside the machine's 2.42 and 1.79 (docs/TESTING.md,
# "External tools"): Debian sid's prometheus, promtool and victoria-metrics, fetched with an apt
# sources entry for sid built from this machine's Debian entry, `apt-get download` with only that
# list, and `dpkg-deb -x` into target/debian-sid (nothing installed system-wide; skipped when the
# binaries are there). crates/test-support finds them there.
python3 scripts/fetch_sid_tools.py
# --- end of the sid block

# Headless Chromium renders /status in tests/it/status_browser.rs (a DOM check and a screenshot
# kept in target/test-artefacts/). Debian's package; the test fails rather than skips under CI.
if [ ! -x /usr/bin/chromium ] && ! command -v chromium >/dev/null 2>&1; then
  echo "scripts/test.sh: installing chromium (missing)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver
fi

# Python's prometheus_client: its strict OpenMetrics parser reads /metrics in
# crates/service/src/exposition/render/tests.rs (the test fails rather than skips under CI).
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
# The public API docs build without a broken or private intra-doc link.
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps
cargo bench --locked --no-run --bench ingest --bench alloc   # the benchmarks must build; run by hand (docs/PERFORMANCE.md)
# The six accuracy chains (tests/it/accuracy_e2e.rs: Prometheus 2 and 3, vmagent 1.79 and 1.145,
# RW 1.0, RW 2.0, NHCB) each run real senders against real-time simulators; they run after the
# rest, so that their timing does not compete with the other tests, three at a time (each mostly
# waits on 1 s scrapes: three take about as long as one, docs/TESTING.md, "CI time").
cargo test --locked --workspace -- --skip accuracy_e2e
cargo test --locked --test it accuracy_e2e -- --test-threads=3

# Deploy assets: Dockerfile lint and build steps, manifests against their schemas, alert rule tests.
bash scripts/check-deploy.sh
