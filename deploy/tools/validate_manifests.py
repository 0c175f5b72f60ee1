#!/usr/bin/env python3
"""Validate rendered Kubernetes manifests offline, and check the deployment contract.

Usage: validate_manifests.py --profile PROFILE [--kubernetes-version V ...] RENDERED.yaml
       validate_manifests.py --helm-values deploy/kube-prometheus-stack/values.yaml

RENDERED.yaml is the output of ``kubectl kustomize`` for one entry point of
``deploy/kubernetes``. Every object in it is validated, with unknown fields
rejected:
  - core kinds with kubernetes-validate's schemas (strict), for each version given
    (default: 1.29 and the newest the installed package knows);
  - ``monitoring.coreos.com/v1`` kinds with the Prometheus Operator CRD schemas in
    ``deploy/schemas/``, their ``metadata`` with the core ObjectMeta schema.

Then the contract the documentation promises is checked (PROFILE says which form
the file renders: standalone, standalone-operator, sidecar or sidecar-operator):
every vllm-corrector container runs restricted (non-root, read-only root file
system, no capabilities, no privilege escalation, RuntimeDefault seccomp), probes
/-/healthy and /-/ready on the port it listens on, has resource requests and a
memory limit, and runs the image tagged with Cargo.toml's version; a corrector
Deployment has one replica replaced with Recreate; ServiceMonitors honour labels;
every remote write to the corrector starts with the keep rule of
``deploy/prometheus/relabel.yml`` (``vllm-corrector relabel``: exactly the series
the rules read, all in vLLM's namespace); Prometheus
configurations carried in ConfigMaps or Secrets pass ``promtool check config``;
each PrometheusRule equals its plain rules file: ``vllm-corrector`` equals
``deploy/alerts/vllm-corrector.rules.yml`` and ``vllm-corrector-slos`` equals
``deploy/alerts/slo.rules.yml`` (both shipped, so both are required).

Exit status: 0 when all holds, 1 with one line per problem otherwise.
"""
import argparse
import base64
import copy
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import tomllib

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate import utils as kv_utils
from referencing import Registry, Resource

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "deploy" / "schemas"
RULES = ROOT / "deploy" / "alerts" / "vllm-corrector.rules.yml"
# Each shipped PrometheusRule by name, and the plain rules file its groups must equal.
RULE_FILES = {
    "vllm-corrector": RULES,
    "vllm-corrector-slos": ROOT / "deploy" / "alerts" / "slo.rules.yml",
}
CORRECTOR = "vllm-corrector"
RELABEL = ROOT / "deploy" / "prometheus" / "relabel.yml"
KEEP_REGEX = "the rule of deploy/prometheus/relabel.yml"
PROFILES = ("standalone", "standalone-operator", "sidecar", "sidecar-operator")
SIDECAR_CONFIG = ROOT / "deploy" / "prometheus" / "sidecar.yml"
# External label names a sidecar's scrape job drops whatever the rendered Prometheus
# sets: the usual cluster, and Prometheus Operator's two.
SENDER_LABELS = frozenset({"cluster", "prometheus", "prometheus_replica"})


def cargo_version():
    """The workspace's ``version`` (``[workspace.package]`` in Cargo.toml, a string such as "0.1.0"),
    which every member, the binary's package included, inherits."""
    with (ROOT / "Cargo.toml").open("rb") as f:
        manifest = tomllib.load(f)
    return manifest["workspace"]["package"]["version"]


# --- schema validation -------------------------------------------------------------

def strict_crd_schema(node):
    """Copy of a CRD openAPIV3Schema that rejects unknown fields.

    The API server prunes (or, with strict field validation, rejects) fields a
    structural schema does not declare; JSON Schema allows them unless told. So
    every object with ``properties`` and no ``additionalProperties`` or
    ``x-kubernetes-preserve-unknown-fields`` gets ``additionalProperties: false``.
    """
    node = copy.deepcopy(node)

    def walk(item):
        if isinstance(item, dict):
            if ("properties" in item and "additionalProperties" not in item
                    and not item.get("x-kubernetes-preserve-unknown-fields")):
                item["additionalProperties"] = False
            for key, value in item.items():
                if key == "properties":
                    for sub in value.values():
                        walk(sub)
                else:
                    walk(value)
        elif isinstance(item, list):
            for sub in item:
                walk(sub)

    walk(node)
    return node


