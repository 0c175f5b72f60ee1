#!/usr/bin/env python3
"""Check a kustomization that includes the Prometheus Operator forms, and say what is wrong in words.

Usage: check_kustomization.py DIR [DIR ...]

Renders each DIR with ``kubectl kustomize`` (the load restriction lifted, as the examples
need) and checks what the Operator needs and kustomize cannot check itself:

* A Prometheus that already sets ``spec.additionalScrapeConfigs``: the sidecar-operator
  component stops the build there (kustomize says only "testing value
  /spec/additionalScrapeConfigs failed"); this names the conflict and the way out.
* Every Prometheus has a namespace, and the Secret its ``additionalScrapeConfigs`` names is
  in that namespace (the Operator reads it from the Prometheus' own namespace).
* Every PrometheusRule of vllm-corrector has a namespace, and one the Prometheus selects: its
  own namespace unless ``ruleNamespaceSelector`` is set (``{}`` selects every namespace; a
  label selector is not evaluated here and passes).

A resource without a namespace lands in kubectl's current namespace when applied, where the
Operator may not look. Prints one line per problem and exits 1 if any; otherwise one line
per DIR saying what was checked, and exits 0. Tested by test_check_kustomization.py; run on
the shipped examples by scripts/check-deploy.sh.
"""
import subprocess
import sys

import yaml

SCRAPE_SECRET = "vllm-corrector-scrape-config"
TEST_FAILED = "testing value /spec/additionalScrapeConfigs failed"

CONFLICT = (
    "{dir}: a Prometheus resource already sets spec.additionalScrapeConfigs. That field names "
    "one Secret, so components/sidecar-operator cannot add its scrape job beside yours, and it "
    "stops the build rather than replace yours (kustomize says only: " + TEST_FAILED + "). "
    "Include components/sidecar-operator/core instead of components/sidecar-operator, and add "
    "the job in components/sidecar-operator/scrape-config/scrape-configs.yaml to the Secret "
    "your additionalScrapeConfigs names (docs/DEPLOY.md, \"2. Sidecar with Prometheus Operator (kube-prometheus, kube-prometheus-stack)\")."
)


def render(directory):
    """(documents, None), or (None, kustomize's error text)."""
    run = subprocess.run(
        ["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", directory],
        capture_output=True, text=True)
    if run.returncode != 0:
        return None, run.stderr.strip() or run.stdout.strip()
    return [d for d in yaml.safe_load_all(run.stdout) if d], None


def is_kind(doc, kind, group="monitoring.coreos.com"):
    api = doc.get("apiVersion", "")
    return doc.get("kind") == kind and (group is None or api.split("/")[0] == group)


def namespace(doc):
    return (doc.get("metadata") or {}).get("namespace")


def name(doc):
    return (doc.get("metadata") or {}).get("name", "?")


def problems_of(directory, docs):
    """Each problem of a rendered kustomization, in words."""
    out = []
    prometheuses = [d for d in docs if is_kind(d, "Prometheus")]
    secrets = [d for d in docs if is_kind(d, "Secret", group=None) and d.get("apiVersion") == "v1"]
    rules = [d for d in docs if is_kind(d, "PrometheusRule") and name(d).startswith("vllm-corrector")]
    for p in prometheuses:
        if not namespace(p):
            out.append("%s: Prometheus %s has no namespace: set namespace: in your kustomization "
                       "(the namespace the Prometheus runs in)" % (directory, name(p)))
    for s in secrets:
        if name(s) != SCRAPE_SECRET:
            continue
        if not namespace(s):
            out.append("%s: Secret %s has no namespace: applied, it lands in kubectl's current "
                       "namespace, where the Operator does not look; set namespace: in your "
                       "kustomization to the Prometheus' namespace" % (directory, SCRAPE_SECRET))
            continue
        for p in prometheuses:
            ref = (p.get("spec") or {}).get("additionalScrapeConfigs") or {}
            if ref.get("name") == SCRAPE_SECRET and namespace(p) and namespace(p) != namespace(s):
                out.append("%s: Secret %s is in namespace %s, but Prometheus %s in namespace %s "
                           "names it in spec.additionalScrapeConfigs: the Operator reads it from %s; "
                           "set namespace: %s in your kustomization"
                           % (directory, SCRAPE_SECRET, namespace(s), name(p), namespace(p),
                              namespace(p), namespace(p)))
    for r in rules:
        if not namespace(r):
            out.append("%s: PrometheusRule %s has no namespace: applied, it lands in kubectl's "
                       "current namespace; set namespace: in your kustomization" % (directory, name(r)))
            continue
        for p in prometheuses:
            selector = (p.get("spec") or {}).get("ruleNamespaceSelector")
            if selector is None and namespace(p) and namespace(r) != namespace(p):
                out.append("%s: PrometheusRule %s is in namespace %s, but Prometheus %s selects "
                           "rules of its own namespace %s only (no ruleNamespaceSelector): move "
                           "the rule there, or set ruleNamespaceSelector"
                           % (directory, name(r), namespace(r), name(p), namespace(p)))
    return out


def check(directory):
    """(problems, summary): the problems in words, and what was checked."""
    docs, error = render(directory)
    if docs is None:
        if TEST_FAILED in error:
            return [CONFLICT.format(dir=directory)], None
        return ["%s: kubectl kustomize failed: %s" % (directory, error)], None
    problems = problems_of(directory, docs)
    counted = {kind: sum(1 for d in docs if is_kind(d, kind)) for kind in ("Prometheus", "PrometheusRule")}
    summary = "%s: ok (%d Prometheus, %d PrometheusRule; namespaces %s)" % (
        directory, counted["Prometheus"], counted["PrometheusRule"],
        ",".join(sorted({namespace(d) for d in docs if namespace(d)})) or "none")
    return problems, summary


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    failed = False
    for directory in argv[1:]:
        problems, summary = check(directory)
        for problem in problems:
            print(problem)
        if problems:
            failed = True
        else:
            print(summary)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
