#!/usr/bin/env bash
# Soak test: a bounded, steady remote-write load against a release build of vllm-corrector on the
# loopback interface, sampling its RSS, CPU and rejection counters every 10 s into a CSV, then a
# summary (RSS first/last/max and slope, rejections, achieved rate). docs/TESTING.md, "Soak".
#
#   scripts/soak.sh [minutes] [rate]
#   SOAK_PROFILE=attack scripts/soak.sh [minutes]
#
#   minutes  how long the load runs (default 2; the recorded soak is 30)
#   rate     samples per second (default 800000: about half of the 1.56 M samples/s that this
#            generator and the receiver reach together on this 2-core machine; see
#            docs/RELIABILITY.md for how it was chosen and how to re-measure it)
#
# Environment: SOAK_PORT (default 19710, the receiver's port), SOAK_OUT (default
# target/soak/<UTC time>), SOAK_CONNECTIONS (default 4), SOAK_SCRAPE_INTERVAL (default 500ms: the
# fleet is rate × interval / 358 engines; a shorter interval keeps a high rate under the default
# limits.max_active_series of 100 000 rule-input series, 51 per engine).
#
# SOAK_PROFILE=attack replaces the steady fleet with examples/soak_attack.rs: churning engines,
# label-heavy groups, an RW 2.0 flood of unused series, slow bodies and slow readers, a metadata
# bomb, a flood of lone series with new complete engines starting during it, beside one
# well-behaved engine; and the receiver starts by restoring an oversized state file
# (scripts/attacks/statefile.py: 350 000 groups of the first format, one 100 MB document; SOAK_STATE_GROUPS).
# The summary then says PASS when the receiver's peak RSS while restoring and under the attacks
# stayed within 1.2 × limits.max_memory_bytes, the well-behaved engine's writes all succeeded,
# every late engine's write was accepted whole by its second scrape, and the metadata bomb was
# never refused and never cached; FAIL otherwise (exit status 1).
#
# Everything it starts is stopped by process id when it ends, fails or is interrupted; the load
# generator stops by itself after `minutes`. Exit status 0 when the run completed (the summary
# says whether RSS stayed flat; judging it is the reader's job).
set -euo pipefail

