#!/usr/bin/env python3
"""Extract the OpenAPI v3 schemas of CustomResourceDefinitions into JSON files.

Usage: extract_crd_schema.py OUT_DIR CRD.yaml [CRD.yaml ...]

For every served version of every CRD given, writes
``OUT_DIR/<group>_<version>_<kind in lower case>.json`` holding
``spec.versions[].schema.openAPIV3Schema`` with every ``description`` removed
(the descriptions are documentation, about 80 % of the bytes, and play no part
in validation). Keys are sorted so that a re-extraction diffs cleanly.

This is how ``deploy/schemas/`` was produced from the Prometheus Operator CRDs
(see ``deploy/schemas/README.md``); ``validate_manifests.py`` reads the result.
"""
import json
import pathlib
import sys

import yaml


def strip_descriptions(node):
    """Return ``node`` without any ``description`` key, recursively.

    Only the schema keyword is removed: a property that is *named*
    ``description`` (a key under ``properties``) is kept.
    """
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                out[key] = {name: strip_descriptions(sub) for name, sub in value.items()}
            elif key == "description":
                continue
            else:
                out[key] = strip_descriptions(value)
        return out
    if isinstance(node, list):
        return [strip_descriptions(item) for item in node]
    return node


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = pathlib.Path(argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    for path in argv[2:]:
        with open(path, encoding="utf-8") as handle:
            for doc in yaml.safe_load_all(handle):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc["spec"]
                for version in spec["versions"]:
                    if not version.get("served", True):
                        continue
                    schema = strip_descriptions(version["schema"]["openAPIV3Schema"])
                    name = "%s_%s_%s.json" % (spec["group"], version["name"], spec["names"]["kind"].lower())
                    target = out_dir / name
                    target.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n", encoding="utf-8")
                    print("wrote %s (%d bytes)" % (target, target.stat().st_size))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
