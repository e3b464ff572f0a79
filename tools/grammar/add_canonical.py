#!/usr/bin/env python3
"""Adds to each valid test of tests/grammar/data/jsonschemabench_601.jsonl whose instance the grammar would
spell otherwise a "canonical" field: the same value re-spelled the way the grammar writes it (members in the
schema's property order, enum/const members as the schema spells them; schema_coverage.Canon), checked valid
with jsonschema. `deepinfer bench grammar` counts a valid instance rejected as written but accepted in this
form apart: the issue makes the grammar follow the schema's property order. Idempotent.
Usage: .venv/bin/python tools/grammar/add_canonical.py [FILE]"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import schema_coverage  # noqa: E402  (the canonical spelling lives there)


def main():
    path = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                        pathlib.Path(__file__).resolve().parents[2] / "tests/grammar/data/jsonschemabench_601.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    added = 0
    for r in rows:
        canon = schema_coverage.Canon(r["schema"])
        for t in r.get("tests", []):
            t.pop("canonical", None)
            if not t["valid"] or not isinstance(r["schema"], dict):
                continue
            value = canon.canon(r["schema"], t["data"])
            if json.dumps(value, ensure_ascii=False) != json.dumps(t["data"], ensure_ascii=False):
                assert canon.valid(r["schema"], value), (r["id"], "canonical form invalid")
                t["canonical"] = value
                added += 1
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{path}: {len(rows)} schemas, {added} valid instances with a canonical spelling")


if __name__ == "__main__":
    main()