def object_meta_validator(version):
    """A validator for core ObjectMeta from kubernetes-validate's strict schemas."""
    schema_dir = "kubernetes-json-schema/v%s-local-strict" % version
    schema = kv_utils.schema_contents("%s/objectmeta-meta-v1.json" % schema_dir, version)
    defs = kv_utils.schema_contents("%s/_definitions.json" % schema_dir, version)
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def schema_version(requested):
    """The schema directory version kubernetes-validate uses for ``requested``."""
    wanted = kv_utils.major_minor(requested)
    versions = [v for v in kv_utils.all_versions()
                if tuple(map(int, kv_utils.major_minor(v).split("."))) <= tuple(map(int, wanted.split(".")))]
    if not versions:
        raise SystemExit("kubernetes-validate has no schema for Kubernetes %s" % requested)
    return versions[-1]


def validate_schemas(docs, versions):
    """Yield one message per schema violation in ``docs``."""
    crd_validators = {}
    for path in SCHEMAS.glob("monitoring.coreos.com_v1_*.json"):
        kind = path.stem.rsplit("_", 1)[1]
        schema = strict_crd_schema(json.loads(path.read_text(encoding="utf-8")))
        crd_validators[kind] = jsonschema.Draft7Validator(schema)
    for version in versions:
        meta = object_meta_validator(schema_version(version))
        for doc in docs:
            where = "%s/%s (Kubernetes %s)" % (doc.get("kind"), doc.get("metadata", {}).get("name"), version)
            if doc.get("apiVersion", "").startswith("monitoring.coreos.com/"):
                validator = crd_validators.get(doc["kind"].lower())
                if validator is None or doc["apiVersion"] != "monitoring.coreos.com/v1":
                    yield "%s: no schema for %s in deploy/schemas" % (where, doc["apiVersion"])
                    continue
                for error in validator.iter_errors(doc):
                    yield "%s: %s at %s" % (where, error.message, "/".join(map(str, error.absolute_path)))
                for error in meta.iter_errors(doc.get("metadata", {})):
                    yield "%s: metadata: %s" % (where, error.message)
                continue
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                yield "%s: %s at %s" % (where, error.message, "/".join(map(str, error.absolute_path)))
            except kubernetes_validate.SchemaNotFoundError as error:
                yield "%s: %s" % (where, error.message)


# --- the deployment contract -------------------------------------------------------

def listen_port(container):
    """The port of ``--web.listen-address`` in the container's args (default 9490)."""
    for arg in container.get("args", []):
        if arg.startswith("--web.listen-address="):
            return int(arg.rsplit(":", 1)[1])
    return 9490


def probe_port(container, probe):
    """Resolve a probe's httpGet port (number or container port name) to a number."""
    port = probe["httpGet"]["port"]
    if isinstance(port, int):
        return port
    for declared in container.get("ports", []):
        if declared.get("name") == port:
            return declared["containerPort"]
    return None


