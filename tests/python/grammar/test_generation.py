"""Generation under the mask, checked by an independent validator: for every schema of the committed bench slice
that compiles, `deepinfer grammar --jsonl` generates with the real DeepSeek vocabulary and seeded random logits,
and each generated text must parse as JSON and validate with Python `jsonschema` (the draft its `$schema` names),
with `integer` meaning a JSON integer literal (Python's json parses it as int; "35.0" parses as float and fails)."""
import json
import pathlib
import random
import subprocess
import sys

import jsonschema

ROOT = pathlib.Path(__file__).resolve().parents[3]
DATA = ROOT / "tests/grammar/data/jsonschemabench_601.jsonl"
sys.path.insert(0, str(ROOT / "tools/grammar"))
import schema_coverage  # noqa: E402  (the bench's validator: draft chosen by $schema, the formats the grammar asserts)

SEEDS = (1,)
MAX_TOKENS = 1024


def literal_integer_validator(schema):
    """schema_coverage's validator with `integer` as Python int (bool excluded, as JSON Schema's own check)."""
    base = schema_coverage.validator_for(schema)
    checker = type(base).TYPE_CHECKER.redefine("integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool))
    cls = jsonschema.validators.extend(type(base), type_checker=checker)
    return cls(schema, format_checker=base.format_checker)


def generate(deepinfer_bin, rows, seeds=SEEDS):
    lines = [json.dumps({"json_schema": r["schema"], "instance": "", "generate": {"seed": seed, "max_tokens": MAX_TOKENS}})
             for r in rows for seed in seeds]
    out = subprocess.run([deepinfer_bin, "grammar", "--jsonl", "--tokenizer", "deepseek-v3"], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(results) == len(lines)
    return results


def test_generated_instances_validate_and_integers_are_literals(deepinfer_bin):
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    results = generate(deepinfer_bin, rows)
    generated = unfinished = overflows = 0
    failures = []
    for k, res in enumerate(results):
        row = rows[k // len(SEEDS)]
        if not res["compiled"]:
            continue
        assert res["error"] is None, (row["id"], res["error"])
        if res["generated"] is None:
            unfinished += 1
            continue
        generated += 1
        try:
            value = json.loads(res["generated"])
        except ValueError as e:
            failures.append((row["id"], res["generated"][:200], "not JSON: %s" % e))
            continue
        try:
            errors = list(literal_integer_validator(row["schema"]).iter_errors(value))
        except OverflowError:
            # jsonschema divides an integer of hundreds of digits by a float multipleOf: the oracle has no
            # verdict; such walks are counted and bounded below.
            overflows += 1
            continue
        if errors:
            failures.append((row["id"], res["generated"][:200], errors[0].message[:200]))
    assert not failures, "\n".join(map(str, failures[:20]))
    # Most walks end: the slice's schemas that compile, times the seeds, less the few whose instances need more
    # tokens than the budget (long required strings, deep required nesting).
    assert generated >= 0.85 * (generated + unfinished), (generated, unfinished)
    assert generated >= 500 and overflows <= 10, (generated, overflows)


def test_integer_fields_are_generated_as_integer_literals(deepinfer_bin):
    schema = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0, "maximum": 150},
                                               "n": {"type": "integer"}, "x": {"type": "number"}},
              "required": ["age", "n", "x"], "additionalProperties": False}
    results = generate(deepinfer_bin, [{"schema": schema}], seeds=range(20))
    values = [json.loads(r["generated"]) for r in results if r["generated"] is not None]
    assert len(values) >= 15
    for v in values:
        assert type(v["age"]) is int and 0 <= v["age"] <= 150, v
        assert type(v["n"]) is int, v


# Item schemas whose arrays the matcher keeps unique at run time (none lists its values).
UNIQUE_ITEMS = [
    {"type": "string", "maxLength": 2},
    {"type": "integer", "minimum": 0, "maximum": 999},
    {"type": "number", "minimum": -1, "maximum": 1},
    {"type": "object", "properties": {"k": {"type": "string", "maxLength": 2}, "v": {"type": "boolean"}},
     "required": ["k"], "additionalProperties": False},
    {"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": True, "maxItems": 2},
]


def test_unique_items_hold_in_generated_instances_and_duplicates_are_refused(deepinfer_bin):
    """Arrays of distinct items generated under the mask validate with jsonschema (uniqueness included); each
    generated array with one of its items again at a random place (seeded) is refused, the array as
    generated, re-spelled compactly, accepted."""
    schemas = [{"type": "array", "items": items, "uniqueItems": True, "minItems": 3, "maxItems": 6} for items in UNIQUE_ITEMS]
    results = generate(deepinfer_bin, [{"schema": s} for s in schemas], seeds=range(3))
    rng = random.Random(7)
    checks, arrays = [], []
    for k, res in enumerate(results):
        schema = schemas[k // 3]
        assert res["compiled"] and res["error"] is None, (schema, res["error"])
        if res["generated"] is None:
            continue
        value = json.loads(res["generated"])
        errors = list(literal_integer_validator(schema).iter_errors(value))
        assert not errors, (schema, res["generated"], errors[0].message)
        arrays.append(value)
        if value and len(value) < 6:
            twice = list(value)
            twice.insert(rng.randrange(len(value) + 1), value[rng.randrange(len(value))])
            try:
                texts = [json.dumps(v, separators=(",", ":"), allow_nan=False) for v in (value, twice)]
            except ValueError:
                continue  # a number past the double range reads as inf, which JSON cannot spell back
            checks += [({"json_schema": schema, "instance": texts[0]}, True),
                       ({"json_schema": schema, "instance": texts[1]}, False)]
    assert len(arrays) >= 0.85 * len(results), (len(arrays), len(results))
    assert len(checks) >= 2 * 8, len(checks)
    out = subprocess.run([deepinfer_bin, "grammar", "--jsonl", "--tokenizer", "deepseek-v3"],
                         input="".join(json.dumps(c) + "\n" for c, _ in checks), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    verdicts = [json.loads(line)["accepted"] for line in out.stdout.splitlines()]
    wrong = [(c["instance"], want) for (c, want), got in zip(checks, verdicts) if got != want]
    assert len(verdicts) == len(checks) and not wrong, wrong[:10]
