#!/usr/bin/env python3
"""Writes tests/tokenizer/data/: corpus.jsonl (the test strings) and golden_<name>.bin (the oracle's ids for
them, plus hashes for the 1 MB inputs and decode cases) for the DeepSeek V3 and V4 tokenizers.

usage: .venv/bin/python tools/tokenizer/gen_golden.py

golden_<name>.bin, all integers LEB128 varints unless noted:
  "DITG1"  entries  { n ids... (EncodeText)  k [ids...] (EncodeWithAddedTokens: k = 0 same, else k-1 ids) }
  big      { seed min_bytes token_count fnv64(8 bytes LE) }
  decode   { n ids... skip_special len utf8-bytes }
  vocab_size  fnv64(8 bytes LE) of Decode([id]) for every id, each followed by 0xFF
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
import corpus as corpus_mod  # noqa: E402
import oracle  # noqa: E402

OUT = os.path.join(oracle.ROOT, "tests", "tokenizer", "data")


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def fnv1a64_bytes(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def decode_cases(o, vocab_size, added_ids, seed):
    rng = random.Random(seed)
    cases = []
    for _ in range(400):
        ids = []
        for _ in range(rng.randrange(1, 12)):
            r = rng.random()
            if r < 0.5:
                ids.append(rng.randrange(3, 259))  # single byte tokens: continuation bytes, lead bytes, ASCII
            elif r < 0.8:
                ids.append(rng.randrange(259, 128000))
            else:
                ids.append(rng.choice(added_ids))
        skip = rng.random() < 0.5
        cases.append((ids, skip, o.decode(ids, skip)))
    return cases


def write_golden(name, tokenizer, entries):
    o = oracle.Oracle(tokenizer)
    text_ids = o.encode_text_batch(entries)
    added = o.encode_with_added_tokens_batch(entries)
    out = bytearray(b"DITG1")
    out += varint(len(entries))
    for t, a in zip(text_ids, added):
        out += varint(len(t)) + b"".join(varint(i) for i in t)
        if a == t:
            out += varint(0)
        else:
            out += varint(len(a) + 1) + b"".join(varint(i) for i in a)
    out += varint(len(corpus_mod.BIG_INPUTS))
    for seed, min_bytes in corpus_mod.BIG_INPUTS:
        ids = o.encode_text(corpus_mod.big_input(entries, seed, min_bytes))
        out += varint(seed) + varint(min_bytes) + varint(len(ids)) + corpus_mod.fnv1a64_ids(ids).to_bytes(8, "little")
    vocab_size = o.full.get_vocab_size(with_added_tokens=True)
    added_ids = sorted(t for t in o.full.get_added_tokens_decoder())
    cases = decode_cases(o, vocab_size, added_ids, seed=7)
    out += varint(len(cases))
    for ids, skip, text in cases:
        data = text.encode("utf-8")
        out += varint(len(ids)) + b"".join(varint(i) for i in ids) + varint(int(skip)) + varint(len(data)) + data
    limit = max(added_ids + [vocab_size - 1]) + 1
    h = 0xCBF29CE484222325
    for i in range(limit):
        h = fnv1a64_bytes(o.decode([i], False).encode("utf-8") + b"\xff", h)
    out += varint(limit) + h.to_bytes(8, "little")
    with open(os.path.join(OUT, f"golden_{name}.bin"), "wb") as f:
        f.write(out)
    print(f"{name}: {len(entries)} entries, {sum(map(len, text_ids))} ids, {len(out)} bytes", file=sys.stderr)


def main():
    os.makedirs(OUT, exist_ok=True)
    entries = corpus_mod.corpus()
    with open(os.path.join(OUT, "corpus.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for e in entries:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    write_golden("v3", "deepseek-v3", entries)
    write_golden("v4", "deepseek-v4", entries)


if __name__ == "__main__":
    main()
