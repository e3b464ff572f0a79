#!/usr/bin/env python3
"""Writes tests/grammar/data/json_schema_test_suite.jsonl: the official JSON-Schema-Test-Suite's required
tests (draft7/*.json and draft2020-12/*.json; not optional/), minified, for json_schema_suite_test.cpp.
Each line is one case: {"id": "DRAFT/FILE#CASE", "schema": {...}, "tests": [[INSTANCE, VALID], ...]} where
INSTANCE is the test's data serialised compactly (json.dumps, separators (",", ":"), ensure_ascii=False:
the text a model would write) and VALID its expected verdict. Member order inside schemas and instances
is kept as the suite writes it. Descriptions are dropped (the id finds them in the suite).
Usage: make_test_suite_data.py SUITE_DIR OUT.jsonl"""
import glob
import json
import os
import sys


def main():
    suite, out_path = sys.argv[1], sys.argv[2]
    lines = []
    for draft in ("draft7", "draft2020-12"):
        for path in sorted(glob.glob(os.path.join(suite, draft, "*.json"))):
            name = draft + "/" + os.path.basename(path)
            with open(path, encoding="utf-8") as f:
                cases = json.load(f)
            for i, case in enumerate(cases):
                tests = [[json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False), bool(t["valid"])]
                         for t in case["tests"]]
                lines.append(json.dumps({"id": f"{name}#{i}", "schema": case["schema"], "tests": tests},
                                        separators=(",", ":"), ensure_ascii=False))
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
