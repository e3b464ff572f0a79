#!/usr/bin/env python3
"""Writes tests/grammar/data/jsonschemabench_601.jsonl: a deterministic, stratified 601-schema slice of the
JSONSchemaBench/MaskBench sample (guidance-ai/jsonschemabench, MIT per the dataset card), each schema with
at most two valid and one invalid instance. Usage: make_bench_sample.py SAMPLE.jsonl OUT.jsonl"""
import collections
import hashlib
import json
import sys


def main():
    rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
    by_subset = collections.defaultdict(list)
    for r in rows:
        by_subset[r["subset"]].append(r)
    out = []
    for subset, rs in sorted(by_subset.items()):
        rs.sort(key=lambda r: hashlib.sha256(("deepinfer-bench-v1:" + r["id"]).encode()).hexdigest())
        out += rs[: max(3, round(len(rs) * 600 / len(rows)))]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        for r in out:
            tests = [t for t in r.get("tests", []) if t["valid"]][:2] + [t for t in r.get("tests", []) if not t["valid"]][:1]
            f.write(json.dumps({"id": r["id"], "schema": r["schema"], "tests": [{"valid": t["valid"], "data": t["data"]} for t in tests]},
                               ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
