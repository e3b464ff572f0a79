"""`deepinfer bench grammar` on the committed 601-schema slice: its correctness counts (not its timings), and the
canonical spellings the slice carries (tools/grammar/add_canonical.py)."""
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
DATA = ROOT / "tests/grammar/data/jsonschemabench_601.jsonl"
sys.path.insert(0, str(ROOT / "tools/grammar"))
import schema_coverage  # noqa: E402  (the validator the coverage tool uses, draft chosen by $schema)


def test_canonical_spellings_are_the_same_valid_value():
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 601
    canonical = [(r, t) for r in rows for t in r["tests"] if "canonical" in t]
    # 27 when written (add_canonical.py prints the count): 22 member orders and enum/const spellings.
    assert len(canonical) == 27
    for r, t in canonical:
        assert t["valid"], r["id"]
        # Python's == ignores member order and 1 vs 1.0: the same JSON value, only spelled otherwise.
        assert t["canonical"] == t["data"], r["id"]
        assert json.dumps(t["canonical"], ensure_ascii=False) != json.dumps(t["data"], ensure_ascii=False), r["id"]
        assert schema_coverage.validator_for(r["schema"]).is_valid(t["canonical"]), r["id"]


def test_every_valid_instance_is_accepted_as_the_grammar_spells_it(deepinfer_bin):
    out = subprocess.run([deepinfer_bin, "bench", "grammar", "--data", str(DATA)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    m = re.search(r"deepinfer valid rejected: (\d+) of (\d+) as written, (\d+) also when spelled", out.stdout)
    assert m, out.stdout
    rejected, tested, rejected_canonically = map(int, m.groups())
    assert tested >= 510  # the schemas that compile and have a valid instance (518 when written)
    # Rejected as written: members in another order than the schema's, which the grammar keeps.
    assert rejected_canonically == 0, out.stdout
    assert rejected <= 27
    # Every test instance of the compiled schemas, valid and invalid (the slice has both kinds for most).
    m = re.search(r"valid accepted (\d+) of (\d+) as written, (\d+) in the grammar's member order.*; "
                  r"invalid rejected (\d+) of (\d+)", out.stdout)
    assert m, out.stdout
    written, valid, in_order, rejected_invalid, invalid = map(int, m.groups())
    assert valid >= 740 and invalid >= 390  # 753 and 400 when written
    assert in_order == valid and written <= valid
    assert rejected_invalid == invalid


def test_per_schema_rows_name_each_schema_and_its_times(deepinfer_bin, tmp_path):
    rows_path = tmp_path / "per_schema.jsonl"
    out = subprocess.run([deepinfer_bin, "bench", "grammar", "--data", str(DATA), "--limit", "5", "--per-schema",
                          str(rows_path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in rows_path.read_text(encoding="utf-8").splitlines()]
    ids = [json.loads(line)["id"] for line in DATA.read_text(encoding="utf-8").splitlines()[:5]]
    assert [r["id"] for r in rows] == ids
    for r in rows:
        assert r["compile_ms"] >= r["front_end_ms"] >= 0
        if r["compiled"]:
            assert r["states"] > 0 and len(r["grammar"]) == 16
        else:
            assert r["states"] is None
        if r["accepted"] is not None:
            assert r["masks"] > 0 and r["mask_max_us"] <= r["mask_total_us"]
