#!/usr/bin/env python3
"""check_kustomization.py on a user's kustomization of each kind, built in a temporary directory.

Run: python3 -m unittest deploy/tools/test_check_kustomization.py  (needs kubectl, as
scripts/check-deploy.sh has it).

A Prometheus that already sets additionalScrapeConfigs is told what to include instead, not
"testing value ... failed"; the generated Secret and the PrometheusRules carry an explicit
namespace (monitoring) when the user's kustomization sets none, so they never land in kubectl's
current namespace, and a Prometheus in another namespace is told to set one; a kustomization
that sets the Prometheus' namespace passes.
"""
import os
import pathlib
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_kustomization as ck  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
SIDECAR = ROOT / "deploy" / "kubernetes" / "components" / "sidecar-operator"
ALERTS = ROOT / "deploy" / "alerts"


def prometheus(namespace=None, additional=False):
    meta = {"name": "k8s"}
    if namespace:
        meta["namespace"] = namespace
    spec = {"replicas": 2}
    if additional:
        spec["additionalScrapeConfigs"] = {"name": "mine", "key": "jobs.yaml"}
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus", "metadata": meta, "spec": spec}


class CheckKustomization(unittest.TestCase):
    def kustomization(self, prom, namespace=None):
        """A user's directory: `prom`, deploy/alerts and the sidecar-operator component."""
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        path = pathlib.Path(directory.name)
        (path / "prometheus.yaml").write_text(yaml.safe_dump(prom))
        k = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
             "resources": ["prometheus.yaml", os.path.relpath(ALERTS, path)],
             "components": [os.path.relpath(SIDECAR, path)]}
        if namespace:
            k["namespace"] = namespace
        (path / "kustomization.yaml").write_text(yaml.safe_dump(k))
        return str(path)

    def test_a_prometheus_with_its_own_additional_scrape_configs_is_told_what_to_include(self):
        directory = self.kustomization(prometheus("monitoring", additional=True))
        problems, _ = ck.check(directory)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("already sets spec.additionalScrapeConfigs", problems[0])
        self.assertIn("Include components/sidecar-operator/core instead", problems[0])
        self.assertIn("scrape-config/scrape-configs.yaml", problems[0])

    def test_the_secret_and_rules_get_a_namespace_without_one_in_the_kustomization(self):
        directory = self.kustomization(prometheus("monitoring"))
        docs, error = ck.render(directory)
        self.assertIsNone(error)
        secret = [d for d in docs if d["kind"] == "Secret"]
        rules = [d for d in docs if d["kind"] == "PrometheusRule"]
        self.assertEqual([ck.namespace(d) for d in secret], ["monitoring"])
        self.assertEqual([ck.namespace(d) for d in rules], ["monitoring", "monitoring"])
        self.assertEqual(ck.check(directory)[0], [])

    def test_a_prometheus_elsewhere_is_told_to_set_the_namespace(self):
        directory = self.kustomization(prometheus("observability"))
        problems, _ = ck.check(directory)
        self.assertEqual(len(problems), 3, problems)
        self.assertIn("Secret vllm-corrector-scrape-config is in namespace monitoring, but "
                      "Prometheus k8s in namespace observability names it", problems[0])
        self.assertIn("set namespace: observability in your kustomization", problems[0])
        for problem in problems[1:]:
            self.assertIn("is in namespace monitoring, but Prometheus k8s selects rules of its "
                          "own namespace observability only", problem)

    def test_a_prometheus_without_a_namespace_is_told_to_set_one(self):
        directory = self.kustomization(prometheus())
        problems, _ = ck.check(directory)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("Prometheus k8s has no namespace", problems[0])

    def test_the_kustomizations_namespace_moves_everything_and_passes(self):
        directory = self.kustomization(prometheus(), namespace="observability")
        problems, summary = ck.check(directory)
        self.assertEqual(problems, [])
        self.assertIn("1 Prometheus, 2 PrometheusRule; namespaces observability", summary)

    def test_a_secret_or_rule_without_a_namespace_is_named(self):
        docs = [prometheus("monitoring"),
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": ck.SCRAPE_SECRET}},
                {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
                 "metadata": {"name": "vllm-corrector"}}]
        problems = ck.problems_of("d", docs)
        self.assertEqual(len(problems), 2, problems)
        self.assertIn("Secret vllm-corrector-scrape-config has no namespace", problems[0])
        self.assertIn("PrometheusRule vllm-corrector has no namespace", problems[1])


if __name__ == "__main__":
    unittest.main()
