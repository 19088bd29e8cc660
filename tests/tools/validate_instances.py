#!/usr/bin/env python3
"""validate_instances.py - an independent check of texts loom generated
under JSON Schemas: reads lines of {"schema": ..., "text": "..."} on stdin,
parses each text with Python's json module and validates it with the
jsonschema package (Debian's python3-jsonschema) against its schema, in the
schema's own draft. Prints one line per failure and a last line
"validated N failed M"; exits 1 when any failed."""
import datetime
import json
import re
import sys

import jsonschema

# RFC 3339's time and date-time, which jsonschema checks only with a
# module Debian does not package: the shape by RFC 3339's grammar, the
# calendar by Python's own parser.
TIME = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$")
DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def is_time(s):
    if not isinstance(s, str):
        return True
    return TIME.match(s) is not None and datetime.time.fromisoformat(s.upper()) is not None


def is_date_time(s):
    if not isinstance(s, str):
        return True
    date, sep, time = s.partition("T") if "T" in s else s.partition("t")
    if not sep or DATE.match(date) is None or not is_time(time):
        return False
    datetime.date.fromisoformat(date)
    return True


def format_checker(cls):
    checker = cls.FORMAT_CHECKER
    checker.checks("time", raises=ValueError)(is_time)
    checker.checks("date-time", raises=ValueError)(is_date_time)
    return checker


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
        errors = list(cls(schema, format_checker=format_checker(cls)).iter_errors(instance))
        if errors:
            failed += 1
            print(f"invalid ({errors[0].message}): {text!r} under {json.dumps(schema)}")
    print(f"validated {n} failed {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