def check_container(where, container, pod_security, version):
    """Yield problems of one vllm-corrector container. ``pod_security`` is the
    pod-level securityContext (empty for the operator form, whose pod is generated)."""
    sc = container.get("securityContext", {})

    def effective(key):
        return sc.get(key, pod_security.get(key))

    if not container.get("image", "").endswith(":" + version):
        yield "%s: image %r is not tagged %s (Cargo.toml)" % (where, container.get("image"), version)
    if sc.get("allowPrivilegeEscalation") is not False:
        yield "%s: securityContext.allowPrivilegeEscalation must be false" % where
    if sc.get("readOnlyRootFilesystem") is not True:
        yield "%s: securityContext.readOnlyRootFilesystem must be true" % where
    if "ALL" not in sc.get("capabilities", {}).get("drop", []):
        yield "%s: securityContext.capabilities.drop must hold ALL" % where
    if effective("runAsNonRoot") is not True:
        yield "%s: runAsNonRoot must be true" % where
    if (effective("seccompProfile") or {}).get("type") != "RuntimeDefault":
        yield "%s: seccompProfile must be RuntimeDefault" % where
    port = listen_port(container)
    for name, path in (("livenessProbe", "/-/healthy"), ("readinessProbe", "/-/ready")):
        probe = container.get(name)
        if not probe or probe.get("httpGet", {}).get("path") != path:
            yield "%s: %s must GET %s" % (where, name, path)
        elif probe_port(container, probe) != port:
            yield "%s: %s port does not resolve to the listen port %d" % (where, name, port)
    if port not in [p.get("containerPort") for p in container.get("ports", [])]:
        yield "%s: listen port %d is not a declared container port" % (where, port)
    resources = container.get("resources", {})
    for need in (("requests", "cpu"), ("requests", "memory"), ("limits", "memory")):
        if need[1] not in resources.get(need[0], {}):
            yield "%s: resources.%s.%s is missing" % (where, need[0], need[1])


def storage_path(container):
    """The directory of ``--storage.path`` in the container's args, or None."""
    for arg in container.get("args", []):
        if arg.startswith("--storage.path="):
            return arg.split("=", 1)[1]
    return None


def operator_db_volume(prometheus_name, spec):
    """The name of the volume Prometheus Operator gives a Prometheus's own storage:
    ``storage.volumeClaimTemplate.metadata.name``, else ``prometheus-<name>-db``
    (an emptyDir when ``spec.storage`` is unset)."""
    claim = (spec.get("storage") or {}).get("volumeClaimTemplate") or {}
    return claim.get("metadata", {}).get("name") or "prometheus-%s-db" % prometheus_name


def pod_volumes(doc):
    """(volume names of the pod ``doc`` renders, the names other containers share).
    A StatefulSet's claim templates count; a Prometheus resource's own storage volume
    (``operator_db_volume``) counts and is shared with the Prometheus container."""
    kind, name = doc["kind"], doc["metadata"]["name"]
    if kind == "Prometheus":
        spec = doc["spec"]
        db = operator_db_volume(name, spec)
        volumes = {v["name"] for v in spec.get("volumes", [])} | {db}
        others = [c for c in spec.get("containers", []) if c.get("name") != CORRECTOR]
        shared = {db} | {m["name"] for c in others for m in c.get("volumeMounts", [])}
        shared |= {m["name"] for m in spec.get("volumeMounts", [])}
        return volumes, shared
    pod = doc["spec"]["template"]["spec"]
    volumes = {v["name"] for v in pod.get("volumes", [])}
    volumes |= {t["metadata"]["name"] for t in doc["spec"].get("volumeClaimTemplates", [])}
    others = [c for c in pod.get("containers", []) + pod.get("initContainers", []) if c.get("name") != CORRECTOR]
    return volumes, {m["name"] for c in others for m in c.get("volumeMounts", [])}


def pod_spec_volumes(doc):
    """The ``volumes`` list of the pod ``doc`` renders."""
    if doc["kind"] == "Prometheus":
        return doc["spec"].get("volumes", [])
    return doc["spec"]["template"]["spec"].get("volumes", [])


def check_state_volume(where, container, doc, rendered_claims=frozenset()):
    """Yield problems of the corrector's state: ``--storage.path`` is set and a volume of
    the pod is mounted there; a volume another container uses (Prometheus's own storage)
    only through a ``subPath`` of its own."""
    path = storage_path(container)
    if path is None:
        yield "%s: no --storage.path: the state would not survive a restart" % where
        return
    mounts = [m for m in container.get("volumeMounts", []) if m.get("mountPath") == path]
    if len(mounts) != 1:
        yield "%s: no volume mounted at --storage.path %s (the read-only root file system refuses it)" % (where, path)
        return
    volumes, shared = pod_volumes(doc)
    name = mounts[0]["name"]
    if name not in volumes:
        yield "%s: the volume %s mounted at %s is not in the pod" % (where, name, path)
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod_spec_volumes(doc)
              if "persistentVolumeClaim" in v}
    if name in claims and claims[name] not in rendered_claims:
        yield "%s: the PersistentVolumeClaim %s of volume %s is not rendered" % (where, claims[name], name)
    elif name in shared and not mounts[0].get("subPath"):
        yield "%s: the volume %s is shared with another container: mount it with a subPath" % (where, name)


