#!/usr/bin/env python3
"""Offline contract check: validates saved rematd responses against the
response schemas of openapi.yaml.

Usage: check_schema.py OPENAPI.yaml MANIFEST
MANIFEST lines: METHOD PATH-TEMPLATE STATUS CONTENT-TYPE FILE
(e.g. "post /v1/plans 201 application/json /tmp/x/3.json"); a PATH-TEMPLATE
of "-" checks the body against the Problem schema alone.  Every
$ref is resolved in place (the document has no recursive references but
Layer, which is cut at depth), then each body is validated with the
Draft 2020-12 validator (OpenAPI 3.1 schemas are JSON Schema 2020-12)."""
import json
import sys

import jsonschema
import yaml


def resolve(node, doc, depth=0):
    """Inlines $refs; depth counts references followed, so the one
    recursive schema (Layer) is cut to an accept-all {} deep down."""
    if isinstance(node, dict):
        if "$ref" in node:
            if depth > 8:
                return {}
            target = doc
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            merged = dict(resolve(target, doc, depth + 1))
            for k, v in node.items():
                if k != "$ref":
                    merged[k] = resolve(v, doc, depth)
            return merged
        return {k: resolve(v, doc, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(v, doc, depth) for v in node]
    return node


def main():
    with open(sys.argv[1]) as f:
        doc = yaml.safe_load(f)
    failures = 0
    checked = 0
    with open(sys.argv[2]) as f:
        lines = [l.split() for l in f if l.strip()]
    problem = resolve(doc["components"]["schemas"]["Problem"], doc)
    for method, path, status, ctype, body_file in lines:
        if path == "-":
            # An error from any route: the Problem schema itself.
            with open(body_file) as f:
                errors = list(jsonschema.Draft202012Validator(problem).iter_errors(json.load(f)))
            for e in errors[:3]:
                print(f"FAIL {method} {status} problem: {e.message}")
            failures += 1 if errors else 0
            checked += 1
            continue
        op = doc["paths"].get(path, {}).get(method.lower())
        if op is None:
            print(f"FAIL {method} {path}: not in openapi.yaml")
            failures += 1
            continue
        resp = op["responses"].get(status)
        if resp is None:
            print(f"FAIL {method} {path} {status}: status not documented")
            failures += 1
            continue
        resp = resolve(resp, doc)
        content = resp.get("content", {})
        if status == "204" or not content:
            checked += 1
            continue
        base = ctype.split(";")[0]
        if base not in content:
            print(f"FAIL {method} {path} {status}: content type {ctype} not documented "
                  f"({', '.join(content)})")
            failures += 1
            continue
        schema = content[base]["schema"]
        with open(body_file, "rb") as f:
            raw = f.read()
        if not base.endswith("json"):
            checked += 1
            continue
        try:
            body = json.loads(raw)
        except ValueError as e:
            print(f"FAIL {method} {path} {status}: not JSON: {e}")
            failures += 1
            continue
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(body))
        if errors:
            failures += 1
            for e in errors[:3]:
                print(f"FAIL {method} {path} {status}: {e.message} at "
                      f"/{'/'.join(str(p) for p in e.absolute_path)}")
        checked += 1
    print(f"checked {checked} responses against openapi.yaml, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
