#!/usr/bin/env python3
"""validate_instances.py - an independent check of texts loom generated
under JSON Schemas: reads lines of {"schema": ..., "text": "..."} on stdin,
parses each text with Python's json module and validates it with the
jsonschema package (Debian's python3-jsonschema) against its schema, in the
schema's own draft. Prints one line per failure and a last line
"validated N failed M"; exits 1 when any failed."""
import json
import sys

import jsonschema


def main():
    n = failed = 0
    for line in sys.stdin:
        case = json.loads(line)
        schema, text = case["schema"], case["text"]
        n += 1
        try:
            instance = json.loads(text)
        except ValueError as e:
            failed += 1
            print(f"not JSON ({e}): {text!r}")
            continue
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
        errors = list(cls(schema).iter_errors(instance))
        if errors:
            failed += 1
            print(f"invalid ({errors[0].message}): {text!r} under {json.dumps(schema)}")
    print(f"validated {n} failed {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
