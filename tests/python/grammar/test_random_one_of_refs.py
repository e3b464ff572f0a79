"""Randomised schemas against `jsonschema`: oneOf (and `not`) over `$ref`s into recursive definitions, whose
negations are definitions of their own, and allOf of recursive definitions, which recur inside their own
members. Every instance the grammar accepts must be valid, and every valid instance whose objects hold one member
at most (no question of member order: merged branches and negations list their members in orders of their own)
must be accepted. Seeded: the same schemas on every run."""
import json
import random
import subprocess

import jsonschema

# Member names in one order: definitions list them in it and instances spell them in it.
NAMES = ["k", "n", "s", "x"]
LEAVES = [{"type": "integer"}, {"type": "string"}, {"minimum": 2}, {"maxLength": 1}, True]
LEAF_VALUES = [0, 3, "", "ab", None]


def definition(rnd, names):
    """An object definition: members from NAMES (in order), some of them references to definitions."""
    props = {}
    for name in NAMES:
        if rnd.random() < 0.5:
            continue
        if rnd.random() < 0.5:
            target = rnd.choice(names)
            props[name] = ({"$ref": f"#/definitions/{target}"} if rnd.random() < 0.6 else
                           {"type": "array", "items": {"$ref": f"#/definitions/{target}"}})
        else:
            props[name] = rnd.choice(LEAVES)
    d = {"type": "object", "properties": props}
    required = [n for n in props if rnd.random() < 0.4]
    if required:
        d["required"] = required
    if rnd.random() < 0.2:
        d["additionalProperties"] = False
    return d


def schema(rnd):
    names = ["a", "b", "c"]
    defs = {n: definition(rnd, names) for n in names}
    refs = [{"$ref": f"#/definitions/{n}"} for n in rnd.sample(names, rnd.randint(2, 3))]
    shape = rnd.random()
    if shape < 0.6:
        top = {"oneOf": refs}
    elif shape < 0.8:
        top = {"not": refs[0]}
    else:
        top = {"allOf": refs}
    return {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": defs, **top}


def instance(rnd, depth=0):
    """A value made to meet such definitions often: objects of NAMES (in order) holding small values."""
    if depth > 3 or rnd.random() < 0.25:
        return rnd.choice(LEAF_VALUES)
    if rnd.random() < 0.15:
        return [instance(rnd, depth + 1) for _ in range(rnd.randint(0, 2))]
    return {n: (instance(rnd, depth + 1) if rnd.random() < 0.7 else [instance(rnd, depth + 1)])
            for n in NAMES if rnd.random() < 0.45}


def test_grammar_agrees_with_jsonschema(deepinfer_bin):
    rnd = random.Random(27)
    cases = []
    for _ in range(120):
        s = schema(rnd)
        for _ in range(10):
            cases.append((s, json.dumps(instance(rnd), separators=(",", ":"))))
    lines = [json.dumps({"json_schema": s, "instance": t}) for s, t in cases]
    out = subprocess.run([deepinfer_bin, "grammar", "--jsonl"], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, check=True, timeout=120).stdout.splitlines()
    assert len(out) == len(cases)
    compiled = single = valid_single = 0
    invalid_accepted, valid_rejected = [], []
    for (s, t), line in zip(cases, out):
        answer = json.loads(line)
        if not answer["compiled"]:
            continue
        compiled += 1
        value = json.loads(t)
        want = jsonschema.Draft7Validator(s).is_valid(value)
        if answer["accepted"] and not want:
            invalid_accepted.append((s, t))
        if one_member_at_most(value):
            single += 1
            valid_single += want
            if want and not answer["accepted"]:
                valid_rejected.append((s, t))
    assert not invalid_accepted, invalid_accepted[:3]
    assert not valid_rejected, valid_rejected[:3]
    # The data must exercise both verdicts on many compiled schemas, or the comparison says little.
    assert compiled > 600 and 50 < valid_single < single - 50, (compiled, single, valid_single)


def one_member_at_most(v):
    if isinstance(v, dict):
        return len(v) <= 1 and all(one_member_at_most(x) for x in v.values())
    if isinstance(v, list):
        return all(one_member_at_most(x) for x in v)
    return True
