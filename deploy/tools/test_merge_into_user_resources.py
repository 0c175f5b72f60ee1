#!/usr/bin/env python3
"""Every deploy form adds its entries beside the user's, and never silently drops one.

Run: python3 -m unittest deploy/tools/test_merge_into_user_resources.py  (needs kubectl,
promtool and kubernetes-validate, as scripts/check-deploy.sh installs them).

Each test writes a user's kustomization in a temporary directory: a Prometheus (Operator
resource, or a plain StatefulSet) that already has its own volumes and volumeMounts (a
Secret), containers (a config-reloader override, an auth proxy), remote writes (to another
backend) and, where the form touches it, additionalScrapeConfigs; then renders it through
a component of deploy/kubernetes with ``kubectl kustomize`` and asserts that every entry
of the user's is still there, unchanged, beside the corrector's. Where an entry cannot be
merged (additionalScrapeConfigs names one Secret), the build must fail rather than replace
it. The kube-prometheus-stack values are merged with a user's values as Helm merges them.
"""
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import validate_manifests as vm  # noqa: E402

COMPONENTS = vm.ROOT / "deploy" / "kubernetes" / "components"
CORRECTOR_URL = "http://127.0.0.1:9490/api/v1/write"
STANDALONE_URL = "http://vllm-corrector.monitoring.svc:9490/api/v1/write"

USER_VOLUME = {"name": "etcd-client-cert", "secret": {"secretName": "etcd-client-cert"}}
USER_MOUNT = {"name": "etcd-client-cert", "mountPath": "/etc/prometheus/secrets/etcd", "readOnly": True}
USER_CONTAINERS = [
    {"name": "config-reloader", "resources": {"limits": {"cpu": "50m", "memory": "64Mi"}}},
    {"name": "oauth-proxy", "image": "quay.io/oauth2-proxy/oauth2-proxy:v7.6.0",
     "args": ["--upstream=http://127.0.0.1:9090"], "ports": [{"name": "proxy", "containerPort": 8081}]},
]
USER_REMOTE_WRITE = {"url": "https://thanos-receive.example.com/api/v1/receive", "name": "thanos"}
USER_SCRAPE_SECRET = {"name": "additional-scrape-configs", "key": "prometheus-additional.yaml"}


def user_prometheus(additional_scrape_configs=False):
    spec = {
        "replicas": 2,
        "externalLabels": {"cluster": "prod"},
        "volumes": [USER_VOLUME],
        "volumeMounts": [USER_MOUNT],
        "containers": USER_CONTAINERS,
        "remoteWrite": [USER_REMOTE_WRITE],
    }
    if additional_scrape_configs:
        spec["additionalScrapeConfigs"] = USER_SCRAPE_SECRET
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
            "metadata": {"name": "k8s", "namespace": "monitoring"}, "spec": spec}


def user_statefulset():
    pod = {
        "containers": [
            {"name": "prometheus", "image": "quay.io/prometheus/prometheus:v3.5.0",
             "volumeMounts": [{"name": "data", "mountPath": "/prometheus"}, USER_MOUNT]},
            USER_CONTAINERS[1],
        ],
        "volumes": [USER_VOLUME],
    }
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "prometheus", "namespace": "monitoring",
                         "labels": {"app.kubernetes.io/name": "prometheus"}},
            "spec": {"serviceName": "prometheus", "replicas": 2,
                     "selector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
                     "template": {"metadata": {"labels": {"app.kubernetes.io/name": "prometheus"}},
                                  "spec": pod},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                               "spec": {"accessModes": ["ReadWriteOnce"],
                                                        "resources": {"requests": {"storage": "10Gi"}}}}]}}


