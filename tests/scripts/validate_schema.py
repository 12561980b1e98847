"""Validates JSON files against a JSON Schema with the `jsonschema` package
(an independent validator: tests/tests/docs.rs checks Weft's generated
graph schema with it).

Usage: python3 validate_schema.py SCHEMA.json < FILES (one path a line).
Prints one JSON object a line: {"file": PATH, "ok": BOOL, "error": TEXT}.
"""
import json
import sys

import jsonschema

schema = json.load(open(sys.argv[1]))
cls = jsonschema.validators.validator_for(schema)
cls.check_schema(schema)
validator = cls(schema)
for path in sys.stdin.read().splitlines():
    if not path:
        continue
    try:
        doc = json.load(open(path))
    except ValueError as e:
        print(json.dumps({"file": path, "ok": False, "error": "not JSON: %s" % e}))
        continue
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        where = "/".join(str(p) for p in best.absolute_path)
        print(json.dumps({"file": path, "ok": False, "error": "%s: %s" % (where, best.message[:300])}))
    else:
        print(json.dumps({"file": path, "ok": True, "error": ""}))
