#!/usr/bin/env bash
# Side-by-side load test (Performance issue): vllm-corrector vs Prometheus 2.42's remote-write
# receiver vs VictoriaMetrics 1.79's /api/v1/write, one after another, same payloads, same run.
#
# For each target: a fresh process on a loopback port with a temp data dir; then
#   1. saturation: N connections send pre-encoded vLLM-shaped RW1 requests (500 samples each,
#      Prometheus 2.42's cut) back to back, bounded by SAT seconds and by the batch file;
#   2. latency: the same connections paced at half the measured saturation rate for LAT seconds;
#   3. memory: for each size in MEM_SERIES, a fresh process, MEM_SCRAPES scrapes of that many input
#      series, then VmRSS minus the empty process's VmRSS, divided by the series.
# CPU is utime + stime of the receiver's process from /proc/<pid>/stat, over each phase.
#
# Usage: scripts/bench-compare.sh            (defaults below; about 10 minutes)
#        QUICK=1 scripts/bench-compare.sh    (small sizes, about 2 minutes, for a smoke test)
#        BASELINE=path/to/older/vllm-corrector scripts/bench-compare.sh
#                                    also runs that binary as target "baseline", in the same rounds,
#                                    so a change is judged against its parent on the same machine state
# Floors (targets floor-http, floor-snappy, floor-key; the last two run by default): the
# `floor_receiver` example, which does only the first stages of the corrector's receive path
# (HTTP; + snappy; + the RW 1.0 decode with deferred labels and the key) and keeps nothing. Their
# CPU per sample, in the same rounds, is what those stages alone cost on this machine
# (docs/PERFORMANCE.md, "The floor, measured"). They have no memory phase.
# Tunables (environment): PODS ENGINES SCRAPES CONNS SAT LAT REPEAT MEM_SERIES MEM_SCRAPES TARGETS BASELINE
# Output: RESULT lines on stdout and in $OUT/results.txt, a Markdown table in $OUT/table.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PODS=${PODS:-16}            # 16 pods x 2 engines = 9 984 input series per scrape
ENGINES=${ENGINES:-2}
SCRAPES=${SCRAPES:-2000}    # pre-encoded scrapes (20 M samples, 450 MB) for the saturation + latency phases
CONNS=${CONNS:-4}
SAT=${SAT:-6}
LAT=${LAT:-6}
REPEAT=${REPEAT:-2}
MEM_SERIES=${MEM_SERIES:-"10000 100000 1000000"}
MEM_SCRAPES=${MEM_SCRAPES:-20}
BASELINE=${BASELINE:-}
if [ -n "$BASELINE" ]; then
  TARGETS=${TARGETS:-"corrector baseline prometheus victoriametrics floor-snappy floor-key"}
else
  TARGETS=${TARGETS:-"corrector prometheus victoriametrics floor-snappy floor-key"}
fi
OUT=${OUT:-target/bench-compare}
if [ -n "${QUICK:-}" ]; then
  SCRAPES=200; SAT=2; LAT=2; REPEAT=1; MEM_SERIES="10000 50000"; MEM_SCRAPES=18
fi

# Only the tools the chosen targets need.
tools="curl getconf"
case " $TARGETS " in *" prometheus "*) tools="$tools prometheus" ;; esac
case " $TARGETS " in *" victoriametrics "*) tools="$tools victoria-metrics" ;; esac
for tool in $tools; do
  command -v "$tool" >/dev/null || { echo "bench-compare: $tool is missing (apt-get install prometheus victoria-metrics curl)" >&2; exit 1; }
done

cargo build --release --locked --bin vllm-corrector --example loadgen --example floor_receiver
LOADGEN=target/release/examples/loadgen
CLK_TCK=$(getconf CLK_TCK)
mkdir -p "$OUT"
RESULTS="$OUT/results.txt"
: > "$RESULTS"
WORK=$(mktemp -d /tmp/bench-compare.XXXXXX)
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

printf 'global:\n  scrape_interval: 1h\nscrape_configs: []\n' > "$WORK/prometheus.yml"
# The 1 M-series run holds ~164 k rule-input series, over the default max_active_series (100 k).
printf 'limits:\n  max_active_series: 4000000\n' > "$WORK/corrector.yml"

