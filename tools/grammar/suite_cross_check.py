#!/usr/bin/env python3
"""A wider check of the JSON Schema compiler than json_schema_suite_test: every compiled case of the
JSON-Schema-Test-Suite data (tests/grammar/data/json_schema_test_suite.jsonl) against every instance of its
file (not only its own tests), through `deepinfer grammar --jsonl`, with `jsonschema` as the reference
(Draft7Validator for draft7/, Draft202012Validator otherwise; formats asserted for the ones the compiler
constrains, as json_schema.h documents). Prints the invalid instances accepted (each one a bug) and the
valid ones rejected that stay rejected in the grammar's canonical spelling (schema_coverage.Canon: member
order, enum spelling), which are expected only for: formats jsonschema cannot check here, draft 2020-12's
format annotations, draft 7's $ref siblings (the CLI reads no draft option; json_schema_suite_test sets
JsonSchemaOptions::draft7_without_schema), and the member order dependencies give (Canon does not follow
their lowering).
Usage: suite_cross_check.py --bin build/X/bin/deepinfer"""
import argparse
import collections
import json
import os
import subprocess
import sys

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from schema_coverage import FORMATS, Canon, dumps  # noqa: E402


def run(binary, lines):
    out = subprocess.run([binary, "grammar", "--jsonl"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=False).stdout.splitlines()
    if len(out) != len(lines):
        sys.exit(f"the CLI answered {len(out)} of {len(lines)} lines")
    return [json.loads(o) for o in out]


def verdict(case, text):
    cls = jsonschema.Draft7Validator if case["id"].startswith("draft7/") else jsonschema.Draft202012Validator
    checker = jsonschema.FormatChecker(formats=[f for f in cls.FORMAT_CHECKER.checkers if f in FORMATS])
    try:
        return cls(case["schema"], format_checker=checker).is_valid(json.loads(text))
    except Exception:  # noqa: BLE001 - a schema jsonschema cannot evaluate (remote refs): no verdict
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--data", default="tests/grammar/data/json_schema_test_suite.jsonl")
    args = ap.parse_args()
    cases = [json.loads(line) for line in open(args.data, encoding="utf-8")]
    by_file = collections.defaultdict(list)
    for c in cases:
        by_file[c["id"].split("#")[0]].append(c)
    pairs = []
    for group in by_file.values():
        pool = list(dict.fromkeys(t for c in group for t, _ in c["tests"]))
        pairs += [(c, t) for c in group for t in pool]
    answers = run(args.bin, [json.dumps({"json_schema": c["schema"], "instance": t}) for c, t in pairs])
    accepted_invalid, rejected = [], []
    checked = 0
    for (c, t), a in zip(pairs, answers):
        if not a["compiled"]:
            continue
        v = verdict(c, t)
        if v is None:
            continue
        checked += 1
        if a["accepted"] and not v:
            accepted_invalid.append((c["id"], t))
        if v and not a["accepted"]:
            try:
                canonical = dumps(Canon(c["schema"]).canon(c["schema"], json.loads(t)))
            except Exception:  # noqa: BLE001 - the canonical form is best effort
                canonical = t
            rejected.append((c, t, canonical))
    again = run(args.bin, [json.dumps({"json_schema": c["schema"], "instance": ct}) for c, _, ct in rejected])
    still = [(c["id"], t) for (c, t, _), a in zip(rejected, again) if not a["accepted"]]
    print(f"pairs checked: {checked}; invalid accepted: {len(accepted_invalid)}; valid rejected as written: "
          f"{len(rejected)}, of which still rejected in canonical spelling: {len(still)}")
    for i, t in accepted_invalid:
        print(f"  ACCEPTED INVALID {i}: {t[:120]}")
    for i, t in still:
        print(f"  REJECTED {i}: {t[:120]}")


if __name__ == "__main__":
    main()