def corrector_containers(docs):
    """Yield (where, container, pod securityContext, doc) for every vllm-corrector container."""
    for doc in docs:
        kind, name = doc["kind"], doc["metadata"]["name"]
        if kind in ("Deployment", "StatefulSet", "DaemonSet"):
            pod = doc["spec"]["template"]["spec"]
            containers, pod_security = pod.get("containers", []), pod.get("securityContext", {})
        elif kind == "Prometheus":
            containers, pod_security = doc["spec"].get("containers", []), {}
        else:
            continue
        for container in containers:
            if container.get("name") == CORRECTOR:
                yield "%s/%s container %s" % (kind, name, CORRECTOR), container, pod_security, doc


def keep_rule():
    """The keep rule ``vllm-corrector relabel`` prints (deploy/prometheus/relabel.yml)."""
    rules = yaml.safe_load(RELABEL.read_text(encoding="utf-8"))
    if not (isinstance(rules, list) and len(rules) == 1 and rules[0]["regex"].startswith("vllm:(")):
        raise SystemExit("%s: expected one keep rule whose regex starts with vllm:(" % RELABEL)
    return rules[0]


def keeps_only_vllm(relabel_configs, source_key, action_key="action"):
    """True when the first relabel rule is the keep rule of deploy/prometheus/relabel.yml
    (with ``source_key`` for its source labels: ``sourceLabels`` in Operator resources)."""
    if not relabel_configs:
        return False
    first, want = relabel_configs[0], keep_rule()
    return (first.get(source_key) == want["source_labels"] and first.get("regex") == want["regex"]
            and first.get("separator", ";") == want["separator"]
            and first.get(action_key, "replace") == "keep")


def drops_label(job, name):
    """True when a ``labeldrop`` rule of the job's metric_relabel_configs removes label ``name``
    (Prometheus anchors the regex at both ends; its default is ``(.*)``)."""
    return any(rule.get("action") == "labeldrop" and re.fullmatch(rule.get("regex", "(.*)"), name)
               for rule in job.get("metric_relabel_configs", []))


def sidecar_metric_relabel():
    """The metric_relabel_configs of the vllm-corrector job of deploy/prometheus/sidecar.yml,
    the one ``tests/it/sidecar_join.rs`` runs through a real Prometheus with external labels."""
    config = yaml.safe_load(SIDECAR_CONFIG.read_text(encoding="utf-8"))
    job = next(j for j in config["scrape_configs"] if j["job_name"] == CORRECTOR)
    return job.get("metric_relabel_configs")


def operator_external_labels(spec):
    """Names of the external labels Prometheus Operator gives a Prometheus of this spec:
    ``externalLabels``, and the Operator's own ``prometheus`` and ``prometheus_replica``
    (renamed by ``prometheusExternalLabelName``/``replicaExternalLabelName``, left out when
    set to "")."""
    names = set(spec.get("externalLabels", {}))
    for field, default in (("prometheusExternalLabelName", "prometheus"),
                           ("replicaExternalLabelName", "prometheus_replica")):
        name = spec.get(field, default)
        if name:
            names.add(name)
    return names


