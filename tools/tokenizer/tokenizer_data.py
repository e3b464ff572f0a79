"""The repository's tokenizers (data/tokenizers/) for Python tests and tools, read the way the C++ side
reads them (src/tokenizer/builtin.cpp): xz-compressed files, and V4.1 as byte edits of V4. Every result is
checked against the sha256 the README of its directory gives.

    from tokenizer_data import tokenizer_json, tokenizer_path
    tokenizer_json("deepseek-v4")           # bytes
    tokenizer_path("deepseek-v4.1", tmp)    # writes tmp/tokenizer.json (+ tokenizer_config.json), returns its path
"""
import functools
import hashlib
import json
import lzma
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "tokenizers"
NAMES = ("deepseek-v3", "deepseek-v4", "deepseek-v4.1")
SHA256 = {
    "deepseek-v3": "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41",
    "deepseek-v4": "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf",
    "deepseek-v4.1": "c90dfa01249db1be4245780a052ede752e1361c612ac6d08e2bdada7d599476b",
}


@functools.lru_cache(maxsize=None)
def tokenizer_json(name):
    """The exact upstream tokenizer.json bytes of a builtin tokenizer."""
    if name not in NAMES:
        raise ValueError(f"unknown tokenizer {name!r} (one of {', '.join(NAMES)})")
    xz = DATA / name / "tokenizer.json.xz"
    if xz.exists():
        data = lzma.decompress(xz.read_bytes())
    else:
        delta = json.loads((DATA / name / "tokenizer.json.delta").read_text(encoding="utf-8"))
        base = tokenizer_json(delta["base"])
        parts, at = [], 0
        for e in delta["edits"]:
            parts += [base[at:e["offset"]], e["insert"].encode("utf-8")]
            at = e["offset"] + e["remove"]
        data = b"".join(parts + [base[at:]])
    if hashlib.sha256(data).hexdigest() != SHA256[name]:
        raise RuntimeError(f"data/tokenizers/{name}: the decoded tokenizer.json does not match its sha256")
    return data


def tokenizer_path(name, directory):
    """Writes the tokenizer's tokenizer.json and tokenizer_config.json into `directory`; returns the json path."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "tokenizer.json"
    path.write_bytes(tokenizer_json(name))
    (directory / "tokenizer_config.json").write_bytes((DATA / name / "tokenizer_config.json").read_bytes())
    return str(path)
