#!/usr/bin/env python3
"""Offline contract check: validates saved rematd responses against the
response schemas of openapi.yaml.

Usage: check_schema.py OPENAPI.yaml MANIFEST
MANIFEST lines: METHOD PATH-TEMPLATE STATUS CONTENT-TYPE FILE
(e.g. "post /v1/plans 201 application/json /tmp/x/3.json"); a PATH-TEMPLATE
of "-" checks the body against the Problem schema alone.  Each body is
validated with the Draft 2020-12 validator (OpenAPI 3.1 schemas are JSON
Schema 2020-12), its references resolved in the document."""
import json
import sys

import jsonschema
import yaml


def deref(node, doc):
    """Follows the $ref of a response, parameter or header (one that is only
    a reference) to the object it names."""
    while isinstance(node, dict) and "$ref" in node:
        target = doc
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def validator(schema, doc):
    """A Draft 2020-12 validator of a schema of the document: the schema is
    made the root of a copy that carries the document's components, so its
    "#/components/..." references (recursive ones included: Layer,
    JsonValue) resolve as they do in openapi.yaml."""
    root = dict(schema) if isinstance(schema, dict) else {"allOf": [schema]}
    root["components"] = doc["components"]
    return jsonschema.Draft202012Validator(root)


def main():
    with open(sys.argv[1]) as f:
        doc = yaml.safe_load(f)
    failures = 0
    checked = 0
    with open(sys.argv[2]) as f:
        lines = [l.split() for l in f if l.strip()]
    problem = validator({"$ref": "#/components/schemas/Problem"}, doc)
    for method, path, status, ctype, body_file in lines:
        if path == "-":
            # An error from any route: the Problem schema itself.
            with open(body_file) as f:
                errors = list(problem.iter_errors(json.load(f)))
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
        resp = deref(resp, doc)
        content = resp.get("content", {})
        if status == "204" or not content:
            checked += 1
            continue
        base = ctype.split(";")[0]
        if base not in content and "*/*" in content:
            base = "*/*"  # libmicrohttpd's own pages, sent without a Content-Type
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
        errors = list(validator(schema, doc).iter_errors(body))
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