def check_prometheus_config(where, text, corrector_url, corrector_target, sender_labels=None):
    """Yield problems of a Prometheus configuration (a whole prometheus.yml, or a
    list of scrape configs as additionalScrapeConfigs holds): ``promtool check
    config`` passes; a remote_write to the corrector keeps only vllm:.*; a job
    scraping ``corrector_target`` has honor_labels.

    ``sender_labels`` is a set for a sidecar, whose scraping Prometheus is the only
    sender: the names of that Prometheus's external labels (a whole prometheus.yml's
    ``global.external_labels`` are added). The job must drop each of them and the usual
    names (``SENDER_LABELS``), with the metric_relabel_configs of
    deploy/prometheus/sidecar.yml, so that the corrected series join the raw ones.
    ``None`` is a standalone corrector: its job must keep them, since they tell several
    senders' series apart."""
    config = yaml.safe_load(text)
    if isinstance(config, list):
        config = {"scrape_configs": config}
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "prometheus.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        run = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True)
        if run.returncode != 0:
            yield "%s: promtool check config failed: %s" % (where, (run.stdout + run.stderr).strip())
    writes = [rw for rw in config.get("remote_write", []) if rw.get("url") == corrector_url]
    for rw in writes:
        if not keeps_only_vllm(rw.get("write_relabel_configs"), "source_labels"):
            yield "%s: remote_write to %s must keep only the series the rules read (%s)" % (where, corrector_url, KEEP_REGEX)
    jobs = [job for job in config.get("scrape_configs", [])
            if any(corrector_target in sc.get("targets", []) for sc in job.get("static_configs", []))]
    if not jobs:
        yield "%s: no scrape job targets %s" % (where, corrector_target)
    for job in jobs:
        if job.get("honor_labels") is not True:
            yield "%s: job %s must set honor_labels: true" % (where, job.get("job_name"))
        if sender_labels is None:
            kept = sorted(n for n in SENDER_LABELS if drops_label(job, n))
            if kept:
                yield "%s: job %s drops %s, which tell several senders' series apart" % (
                    where, job.get("job_name"), ", ".join(kept))
            continue
        names = SENDER_LABELS | set(sender_labels) | set(config.get("global", {}).get("external_labels", {}))
        missing = sorted(n for n in names if not drops_label(job, n))
        if missing:
            yield "%s: job %s must drop the external labels %s, or corrected and raw series do not join" % (
                where, job.get("job_name"), ", ".join(missing))
        if job.get("metric_relabel_configs") != sidecar_metric_relabel():
            yield "%s: job %s: metric_relabel_configs differ from those of %s" % (
                where, job.get("job_name"), SIDECAR_CONFIG.relative_to(ROOT))


