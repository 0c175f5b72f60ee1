#!/usr/bin/env bash
# Instructions per sample of the receiving process over HTTP, counted by callgrind: the user-space
# work of the whole service (hyper, tokio, the write handler, snappy, decode, engine), not the
# kernel's. Unlike CPU seconds on this shared 2-core machine, the count does not depend on what
# else runs (docs/PERFORMANCE.md, "The machine, and the noise").
#
# The service runs under `valgrind --tool=callgrind`; `loadgen bench` sends the first WARM scrapes
# (the series are learned, the frame window fills), the counters are zeroed, then it sends the
# rest and the counters are dumped (every request of each part is sent). Prints one RESULT line: instructions, samples, per sample.
#
# Usage: scripts/http-instructions.sh [BINARY]     (default: target/release/vllm-corrector)
#        BINARY=older/vllm-corrector scripts/http-instructions.sh   the same for another build
# Tunables (environment): PODS ENGINES SCRAPES WARM CONNS; KEEP=FILE keeps the callgrind dump there
# (for `callgrind_annotate FILE`); SLOS=FILE appends that file's `slos:` section to the corrector's
# configuration (without it, the shipped default SLO; `slos: []` for none; docs/PERFORMANCE.md)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PODS=${PODS:-16}
ENGINES=${ENGINES:-2}
SCRAPES=${SCRAPES:-40}
WARM=${WARM:-18}
CONNS=${CONNS:-4}
BIN=${1:-${BINARY:-target/release/vllm-corrector}}
command -v valgrind >/dev/null || { echo "http-instructions: valgrind is missing" >&2; exit 1; }
command -v callgrind_control >/dev/null || { echo "http-instructions: callgrind_control is missing" >&2; exit 1; }

cargo build --release --locked --quiet --example loadgen
if [ "$BIN" = target/release/vllm-corrector ]; then cargo build --release --locked --quiet --bin vllm-corrector; fi
LOADGEN=target/release/examples/loadgen
WORK=$(mktemp -d /tmp/http-instructions.XXXXXX)
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

"$LOADGEN" encode --pods "$PODS" --engines "$ENGINES" --scrapes "$SCRAPES" --out "$WORK/all.bin" >/dev/null
# Cut the file at a request boundary: each request is u32 LE samples, u32 LE length, the body.
python3 - "$WORK/all.bin" "$WORK/warm.bin" "$WORK/timed.bin" "$WARM" "$SCRAPES" <<'EOF'
import struct, sys
src, warm, timed, n_warm, n_scrapes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
data = open(src, "rb").read()
requests, pos = [], 0
while pos < len(data):
    _, length = struct.unpack_from("<II", data, pos)
    requests.append(data[pos:pos + 8 + length])
    pos += 8 + length
cut = len(requests) * n_warm // n_scrapes
open(warm, "wb").write(b"".join(requests[:cut]))
open(timed, "wb").write(b"".join(requests[cut:]))
EOF

port=$(( 20000 + RANDOM % 20000 ))
printf 'limits:\n  max_active_series: 4000000\n' > "$WORK/corrector.yml"
if [ -n "${SLOS:-}" ]; then cat "$SLOS" >> "$WORK/corrector.yml"; fi
valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out" "$BIN" \
  --web.listen-address "127.0.0.1:$port" --config.file "$WORK/corrector.yml" --log.level warn \
  >"$WORK/log" 2>&1 &
PID=$!
for _ in $(seq 300); do
  if curl -fs "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1; then break; fi
  sleep 0.2
done
# Every request of FILE: the saturation phase sends the first 60 %, the paced phase (at the
# saturation rate) the rest. Prints the samples and errors of both.
send() {
  "$LOADGEN" bench --url "http://127.0.0.1:$port/api/v1/write" --pid "$PID" --file "$1" \
    --connections "$CONNS" --saturate-secs 900 --latency-secs 900 --latency-fraction 1 \
    --target http-instructions \
    | sed -n 's/.* samples=\([0-9]*\) errors=\([0-9]*\).*/\1 \2/p' \
    | awk '{s += $1; e += $2} END {print s, e}'
}
read -r warm_samples warm_errors < <(send "$WORK/warm.bin")
callgrind_control -z "$PID" >/dev/null 2>&1
read -r samples errors < <(send "$WORK/timed.bin")
callgrind_control --dump=timed "$PID" >/dev/null 2>&1
sleep 1
dump=$(ls "$WORK"/callgrind.out.* 2>/dev/null | head -1)
[ -n "$dump" ] || { echo "http-instructions: no callgrind dump; the log:" >&2; cat "$WORK/log" >&2; exit 1; }
if [ -n "${KEEP:-}" ]; then cp "$dump" "$KEEP"; fi
instructions=$(sed -n 's/^summary: *//p; s/^totals: *//p' "$dump" | head -1)
echo "RESULT binary=$BIN warm_samples=$warm_samples samples=$samples errors=$((warm_errors + errors)) instructions=$instructions per_sample=$(( instructions / samples ))"