minutes="${1:-2}"
rate="${2:-800000}"
port="${SOAK_PORT:-19710}"
connections="${SOAK_CONNECTIONS:-4}"
scrape_interval="${SOAK_SCRAPE_INTERVAL:-500ms}"
profile="${SOAK_PROFILE:-steady}"
case "$profile" in steady | attack) ;; *) echo "SOAK_PROFILE must be steady or attack" >&2; exit 2 ;; esac
example=soak_load
[ "$profile" = attack ] && example=soak_attack
interval=10
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${SOAK_OUT:-$root/target/soak/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"
csv="$out/soak.csv"
summary="$out/summary.txt"

cd "$root"
echo "building release binary and load generator..." >&2
cargo build --release --quiet --bin vllm-corrector --example "$example"

receiver_pid=""
load_pid=""
cleanup() {
  for pid in "$load_pid" "$receiver_pid"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
}
trap cleanup EXIT INT TERM

storage=()
if [ "$profile" = attack ]; then
  python3 scripts/attacks/statefile.py "$out/state" "${SOAK_STATE_GROUPS:-350000}" 1 >"$out/statefile.txt"
  storage=(--storage.path "$out/state")
fi
target/release/vllm-corrector --web.listen-address "127.0.0.1:$port" --log.level warn "${storage[@]}" \
  >"$out/receiver.log" 2>&1 &
receiver_pid=$!
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1; then break; fi
  kill -0 "$receiver_pid" 2>/dev/null || { echo "receiver exited; see $out/receiver.log" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null
restore_kb=0
if [ "$profile" = attack ]; then
  # The restore is done before the receiver listens: its peak is the peak so far. Then the peak
  # is reset, so the attack's is its own.
  restore_kb="$(awk '/^VmHWM:/ {print $2}' "/proc/$receiver_pid/status")"
  echo 5 >"/proc/$receiver_pid/clear_refs"
fi

clk_tck="$(getconf CLK_TCK)"
# One CSV row: elapsed s, RSS kB, peak RSS kB, receiver CPU s, counters from /metrics.
sample() {
  local elapsed="$1" status rss hwm cpu
  status="$(cat "/proc/$receiver_pid/status")"
  rss="$(awk '/^VmRSS:/ {print $2}' <<<"$status")"
  hwm="$(awk '/^VmHWM:/ {print $2}' <<<"$status")"
  # utime and stime are fields 14 and 15 of /proc/<pid>/stat (after the parenthesised name).
  cpu="$(awk -v t="$clk_tck" '{sub(/.*\) /, ""); printf "%.2f", ($12 + $13) / t}' "/proc/$receiver_pid/stat")"
  # Under attack a scrape may be refused (503) or slow: the row keeps its RSS, counters read 0.
  # Piped, not held in a variable: under the attack the page passes 1 GB.
  { curl -fsS --max-time 20 "http://127.0.0.1:$port/metrics" || true; } | awk -v e="$elapsed" -v rss="$rss" -v hwm="$hwm" -v cpu="$cpu" '
    /^vllm_corrector_samples_received_total / {rec=$2}
    /^vllm_corrector_samples_applied_total / {app=$2}
    /^vllm_corrector_samples_rejected_total\{/ {rej+=$2; if ($1 !~ /unused_series|duplicate_sample/) bad+=$2}
    /^vllm_corrector_requests_limited_total\{/ {lim+=$2}
    /^vllm_corrector_http_requests_total\{handler="\/api\/v1\/write",code="2/ {ok+=$2}
    /^vllm_corrector_http_requests_total\{handler="\/api\/v1\/write",code="[45]/ {err+=$2}
    /^vllm_corrector_active_series / {series=$2}
    /^vllm_corrector_active_groups / {groups=$2}
    /^vllm_corrector_memory_bytes\{part="groups"\}/ {mg=$2}
    /^vllm_corrector_memory_bytes\{part="series_index"\}/ {mi=$2}
    /^vllm_corrector_memory_bytes\{part="retired_groups"\}/ {mr=$2}
    /^vllm_corrector_memory_bytes\{part="inflight_requests"\}/ {mf=$2}
    END {printf "%d,%d,%d,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n", e, rss, hwm, cpu, rec, app, rej, bad, lim, ok, err, series, groups, mg / 1024, mi / 1024, mr / 1024, mf / 1024}
  '
}

echo "elapsed_s,rss_kb,rss_peak_kb,cpu_s,samples_received,samples_applied,samples_rejected,rejected_not_benign,requests_limited,writes_2xx,writes_4xx_5xx,active_series,active_groups,groups_kb,series_index_kb,retired_kb,inflight_kb" >"$csv"
sample 0 >>"$csv"

if [ "$profile" = attack ]; then
  target/release/examples/soak_attack --addr "127.0.0.1:$port" --duration "${minutes}m" \
    >"$out/load.log" 2>&1 &
  load_pid=$!
  echo "soak: ${minutes} min of attacks on 127.0.0.1:$port, receiver pid $receiver_pid; CSV $csv" >&2
else
  target/release/examples/soak_load \
    --url "http://127.0.0.1:$port/api/v1/write" --rate "$rate" --duration "${minutes}m" \
    --scrape-interval "$scrape_interval" \
    --connections "$connections" >"$out/load.log" 2>&1 &
  load_pid=$!
  echo "soak: ${minutes} min at ${rate} samples/s on 127.0.0.1:$port, receiver pid $receiver_pid; CSV $csv" >&2
fi

start=$(date +%s)
next=$((start + interval))
while kill -0 "$load_pid" 2>/dev/null; do
  now=$(date +%s)
  if [ "$now" -ge "$next" ]; then
    sample $((now - start)) >>"$csv"
    next=$((next + interval))
  fi
  sleep 1
done
wait "$load_pid" || { echo "load generator failed; see $out/load.log" >&2; exit 1; }
load_pid=""
sleep 2
sample $(( $(date +%s) - start )) >>"$csv"

# Summary. The RSS slope is a least-squares fit over the rows after the first minute of load
# (warm-up: the fleet's series and buffers are allocated in the first scrapes).
{
  if [ "$profile" = attack ]; then
    echo "soak (attack): ${minutes} min, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(git rev-parse --short HEAD)"
  else
    echo "soak: ${minutes} min at ${rate} samples/s, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  fi
  grep -h '^PLAN\|^RESULT' "$out/load.log" || true
  awk -F, 'NR == 1 {next}
    { n++; t[n]=$1; r[n]=$2; if ($2 > max) max=$2; last=$0; lr=$2; lc=$4; rec=$5; app=$6; rej=$7; bad=$8; lim=$9; err=$11; ser=$12; grp=$13 }
    n == 2 {first_loaded=$2}
    END {
      for (i = 1; i <= n; i++) if (t[i] >= 60) { m++; sx+=t[i]; sy+=r[i]; sxx+=t[i]*t[i]; sxy+=t[i]*r[i] }
      slope = (m >= 2 && (m*sxx - sx*sx) != 0) ? (m*sxy - sx*sy) / (m*sxx - sx*sx) * 60 : 0
      printf "rss_kb: idle %d, first under load %d, last %d, max %d; slope after 60 s %.1f kB/min over %d samples\n", r[1], first_loaded, lr, max, slope, m
      printf "receiver cpu_s %s; samples received %d, applied %d, rejected %d (not unused/duplicate: %d); requests limited %d; write answers 4xx/5xx %d\n", lc, rec, app, rej, bad, lim, err
      printf "active series %d, groups %d; received = applied + rejected: %s\n", ser, grp, (rec == app + rej) ? "yes" : "NO"
    }' "$csv"
} | tee "$summary"
echo "files: $out" >&2

if [ "$profile" = attack ]; then
  page="$(curl -fsS --max-time 20 "http://127.0.0.1:$port/metrics" | grep -E \
    '^vllm_corrector_(memory_budget_bytes|metadata_dropped_total|metadata_families|state_loads_ignored_total)')"
  budget="$(awk '/^vllm_corrector_memory_budget_bytes\{budget="total"\}/ {printf "%d", $2}' <<<"$page")"
  too_long="$(awk '/^vllm_corrector_metadata_dropped_total\{reason="too_long"\}/ {printf "%d", $2}' <<<"$page")"
  cached="$(awk '/^vllm_corrector_metadata_families / {printf "%d", $2}' <<<"$page")"
  restore_dropped="$(awk '/^vllm_corrector_state_loads_ignored_total\{reason="memory_budget"\}/ {printf "%d", $2}' <<<"$page")"
  peak_kb="$(awk -F, 'NR > 1 && $3 > m {m = $3} END {print m + 0}' "$csv")"
  result="$(grep '^RESULT' "$out/load.log")"
  field() { grep -o "$1=[0-9]*" <<<"$result" | cut -d= -f2; }
  steady_bad=$(( $(field steady_4xx) + $(field steady_5xx) + $(field steady_transport) ))
  bomb_refused="$(field metadata_bomb_4xx)"
  # late<n>=<scrape first accepted whole>/<scrape first served>/<ms to acceptance>
  late="$(grep -o 'late[0-9]*=[0-9]*/[0-9]*/[0-9]*' <<<"$result" | tr '\n' ' ')"
  late_bad="$(tr ' ' '\n' <<<"$late" | awk -F'[=/]' 'NF == 4 {n++; if ($2 < 1 || $2 > 2) bad++} END {print (n ? bad + 0 : 1)}')"
  limit=$(( ${budget:-0} * 12 / 10 ))
  verdict=PASS
  if [ -z "$budget" ] || [ $((peak_kb * 1024)) -gt "$limit" ] || [ $((restore_kb * 1024)) -gt "$limit" ] ||
    [ "$steady_bad" -ne 0 ] || [ "$late_bad" -ne 0 ] || [ "${bomb_refused:-1}" -ne 0 ] ||
    [ "${too_long:-0}" -eq 0 ] || [ "${cached:-1}" -ne 0 ]; then
    verdict=FAIL
  fi
  {
    echo "restore: peak RSS $((restore_kb / 1024)) MiB ($(cat "$out/statefile.txt" | cut -d: -f2-)); states dropped for the budget: ${restore_dropped:-?}"
    echo "metadata bomb: $(field metadata_bomb_2xx) requests accepted, ${bomb_refused:-?} refused 4xx; entries dropped too_long: ${too_long:-?}; families cached: ${cached:-?}"
    echo "late engines (scrape accepted/scrape served/ms to acceptance): ${late:-none}"
    echo "$verdict: peak RSS $((peak_kb / 1024)) MiB under attack, $((restore_kb / 1024)) MiB restoring, limit 1.2 × max_memory_bytes = $((limit / 1048576)) MiB; well-behaved writes failed: $steady_bad; late engines not accepted by their 2nd scrape: $late_bad; metadata bomb refused: ${bomb_refused:-?}, cached: ${cached:-?}"
  } | tee -a "$summary"
  [ "$verdict" = PASS ] || exit 1
fi