def check_contract(docs, profile, version):
    """Yield every broken promise of the given deployment ``profile``."""
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    containers = list(corrector_containers(docs))
    if not containers:
        yield "%s: no %s container rendered (did a patch target match nothing?)" % (profile, CORRECTOR)
    claims = {c["metadata"]["name"] for c in by_kind.get("PersistentVolumeClaim", [])}
    for where, container, pod_security, doc in containers:
        yield from check_container(where, container, pod_security, version)
        yield from check_state_volume(where, container, doc, claims)
    port = listen_port(containers[0][1]) if containers else 9490

    for deployment in by_kind.get("Deployment", []):
        if any(c[3] is deployment for c in containers):
            spec = deployment["spec"]
            if spec.get("replicas") != 1 or spec.get("strategy", {}).get("type") != "Recreate":
                yield "Deployment/%s: must run 1 replica with strategy Recreate" % deployment["metadata"]["name"]
    for monitor in by_kind.get("ServiceMonitor", []):
        for endpoint in monitor["spec"]["endpoints"]:
            if endpoint.get("honorLabels") is not True:
                yield "ServiceMonitor/%s: endpoint %s must set honorLabels: true" % (
                    monitor["metadata"]["name"], endpoint.get("port"))
            # A standalone corrector's senders are told apart by their external labels.
            job = {"metric_relabel_configs": [{"action": r.get("action", "replace").lower(), "regex": r.get("regex", "(.*)")}
                                              for r in endpoint.get("metricRelabelings", [])]}
            kept = sorted(n for n in SENDER_LABELS if drops_label(job, n))
            if kept:
                yield "ServiceMonitor/%s: endpoint %s drops %s, which tell several senders' series apart" % (
                    monitor["metadata"]["name"], endpoint.get("port"), ", ".join(kept))
    rules_by_name = {r["metadata"]["name"]: r for r in by_kind.get("PrometheusRule", [])}
    for name, rule in rules_by_name.items():
        source = RULE_FILES.get(name)
        if source is None:
            yield "PrometheusRule/%s: not one of the shipped %s" % (name, ", ".join(sorted(RULE_FILES)))
        elif rule["spec"]["groups"] != yaml.safe_load(source.read_text(encoding="utf-8"))["groups"]:
            yield "PrometheusRule/%s: groups differ from %s" % (name, source.relative_to(ROOT))
    if rules_by_name and set(rules_by_name) != set(RULE_FILES):
        yield "PrometheusRule: the alerts component renders %s, want both %s" % (
            ", ".join(sorted(rules_by_name)), ", ".join(sorted(RULE_FILES)))

    if profile in ("standalone", "standalone-operator"):
        services = [s for s in by_kind.get("Service", []) if s["metadata"]["name"] == CORRECTOR]
        policies = [p for p in by_kind.get("NetworkPolicy", []) if p["metadata"]["name"] == CORRECTOR]
        if len(services) != 1 or not by_kind.get("ServiceMonitor") or not by_kind.get("PrometheusRule"):
            yield "%s: needs the %s Service, a ServiceMonitor and the PrometheusRule" % (profile, CORRECTOR)
        if len(policies) != 1 or set(policies[0]["spec"].get("policyTypes", [])) != {"Ingress", "Egress"}:
            yield "%s: needs a NetworkPolicy restricting both Ingress and Egress" % profile
        url = "http://%s.%s.svc:%d/api/v1/write" % (
            CORRECTOR, services[0]["metadata"].get("namespace", "default") if services else "?",
            services[0]["spec"]["ports"][0]["port"] if services else port)
    else:
        url = "http://127.0.0.1:%d/api/v1/write" % port

    prometheuses = by_kind.get("Prometheus", [])
    if profile.endswith("-operator"):
        if not prometheuses:
            yield "%s: no Prometheus resource rendered" % profile
        secrets = {s["metadata"]["name"]: s for s in by_kind.get("Secret", [])}
        for prom in prometheuses:
            name = "Prometheus/%s" % prom["metadata"]["name"]
            writes = [rw for rw in prom["spec"].get("remoteWrite", []) if rw.get("url") == url]
            if len(writes) != 1:
                yield "%s: needs exactly one remoteWrite to %s" % (name, url)
            for rw in writes:
                if not keeps_only_vllm(rw.get("writeRelabelConfigs"), "sourceLabels"):
                    yield "%s: remoteWrite to %s must keep only the series the rules read (%s)" % (name, url, KEEP_REGEX)
            if profile == "sidecar-operator":
                ref = prom["spec"].get("additionalScrapeConfigs")
                secret = secrets.get(ref["name"]) if ref else None
                if secret is None:
                    yield "%s: additionalScrapeConfigs must name a Secret rendered alongside" % name
                    continue
                text = base64.b64decode(secret["data"][ref["key"]]).decode("utf-8")
                yield from check_prometheus_config("Secret/%s" % ref["name"], text, url, "127.0.0.1:%d" % port,
                                                   operator_external_labels(prom["spec"]))
    if profile == "sidecar":
        configs = [(cm["metadata"]["name"], cm["data"]["prometheus.yml"])
                   for cm in by_kind.get("ConfigMap", []) if "prometheus.yml" in cm.get("data", {})]
        if not configs:
            yield "sidecar: no ConfigMap with a prometheus.yml rendered"
        for name, text in configs:
            yield from check_prometheus_config("ConfigMap/%s" % name, text, url, "127.0.0.1:%d" % port, set())


def helm_merge(base, override):
    """Values as Helm merges two values files (``-f base -f override``): maps merge key by
    key, anything else, lists included, is replaced by the later file's."""
    if not (isinstance(base, dict) and isinstance(override, dict)):
        return copy.deepcopy(override)
    merged = copy.deepcopy(base)
    for key, value in override.items():
        merged[key] = helm_merge(base[key], value) if key in base else copy.deepcopy(value)
    return merged