class Build:
    """A user's kustomization in a temporary directory."""

    def __init__(self, resources, components, extra=None):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="vllm-corrector-merge-"))
        (self.dir / "user.yaml").write_text(yaml.safe_dump_all(resources), encoding="utf-8")
        kustomization = {"resources": ["user.yaml"],
                         "components": [os.path.relpath(COMPONENTS / c, self.dir) for c in components]}
        kustomization.update(extra or {})
        (self.dir / "kustomization.yaml").write_text(yaml.safe_dump(kustomization), encoding="utf-8")

    def render(self):
        """(docs, None) or (None, kustomize's error)."""
        run = subprocess.run(["kubectl", "kustomize", str(self.dir)], capture_output=True, text=True)
        if run.returncode != 0:
            return None, run.stderr
        return [doc for doc in yaml.safe_load_all(run.stdout) if doc], None

    def cleanup(self):
        for path in sorted(self.dir.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        self.dir.rmdir()


def find(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    if len(found) != 1:
        raise AssertionError("%d %s/%s rendered" % (len(found), kind, name))
    return found[0]


def by_name(items, key="name"):
    return {item[key]: item for item in items}


class MergeTestCase(unittest.TestCase):
    def build(self, resources, components, extra=None):
        build = Build(resources, components, extra)
        self.addCleanup(build.cleanup)
        return build.render()

    def render(self, resources, components, extra=None):
        docs, error = self.build(resources, components, extra)
        self.assertIsNone(error)
        return docs

    def assertUserPrometheusKept(self, spec):
        """The user's volumes, volumeMounts, containers and remote write, unchanged."""
        self.assertEqual(by_name(spec["volumes"])[USER_VOLUME["name"]], USER_VOLUME)
        self.assertIn(USER_MOUNT, spec["volumeMounts"])
        containers = by_name(spec["containers"])
        for container in USER_CONTAINERS:
            self.assertEqual(containers[container["name"]], container)
        self.assertIn(USER_REMOTE_WRITE, spec["remoteWrite"])
        volumes = {v["name"] for v in spec["volumes"]}
        self.assertTrue({m["name"] for m in spec["volumeMounts"]} <= volumes, "a mount names no volume")


class OperatorComponentsTest(MergeTestCase):
    def test_sidecar_operator_adds_its_entries_beside_the_users(self):
        docs = self.render([user_prometheus()], ["sidecar-operator"])
        spec = find(docs, "Prometheus")["spec"]
        self.assertUserPrometheusKept(spec)
        containers = by_name(spec["containers"])
        self.assertEqual(set(containers), {"config-reloader", "oauth-proxy", vm.CORRECTOR})
        corrector = containers[vm.CORRECTOR]
        volumes = {v["name"] for v in spec["volumes"]}
        self.assertTrue({m["name"] for m in corrector["volumeMounts"]} <= volumes)
        self.assertEqual([rw["url"] for rw in spec["remoteWrite"]].count(CORRECTOR_URL), 1)
        self.assertEqual(len(spec["remoteWrite"]), 2)
        self.assertEqual(spec["additionalScrapeConfigs"]["name"], "vllm-corrector-scrape-config")
        find(docs, "Secret", "vllm-corrector-scrape-config")
        # The rest of the contract holds on the merged resource too.
        found = list(vm.check_contract(docs, "sidecar-operator", vm.cargo_version()))
        found += list(vm.validate_schemas(docs, ["1.29"]))
        self.assertEqual(found, [])

    def test_sidecar_operator_refuses_to_replace_the_users_additional_scrape_configs(self):
        docs, error = self.build([user_prometheus(additional_scrape_configs=True)], ["sidecar-operator"])
        self.assertIsNone(docs, "rendered, so the user's additionalScrapeConfigs was replaced")
        self.assertIn("/spec/additionalScrapeConfigs", error)

    def test_sidecar_operator_core_leaves_the_users_additional_scrape_configs(self):
        docs = self.render([user_prometheus(additional_scrape_configs=True)], ["sidecar-operator/core"])
        spec = find(docs, "Prometheus")["spec"]
        self.assertUserPrometheusKept(spec)
        self.assertEqual(spec["additionalScrapeConfigs"], USER_SCRAPE_SECRET)
        self.assertIn(vm.CORRECTOR, by_name(spec["containers"]))
        self.assertIn(CORRECTOR_URL, [rw["url"] for rw in spec["remoteWrite"]])
        self.assertFalse([d for d in docs if d["kind"] == "Secret"])

    def test_remote_write_operator_adds_its_entry_beside_the_users(self):
        docs = self.render([user_prometheus(additional_scrape_configs=True)], ["remote-write-operator"])
        prometheus = find(docs, "Prometheus")
        spec = prometheus["spec"]
        self.assertUserPrometheusKept(spec)
        self.assertEqual([rw["url"] for rw in spec["remoteWrite"]],
                         [STANDALONE_URL, USER_REMOTE_WRITE["url"]])
        want = user_prometheus(additional_scrape_configs=True)["spec"]
        self.assertEqual({k: v for k, v in spec.items() if k != "remoteWrite"},
                         {k: v for k, v in want.items() if k != "remoteWrite"})

    def test_sidecar_operator_pvc_moves_only_the_correctors_state(self):
        user = user_prometheus()
        user["metadata"]["name"] = "kube-prometheus-stack-prometheus"
        docs = self.render([user], ["sidecar-operator", "sidecar-operator-pvc"])
        spec = find(docs, "Prometheus")["spec"]
        self.assertUserPrometheusKept(spec)
        self.assertEqual([v["name"] for v in spec["volumes"]], [USER_VOLUME["name"]])
        corrector = by_name(spec["containers"])[vm.CORRECTOR]
        self.assertEqual(corrector["volumeMounts"], [{
            "name": "prometheus-kube-prometheus-stack-prometheus-db",
            "mountPath": "/var/lib/vllm-corrector", "subPath": "vllm-corrector"}])

    def test_sidecar_operator_pvc_listed_first_stops_the_build(self):
        docs, error = self.build([user_prometheus()], ["sidecar-operator-pvc", "sidecar-operator"])
        self.assertIsNone(docs, "rendered a half-patched corrector container")
        self.assertIn("spec.containers.[name=vllm-corrector].image` is missing", error)

    def test_a_users_own_patch_after_the_component_merges_too(self):
        # The merge keys hold for the whole build: tuning the corrector's memory limit
        # in the user's kustomization keeps every other container, and a patch of a
        # built-in kind (a Deployment's containers) still merges as kustomize always did.
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": {"name": "grafana", "namespace": "monitoring"},
                      "spec": {"selector": {"matchLabels": {"app": "grafana"}},
                               "template": {"metadata": {"labels": {"app": "grafana"}},
                                            "spec": {"containers": [{"name": "grafana", "image": "grafana"}]}}}}
        patches = [
            {"patch": yaml.safe_dump({"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
                                      "metadata": {"name": "k8s", "namespace": "monitoring"},
                                      "spec": {"containers": [{"name": vm.CORRECTOR,
                                                               "resources": {"limits": {"memory": "1Gi"}}}]}})},
            {"patch": yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment",
                                      "metadata": {"name": "grafana", "namespace": "monitoring"},
                                      "spec": {"template": {"spec": {"containers": [
                                          {"name": "sidecar", "image": "sidecar"}]}}}})},
        ]
        docs = self.render([user_prometheus(), deployment], ["sidecar-operator"], {"patches": patches})
        spec = find(docs, "Prometheus")["spec"]
        self.assertUserPrometheusKept(spec)
        corrector = by_name(spec["containers"])[vm.CORRECTOR]
        self.assertEqual(corrector["resources"]["limits"]["memory"], "1Gi")
        self.assertEqual(corrector["resources"]["requests"]["memory"], "128Mi")
        pod = find(docs, "Deployment")["spec"]["template"]["spec"]
        self.assertEqual({c["name"] for c in pod["containers"]}, {"grafana", "sidecar"})

    def test_a_build_that_sets_its_own_openapi_schema_fails_instead_of_replacing_lists(self):
        # kustomize keeps the first schema of a build; the user's wins and the merge keys
        # are lost. The canary of prometheus-merge-keys turns that into an error.
        build = Build([user_prometheus()], ["sidecar-operator"], {"openapi": {"path": "schema.json"}})
        self.addCleanup(build.cleanup)
        (build.dir / "schema.json").write_text('{"definitions": {}}', encoding="utf-8")
        docs, error = build.render()
        self.assertIsNone(docs, "rendered with the corrector's lists replacing the user's")
        self.assertIn("prometheus-merge-keys", error)
        self.assertIn("/spec/items/1", error)