# start_target NAME: starts a fresh receiver on a free loopback port; sets PID, WRITE_URL, METRICS_URL.
start_target() {
  local name=$1 port dir
  port=$(( 20000 + RANDOM % 20000 ))
  dir=$(mktemp -d "$WORK/$name.XXXX")
  METRICS_URL=""
  case "$name" in
    corrector|baseline)
      local bin=target/release/vllm-corrector
      if [ "$name" = baseline ]; then bin=$BASELINE; fi
      "$bin" --web.listen-address "127.0.0.1:$port" --config.file "$WORK/corrector.yml" \
        --log.level warn >"$dir/log" 2>&1 &
      PID=$!; READY="http://127.0.0.1:$port/-/ready"; METRICS_URL="http://127.0.0.1:$port/metrics" ;;
    prometheus)
      prometheus --config.file "$WORK/prometheus.yml" --storage.tsdb.path "$dir" \
        --web.listen-address "127.0.0.1:$port" --web.enable-remote-write-receiver --log.level warn >"$dir/log" 2>&1 &
      PID=$!; READY="http://127.0.0.1:$port/-/ready" ;;
    floor-http|floor-snappy|floor-key)
      FLOOR_STAGE=${name#floor-} target/release/examples/floor_receiver \
        --web.listen-address "127.0.0.1:$port" >"$dir/log" 2>&1 &
      PID=$!; READY="http://127.0.0.1:$port/-/ready" ;;
    victoriametrics)
      victoria-metrics -storageDataPath "$dir" -httpListenAddr "127.0.0.1:$port" -loggerLevel WARN >"$dir/log" 2>&1 &
      PID=$!; READY="http://127.0.0.1:$port/health" ;;
  esac
  WRITE_URL="http://127.0.0.1:$port/api/v1/write"
  for _ in $(seq 100); do
    if curl -fs "$READY" >/dev/null 2>&1; then sleep 1; return 0; fi
    sleep 0.2
  done
  echo "bench-compare: $name did not become ready; its log:" >&2; cat "$dir/log" >&2; exit 1
}

stop_target() {
  kill "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  PID=""
}

record() { tee -a "$RESULTS"; }

if [ -n "$BASELINE" ]; then echo "== baseline: $BASELINE ($("$BASELINE" --version))" | record; fi
echo "== machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(free -g | awk '/Mem:/{print $2}') GiB; load: $(cut -d' ' -f1-3 /proc/loadavg)" | record
"$LOADGEN" encode --pods "$PODS" --engines "$ENGINES" --scrapes "$SCRAPES" --out "$WORK/batches.bin" | record

for round in $(seq "$REPEAT"); do
  for target in $TARGETS; do
    start_target "$target"
    echo "== round $round: $target (load $(cut -d' ' -f1-3 /proc/loadavg))" | record
    "$LOADGEN" bench --url "$WRITE_URL" --pid "$PID" --file "$WORK/batches.bin" --connections "$CONNS" \
      --saturate-secs "$SAT" --latency-secs "$LAT" --clk-tck "$CLK_TCK" --target "$target" | record
    stop_target
  done
done

per_pod=$(( 303 * ENGINES + 18 ))   # series of one pod (benches/support/vllm_shape.rs)
for series in $MEM_SERIES; do
  pods=$(( (series + per_pod / 2) / per_pod )); [ "$pods" -ge 1 ] || pods=1
  for target in $TARGETS; do
    case "$target" in floor-*) continue ;; esac
    start_target "$target"
    metrics=()
    if [ -n "$METRICS_URL" ]; then metrics=(--metrics-url "$METRICS_URL"); fi
    "$LOADGEN" memory --url "$WRITE_URL" --pid "$PID" --pods "$pods" --engines "$ENGINES" --scrapes "$MEM_SCRAPES" \
      --connections "$CONNS" --clk-tck "$CLK_TCK" --target "$target" "${metrics[@]}" | record
    stop_target
  done
done

# The table: medians would need more rounds; each cell shows every round, first to last.
awk '
  function val(k,   i, kv) { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "" }
  /^RESULT/ && val("phase") == "saturate" { t = val("target"); sat[t] = sat[t] sep[t] sprintf("%.2f", val("samples_per_s") / 1e6); cpu[t] = cpu[t] sep[t] sprintf("%.2f", val("cpu_ns_per_sample") / 1e3); sep[t] = " / " }
  /^RESULT/ && val("phase") == "latency" { t = val("target"); lat[t] = lat[t] lsep[t] sprintf("%.2f / %.2f", val("p50_ms"), val("p99_ms")); lsep[t] = "; " }
  /^RESULT/ && val("phase") == "memory" { t = val("target"); mem[t] = mem[t] msep[t] sprintf("%s: %.0f", val("series"), val("bytes_per_series")); msep[t] = ", "; mcpu[t] = mcpu[t] csep[t] sprintf("%.0f", val("cpu_ns_per_sample")); csep[t] = " / "; if (val("metrics_p50_ms") != "") met[t] = met[t] esep[t] sprintf("%s series: %s ms", val("metrics_derived_series"), val("metrics_p50_ms")); esep[t] = ", " }
  /^RESULT/ { if (!(val("target") in seen) && val("target") != "") { seen[val("target")] = 1; order[++n] = val("target") } }
  END {
    print "| receiver | samples/s at saturation (M) | CPU s per M samples | p50 / p99 ms at half saturation | B per input series (RSS growth) | CPU ns per sample during warm-up, by size | /metrics p50 |"
    print "|---|---|---|---|---|---|---|"
    for (i = 1; i <= n; i++) { t = order[i]; printf "| %s | %s | %s | %s | %s | %s | %s |\n", t, sat[t], cpu[t], lat[t], mem[t], mcpu[t], (t in met) ? met[t] : "n/a" }
  }' "$RESULTS" > "$OUT/table.md"
echo; cat "$OUT/table.md"
