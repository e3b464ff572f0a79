#!/usr/bin/env python3
"""Generates tests/core/data/py_json_corpus.jsonl: random JSON values and what Python's json.dumps writes
for them under several option sets, plus float repr cases. core/py_json must reproduce every output.

Each line is one case: {"input": <the value, as ASCII JSON>, "outputs": {option_name: json.dumps(...)}}
or {"float_bits": "<16 hex digits>", "repr": repr(x)}.
Usage: tools/core/gen_py_json_corpus.py [--seed N] [--count N] > tests/core/data/py_json_corpus.jsonl
"""
import argparse
import json
import random
import struct
import sys

OPTION_SETS = {
    "default": dict(ensure_ascii=False),
    "ascii": dict(ensure_ascii=True),
    "indent2": dict(ensure_ascii=False, indent=2),
    "sorted": dict(ensure_ascii=False, sort_keys=True),
    "compact": dict(ensure_ascii=False, separators=(",", ":")),
}

# Code points from many scripts and categories; surrogates are excluded (no UTF-8 form).
INTERESTING = (
    [chr(c) for c in range(0, 0x20)] + ['"', "\\", "/", "\x7f", "\u0080", "\u00a0", "\u00e9", "\u2028", "\u2029",
     "\ufeff", "\ufffd", "\uffff", "中", "文", "日本", "ｶ", "한", "ع", "א", "ह", "ก", "\u0301", "\U0001F600",
     "\U0001F469\u200d\U0001F4BB", "\U0001F44D\U0001F3FD", "\U00010000", "\U0010FFFF", "<｜Assistant｜>", "｜DSML｜"]
)


def random_string(rng):
    parts = []
    for _ in range(rng.randint(0, 8)):
        r = rng.random()
        if r < 0.4:
            parts.append(rng.choice(INTERESTING))
        elif r < 0.7:
            parts.append("".join(rng.choice("abcXYZ 019_-.:{}[],") for _ in range(rng.randint(1, 6))))
        else:
            while True:
                c = rng.randint(0, 0x10FFFF)
                if not 0xD800 <= c <= 0xDFFF:
                    break
            parts.append(chr(c))
    return "".join(parts)


def random_float(rng):
    r = rng.random()
    if r < 0.2:
        return rng.choice([0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5, 0.0001,
                           0.00012345, 1e22, 1e-7, 5e-324, 1.7976931348623157e308, 2.2250738585072014e-308,
                           123456789.123456789, 3.141592653589793, 100.0, 1.5e300, -2.5e-300])
    if r < 0.5:
        return rng.uniform(-1e6, 1e6)
    if r < 0.7:
        return float(rng.randint(-10**17, 10**17))
    while True:
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if x == x and x not in (float("inf"), float("-inf")):
            return x


def random_value(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.5:
        kind = rng.choice(["str", "str", "int", "float", "bool", "null", "bigint"])
        if kind == "str":
            return random_string(rng)
        if kind == "int":
            return rng.randint(-1000, 1000)
        if kind == "bigint":
            return rng.randint(-(2**63), 2**63 - 1)
        if kind == "float":
            return random_float(rng)
        if kind == "bool":
            return rng.random() < 0.5
        return None
    if r < 0.75:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    obj = {}
    for _ in range(rng.randint(0, 5)):
        obj[random_string(rng)] = random_value(rng, depth + 1)
    return obj


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--count", type=int, default=1500)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    out = sys.stdout
    for _ in range(args.count):
        value = random_value(rng)
        case = {"input": json.dumps(value, ensure_ascii=True),
                "outputs": {name: json.dumps(value, **opts) for name, opts in OPTION_SETS.items()}}
        out.write(json.dumps(case, ensure_ascii=True) + "\n")
    for _ in range(args.count):
        x = random_float(rng)
        out.write(json.dumps({"float_bits": struct.pack(">d", x).hex(), "repr": repr(x)}) + "\n")


if __name__ == "__main__":
    main()