def chart_prometheus_spec(prometheus_spec):
    """The spec of the Prometheus resource kube-prometheus-stack renders from
    ``prometheus.prometheusSpec``, for the chart-only keys these values use
    (templates/prometheus/prometheus.yaml): ``additionalRemoteWrite`` is appended to
    ``remoteWrite``; ``additionalScrapeConfigs``, a list, goes to a Secret the spec names.
    Returns the spec without that list, and the list."""
    spec = copy.deepcopy(prometheus_spec)
    scrape = spec.pop("additionalScrapeConfigs", None)
    writes = spec.get("remoteWrite", []) + spec.pop("additionalRemoteWrite", [])
    if writes:
        spec["remoteWrite"] = writes
    return spec, scrape


def check_helm_values(path, versions):
    """Yield problems of a kube-prometheus-stack values file for the sidecar form:
    ``prometheus.prometheusSpec`` as the chart renders it (``chart_prometheus_spec``)
    validated as the spec of a Prometheus resource against the CRD schema, the
    corrector container, the remote write's keep rule, and the scrape job with promtool."""
    values = yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8"))
    spec, scrape = chart_prometheus_spec(values["prometheus"]["prometheusSpec"])
    doc = {"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
           "metadata": {"name": "kube-prometheus-stack-prometheus"}, "spec": spec}
    yield from validate_schemas([doc], versions)
    containers = list(corrector_containers([doc]))
    if len(containers) != 1:
        yield "%s: prometheusSpec.containers needs one %s container" % (path, CORRECTOR)
    for where, container, pod_security, doc in containers:
        yield from check_container(where, container, pod_security, cargo_version())
        yield from check_state_volume(where, container, doc)
    port = listen_port(containers[0][1]) if containers else 9490
    url = "http://127.0.0.1:%d/api/v1/write" % port
    writes = [rw for rw in spec.get("remoteWrite", []) if rw.get("url") == url]
    if len(writes) != 1:
        yield "%s: needs exactly one remoteWrite to %s" % (path, url)
    for rw in writes:
        if not keeps_only_vllm(rw.get("writeRelabelConfigs"), "sourceLabels"):
            yield "%s: remoteWrite to %s must keep only the series the rules read (%s)" % (path, url, KEEP_REGEX)
    if not isinstance(scrape, list):
        yield "%s: prometheusSpec.additionalScrapeConfigs must list the vllm-corrector job" % path
    else:
        yield from check_prometheus_config(path, yaml.safe_dump(scrape), url, "127.0.0.1:%d" % port,
                                           operator_external_labels(spec))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", choices=PROFILES)
    parser.add_argument("--helm-values", action="store_true",
                        help="RENDERED is a kube-prometheus-stack values file (sidecar form)")
    parser.add_argument("--kubernetes-version", action="append", dest="versions")
    parser.add_argument("rendered")
    args = parser.parse_args(argv[1:])
    versions = args.versions or ["1.29", kubernetes_validate.latest_version()]
    if args.helm_values:
        problems = list(check_helm_values(args.rendered, versions))
        for problem in problems:
            print(problem)
        if not problems:
            print("%s: prometheusSpec valid against the Prometheus CRD schema; sidecar contract holds" % args.rendered)
        return 1 if problems else 0
    if not args.profile:
        parser.error("--profile is required for rendered manifests")
    with open(args.rendered, encoding="utf-8") as handle:
        docs = [doc for doc in yaml.safe_load_all(handle) if doc]
    problems = list(validate_schemas(docs, versions))
    problems += list(check_contract(docs, args.profile, cargo_version()))
    for problem in problems:
        print("%s: %s" % (args.rendered, problem))
    if problems:
        return 1
    print("%s: %d objects valid for Kubernetes %s; %s contract holds"
          % (args.rendered, len(docs), ", ".join(versions), args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
