#!/usr/bin/env python3
"""Tests that validate_manifests.py rejects what it must reject.

Run: python3 -m unittest deploy/tools/test_validate_manifests.py  (needs kubectl,
promtool and kubernetes-validate, as scripts/check-deploy.sh installs them).

Each test renders a shipped kustomization, breaks one promise in the rendered
objects, and asserts that the validator reports exactly that problem; the
unbroken render must pass, so a validator that accepts everything fails here.
"""
import base64
import pathlib
import subprocess
import sys
import unittest

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import validate_manifests as vm  # noqa: E402

KUSTOMIZE = vm.ROOT / "deploy" / "kubernetes"
VERSIONS = ["1.29"]


def render(path):
    out = subprocess.run(["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def find(docs, kind, name=None):
    for doc in docs:
        if doc["kind"] == kind and (name is None or doc["metadata"]["name"] == name):
            return doc
    raise LookupError(kind)


def problems(docs, profile):
    found = list(vm.validate_schemas(docs, VERSIONS))
    return found + list(vm.check_contract(docs, profile, vm.cargo_version()))


def corrector(docs):
    return find(docs, "Deployment", vm.CORRECTOR)["spec"]["template"]["spec"]["containers"][0]


class StandaloneTest(unittest.TestCase):
    def setUp(self):
        self.docs = render(KUSTOMIZE / "examples" / "standalone-operator")

    def assertOneProblem(self, fragment):
        found = problems(self.docs, "standalone-operator")
        self.assertEqual(len(found), 1, found)
        self.assertIn(fragment, found[0])

    def test_shipped_render_passes(self):
        self.assertEqual(problems(self.docs, "standalone-operator"), [])

    def test_unknown_container_field_is_rejected_by_the_core_schema(self):
        corrector(self.docs)["livenesProbe"] = {}
        self.assertOneProblem("livenesProbe")

    def test_misspelt_servicemonitor_field_is_rejected_by_the_crd_schema(self):
        endpoint = find(self.docs, "ServiceMonitor")["spec"]["endpoints"][0]
        endpoint["honorLabel"] = endpoint.pop("honorLabels")
        found = problems(self.docs, "standalone-operator")
        self.assertTrue(any("honorLabel'" in p for p in found), found)
        self.assertTrue(any("must set honorLabels: true" in p for p in found), found)

    def test_wrong_type_in_prometheus_resource_is_rejected(self):
        find(self.docs, "Prometheus")["spec"]["replicas"] = "two"
        self.assertOneProblem("'two' is not of type 'integer'")

    def test_unknown_metadata_field_of_a_custom_resource_is_rejected(self):
        find(self.docs, "PrometheusRule")["metadata"]["label"] = {"a": "b"}
        self.assertOneProblem("metadata")

    def test_remote_write_without_the_vllm_keep_rule_is_reported(self):
        del find(self.docs, "Prometheus")["spec"]["remoteWrite"][0]["writeRelabelConfigs"]
        self.assertOneProblem("must keep only the series the rules read")

    def test_remote_write_keeping_every_vllm_series_is_reported(self):
        rule = find(self.docs, "Prometheus")["spec"]["remoteWrite"][0]["writeRelabelConfigs"][0]
        rule.update(sourceLabels=["__name__"], regex="vllm:.*")
        self.assertOneProblem("must keep only the series the rules read")

    def test_remote_write_to_another_service_is_reported(self):
        find(self.docs, "Prometheus")["spec"]["remoteWrite"][0]["url"] = "http://elsewhere:9490/api/v1/write"
        self.assertOneProblem("needs exactly one remoteWrite")

    def test_writable_root_file_system_is_reported(self):
        corrector(self.docs)["securityContext"]["readOnlyRootFilesystem"] = False
        self.assertOneProblem("readOnlyRootFilesystem")

    def test_probe_on_another_port_is_reported(self):
        corrector(self.docs)["readinessProbe"]["httpGet"]["port"] = 9090
        self.assertOneProblem("readinessProbe port")

    def test_image_not_tagged_with_the_crate_version_is_reported(self):
        corrector(self.docs)["image"] = "vllm-corrector:latest"
        self.assertOneProblem("is not tagged")

    def test_two_replicas_are_reported(self):
        find(self.docs, "Deployment", vm.CORRECTOR)["spec"]["replicas"] = 2
        self.assertOneProblem("1 replica")

    def test_servicemonitor_dropping_the_senders_external_labels_is_reported(self):
        endpoint = find(self.docs, "ServiceMonitor")["spec"]["endpoints"][0]
        endpoint["metricRelabelings"] = [{"action": "labeldrop", "regex": "prometheus_replica"}]
        self.assertOneProblem("drops prometheus_replica, which tell several senders' series apart")

    def test_no_storage_path_is_reported(self):
        container = corrector(self.docs)
        container["args"] = [a for a in container["args"] if not a.startswith("--storage.path=")]
        self.assertOneProblem("no --storage.path")

    def test_storage_path_without_a_volume_is_reported(self):
        container = corrector(self.docs)
        container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != "state"]
        self.assertOneProblem("no volume mounted at --storage.path /var/lib/vllm-corrector")

    def test_state_volume_missing_from_the_pod_is_reported(self):
        pod = find(self.docs, "Deployment", vm.CORRECTOR)["spec"]["template"]["spec"]
        pod["volumes"] = [v for v in pod["volumes"] if v["name"] != "state"]
        self.assertOneProblem("the volume state mounted at /var/lib/vllm-corrector is not in the pod")

    def test_prometheusrule_drifting_from_the_rules_file_is_reported(self):
        find(self.docs, "PrometheusRule")["spec"]["groups"][0]["rules"].pop()
        self.assertOneProblem("groups differ")

    def test_slo_prometheusrule_drifting_from_the_slo_rules_file_is_reported(self):
        find(self.docs, "PrometheusRule", "vllm-corrector-slos")["spec"]["groups"][2]["rules"].pop()
        self.assertOneProblem("PrometheusRule/vllm-corrector-slos: groups differ from deploy/alerts/slo.rules.yml")

    def test_a_missing_slo_prometheusrule_is_reported(self):
        self.docs.remove(find(self.docs, "PrometheusRule", "vllm-corrector-slos"))
        self.assertOneProblem("want both vllm-corrector, vllm-corrector-slos")


class StatePvcTest(unittest.TestCase):
    def test_shipped_renders_pass(self):
        for path, profile in (("overlays/standalone-pvc", "standalone"), ("examples/sidecar-pvc", "sidecar"),
                              ("examples/sidecar-operator-pvc", "sidecar-operator")):
            with self.subTest(path=path):
                self.assertEqual(problems(render(KUSTOMIZE / path), profile), [])

    def test_claim_not_rendered_is_reported(self):
        docs = [d for d in render(KUSTOMIZE / "overlays" / "standalone-pvc") if d["kind"] != "PersistentVolumeClaim"]
        found = problems(docs, "standalone")
        self.assertEqual(len(found), 1, found)
        self.assertIn("the PersistentVolumeClaim vllm-corrector-state of volume state is not rendered", found[0])

    def test_prometheus_storage_mounted_without_a_subpath_is_reported(self):
        docs = render(KUSTOMIZE / "examples" / "sidecar-operator-pvc")
        container = next(c for c in find(docs, "Prometheus")["spec"]["containers"] if c["name"] == vm.CORRECTOR)
        self.assertEqual(container["volumeMounts"][0]["name"], "prometheus-k8s-db")
        del container["volumeMounts"][0]["subPath"]
        found = problems(docs, "sidecar-operator")
        self.assertEqual(len(found), 1, found)
        self.assertIn("the volume prometheus-k8s-db is shared with another container: mount it with a subPath",
                      found[0])

    def test_a_storage_volume_of_another_name_is_reported(self):
        docs = render(KUSTOMIZE / "examples" / "sidecar-operator-pvc")
        prometheus = find(docs, "Prometheus")
        prometheus["spec"]["storage"]["volumeClaimTemplate"]["metadata"] = {"name": "tsdb"}
        found = problems(docs, "sidecar-operator")
        self.assertEqual(len(found), 1, found)
        self.assertIn("the volume prometheus-k8s-db mounted at /var/lib/vllm-corrector is not in the pod", found[0])


class SidecarTest(unittest.TestCase):
    def test_shipped_renders_pass(self):
        for profile in ("sidecar", "sidecar-operator"):
            with self.subTest(profile=profile):
                self.assertEqual(problems(render(KUSTOMIZE / "examples" / profile), profile), [])

    def test_patch_that_matched_nothing_is_reported(self):
        docs = render(KUSTOMIZE / "examples" / "sidecar")
        pod = find(docs, "StatefulSet")["spec"]["template"]["spec"]
        pod["containers"] = [c for c in pod["containers"] if c["name"] != vm.CORRECTOR]
        self.assertIn("sidecar: no vllm-corrector container rendered (did a patch target match nothing?)",
                      problems(docs, "sidecar"))

    def test_scrape_job_without_honor_labels_is_reported(self):
        docs = render(KUSTOMIZE / "examples" / "sidecar-operator")
        secret = find(docs, "Secret")
        key = next(iter(secret["data"]))
        jobs = yaml.safe_load(base64.b64decode(secret["data"][key]))
        jobs[0]["honor_labels"] = False
        secret["data"][key] = base64.b64encode(yaml.safe_dump(jobs).encode()).decode()
        found = problems(docs, "sidecar-operator")
        self.assertEqual(len(found), 1, found)
        self.assertIn("must set honor_labels: true", found[0])

    def scrape_jobs(self, docs):
        secret = find(docs, "Secret")
        key = next(iter(secret["data"]))
        return secret, key, yaml.safe_load(base64.b64decode(secret["data"][key]))

    def test_scrape_job_keeping_the_external_labels_is_reported(self):
        docs = render(KUSTOMIZE / "examples" / "sidecar-operator")
        secret, key, jobs = self.scrape_jobs(docs)
        del jobs[0]["metric_relabel_configs"]
        secret["data"][key] = base64.b64encode(yaml.safe_dump(jobs).encode()).decode()
        found = problems(docs, "sidecar-operator")
        self.assertEqual(len(found), 2, found)
        self.assertIn("must drop the external labels cluster, prometheus, prometheus_replica", found[0])
        self.assertIn("differ from those of deploy/prometheus/sidecar.yml", found[1])

    def test_an_external_label_the_scrape_job_keeps_is_reported(self):
        docs = render(KUSTOMIZE / "examples" / "sidecar-operator")
        find(docs, "Prometheus")["spec"]["externalLabels"]["region"] = "eu"
        find(docs, "Prometheus")["spec"]["replicaExternalLabelName"] = "replica"
        found = problems(docs, "sidecar-operator")
        self.assertEqual(len(found), 1, found)
        self.assertIn("must drop the external labels region, replica", found[0])

    def test_plain_sidecar_external_label_the_scrape_job_keeps_is_reported(self):
        docs = render(KUSTOMIZE / "examples" / "sidecar")
        config = next(doc for doc in docs if doc["kind"] == "ConfigMap" and "prometheus.yml" in doc["data"])
        config["data"]["prometheus.yml"] = config["data"]["prometheus.yml"].replace(
            "    cluster: example\n", "    cluster: example\n    datacenter: fra1\n")
        found = problems(docs, "sidecar")
        self.assertEqual(len(found), 1, found)
        self.assertIn("must drop the external labels datacenter", found[0])

    def test_invalid_prometheus_config_fails_promtool(self):
        docs = render(KUSTOMIZE / "examples" / "sidecar")
        config = next(doc for doc in docs if doc["kind"] == "ConfigMap" and "prometheus.yml" in doc["data"])
        config["data"]["prometheus.yml"] += "\nnot_a_prometheus_key: 1\n"
        found = problems(docs, "sidecar")
        self.assertEqual(len(found), 1, found)
        self.assertIn("promtool check config failed", found[0])


if __name__ == "__main__":
    unittest.main()


class HelmValuesTest(unittest.TestCase):
    VALUES = vm.ROOT / "deploy" / "kube-prometheus-stack" / "values.yaml"

    def problems(self, mutate=None):
        values = yaml.safe_load(self.VALUES.read_text(encoding="utf-8"))
        if mutate:
            mutate(values["prometheus"]["prometheusSpec"])
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
            yaml.safe_dump(values, handle)
        try:
            return list(vm.check_helm_values(handle.name, VERSIONS))
        finally:
            pathlib.Path(handle.name).unlink()

    def test_shipped_values_pass(self):
        self.assertEqual(self.problems(), [])

    def test_misspelt_prometheus_spec_field_is_rejected_by_the_crd_schema(self):
        def mutate(spec):
            spec["additionalRemoteWrites"] = spec.pop("additionalRemoteWrite")
        found = self.problems(mutate)
        self.assertTrue(any("additionalRemoteWrites" in p for p in found), found)

    def test_scrape_job_keeping_the_operators_external_labels_is_reported(self):
        def mutate(spec):
            spec["additionalScrapeConfigs"][0]["metric_relabel_configs"][0]["regex"] = "cluster"
        found = self.problems(mutate)
        self.assertEqual(len(found), 2, found)
        self.assertIn("must drop the external labels prometheus, prometheus_replica", found[0])

    def test_state_on_prometheus_storage_as_the_values_describe_passes(self):
        def mutate(spec):
            spec.pop("volumes")
            spec["containers"][0]["volumeMounts"] = [{"name": "prometheus-kube-prometheus-stack-prometheus-db",
                                                       "mountPath": "/var/lib/vllm-corrector",
                                                       "subPath": "vllm-corrector"}]
        self.assertEqual(self.problems(mutate), [])

    def test_state_volume_missing_is_reported(self):
        def mutate(spec):
            spec.pop("volumes")
        found = self.problems(mutate)
        self.assertEqual(len(found), 1, found)
        self.assertIn("the volume vllm-corrector-state mounted at /var/lib/vllm-corrector is not in the pod", found[0])

    def test_broad_keep_rule_is_reported(self):
        def mutate(spec):
            spec["additionalRemoteWrite"][0]["writeRelabelConfigs"][0]["regex"] = "vllm:.*"
        found = self.problems(mutate)
        self.assertEqual(len(found), 1, found)
        self.assertIn("must keep only the series the rules read", found[0])
