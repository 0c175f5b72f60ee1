#!/usr/bin/env bash
# Runs one cargo-fuzz target for a while, then prints its executions and findings.
#
#   scripts/fuzz.sh <rw1|rw2|exposition|engine|goodput> <seconds>
#
# Needs cargo-fuzz (installed here if missing) and a nightly toolchain: libFuzzer's coverage
# instrumentation and AddressSanitizer are -Z flags. With only a stable toolchain the script falls
# back to RUSTC_BOOTSTRAP=1 and --sanitizer=none (coverage-guided, no ASan; fine for safe Rust).
# Debug assertions (and so integer overflow checks) are on.
#
# The corpus grows in fuzz/corpus/<target> (git-ignored); fuzz/seeds/<target> is read, never
# written. Crashes, timeouts and out-of-memory inputs land in fuzz/artifacts/<target>/, and the
# libFuzzer log of the run beside them. Record the summary line in docs/RELIABILITY.md.
set -euo pipefail

usage="usage: scripts/fuzz.sh <rw1|rw2|exposition|engine|goodput> <seconds>"
target=${1:?$usage}
seconds=${2:?$usage}
case $target in rw1 | rw2 | exposition | engine | goodput) ;; *) echo "$usage" >&2; exit 2 ;; esac
[[ $seconds =~ ^[0-9]+$ ]] || { echo "$usage" >&2; exit 2; }

cd "$(dirname "$0")/.."
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    run=(cargo +nightly fuzz run --debug-assertions)
else
    echo "no nightly toolchain: using RUSTC_BOOTSTRAP=1 and --sanitizer=none" >&2
    export RUSTC_BOOTSTRAP=1
    run=(cargo fuzz run --debug-assertions --sanitizer=none)
fi

corpus=fuzz/corpus/$target
artifacts=fuzz/artifacts/$target
mkdir -p "$corpus" "$artifacts"
list_findings() { find "$artifacts" -type f ! -name '*.log' | sort; }
before=$(list_findings)
log=$artifacts/run-$(date -u +%Y%m%dT%H%M%SZ).log

set +e
"${run[@]}" "$target" "$corpus" "fuzz/seeds/$target" -- \
    -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$artifacts/" \
    >"$log" 2>&1
status=$?
set -e

stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
new=$(comm -13 <(echo "$before") <(list_findings) | sed '/^$/d')
findings=$(printf '%s' "$new" | grep -c . || true)
echo "target=$target seconds=$seconds exit=$status" \
    "executions=$(stat number_of_executed_units) exec_per_sec=$(stat average_exec_per_sec)" \
    "new_units=$(stat new_units_added) peak_rss_mb=$(stat peak_rss_mb)" \
    "corpus_files=$(find "$corpus" -type f | wc -l) findings=$findings log=$log"
if ((findings > 0)); then
    echo "$new"
    grep -m5 -E 'panicked|ERROR: (libFuzzer|AddressSanitizer)' "$log" || true
fi
exit "$status"
