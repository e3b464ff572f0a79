#!/usr/bin/env python3
"""Generates tests/core/data/utf8_corpus.jsonl: byte strings (hex) with what Python's
bytes.decode("utf-8", errors="replace") gives and whether strict decoding succeeds. core/utf8 must agree.
Usage: tools/core/gen_utf8_corpus.py [--seed N] [--count N] > tests/core/data/utf8_corpus.jsonl
"""
import argparse
import json
import random

PIECES = [b"a", b"\x7f", b"\xc2\x80", b"\xdf\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xef\xbf\xbd",
          b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", "中".encode(), "😀".encode(),
          # invalid and truncated forms
          b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
          b"\xf5", b"\xff", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xf0\x9f", b"\xc3"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--count", type=int, default=3000)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    for i in range(args.count):
        if i % 2:
            data = b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 8)))
        else:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 12)))
        try:
            data.decode("utf-8")
            valid = True
        except UnicodeDecodeError:
            valid = False
        print(json.dumps({"hex": data.hex(), "valid": valid,
                          "lossy_hex": data.decode("utf-8", errors="replace").encode("utf-8").hex()}))


if __name__ == "__main__":
    main()