class PlainSidecarTest(MergeTestCase):
    def test_sidecar_adds_its_container_and_volume_beside_the_users(self):
        user = user_statefulset()
        docs = self.render([user], ["sidecar"])
        statefulset = find(docs, "StatefulSet")
        pod = statefulset["spec"]["template"]["spec"]
        containers = by_name(pod["containers"])
        self.assertEqual(set(containers), {"prometheus", "oauth-proxy", vm.CORRECTOR})
        for container in user["spec"]["template"]["spec"]["containers"]:
            self.assertEqual(containers[container["name"]], container)
        self.assertEqual(by_name(pod["volumes"])[USER_VOLUME["name"]], USER_VOLUME)
        self.assertEqual(statefulset["spec"]["volumeClaimTemplates"], user["spec"]["volumeClaimTemplates"])
        volumes = {v["name"] for v in pod["volumes"]} | {"data"}
        for container in pod["containers"]:
            self.assertTrue({m["name"] for m in container.get("volumeMounts", [])} <= volumes)


    def test_sidecar_pvc_moves_only_the_correctors_state(self):
        user = user_statefulset()
        docs = self.render([user], ["sidecar", "sidecar-pvc"])
        statefulset = find(docs, "StatefulSet")
        pod = statefulset["spec"]["template"]["spec"]
        containers = by_name(pod["containers"])
        for container in user["spec"]["template"]["spec"]["containers"]:
            self.assertEqual(containers[container["name"]], container)
        self.assertEqual(pod["volumes"], [USER_VOLUME])
        self.assertEqual(statefulset["spec"]["volumeClaimTemplates"], user["spec"]["volumeClaimTemplates"])
        self.assertEqual(containers[vm.CORRECTOR]["volumeMounts"], [{
            "name": "data", "mountPath": "/var/lib/vllm-corrector", "subPath": "vllm-corrector"}])


    def test_sidecar_pvc_listed_first_stops_the_build(self):
        docs, error = self.build([user_statefulset()], ["sidecar-pvc", "sidecar"])
        self.assertIsNone(docs, "rendered a half-patched corrector container")
        self.assertIn("containers.[name=vllm-corrector].image` is missing", error)


class HelmValuesTest(unittest.TestCase):
    """kube-prometheus-stack: Helm merges values maps and replaces lists."""

    VALUES = vm.ROOT / "deploy" / "kube-prometheus-stack" / "values.yaml"

    def test_the_remote_write_is_appended_to_the_users(self):
        user = {"prometheus": {"prometheusSpec": {"remoteWrite": [USER_REMOTE_WRITE],
                                                  "externalLabels": {"cluster": "prod"}}}}
        ours = yaml.safe_load(self.VALUES.read_text(encoding="utf-8"))
        for values in (vm.helm_merge(user, ours), vm.helm_merge(ours, user)):
            spec, _ = vm.chart_prometheus_spec(values["prometheus"]["prometheusSpec"])
            self.assertEqual([rw["url"] for rw in spec["remoteWrite"]], [USER_REMOTE_WRITE["url"], CORRECTOR_URL])
            self.assertEqual(spec["externalLabels"], {"cluster": "prod"})

    def test_helm_merge_replaces_lists_and_merges_maps(self):
        # What the values file's header warns about: lists are not merged by Helm.
        merged = vm.helm_merge({"a": {"b": 1, "l": [1]}}, {"a": {"c": 2, "l": [2]}})
        self.assertEqual(merged, {"a": {"b": 1, "c": 2, "l": [2]}})


if __name__ == "__main__":
    unittest.main()
