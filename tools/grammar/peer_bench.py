#!/usr/bin/env python3
"""The peers' side of `deepinfer bench grammar`: xgrammar and llguidance on the same schemas, one thread
each. For each schema line {"schema", "tests"} the first valid instance is serialised compactly
(json.dumps, separators (",", ":"), ensure_ascii=False) and tokenized with the Hugging Face tokenizer
(plain text, no added tokens); both peers compile the schema and are fed those ids, timing each mask
(CPU time of this thread; of the process for compiles), as deepinfer's side measures.
Writes {"cases": [ids or null per schema], "peers": [{"name", "version", "compiled", "total",
"compile_ms": [...], "mask_us": [...], "tested", "rejected"} or {"name", "error"}]}, which
`deepinfer bench grammar --peer FILE` reads (it feeds ours the same ids).
Usage: peer_bench.py --tokenizer TOKENIZER_JSON|deepseek-v3 --data SCHEMAS_JSONL --out FILE [--width 129280] [--limit N]"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def package_version(name):
    # The installed distribution's version: xgrammar 0.2.9 has no __version__ attribute.
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


def run_xgrammar(tok_json, cases, width, eos):
    sys.modules["torch"] = None  # tvm_ffi must see no torch
    import tvm_ffi  # noqa: F401
    del sys.modules["torch"]
    sys.path.insert(0, os.path.join(HERE, "peer_stubs"))
    import numpy as np
    import xgrammar as xgr
    spec = json.load(open(tok_json, encoding="utf-8"))
    enc = [""] * width
    for s, i in spec["model"]["vocab"].items():
        enc[i] = s
    for t in spec.get("added_tokens", []):
        enc[t["id"]] = t["content"]
    info = xgr.TokenizerInfo(enc, vocab_type=xgr.VocabType.BYTE_LEVEL, vocab_size=width, stop_token_ids=[eos])
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    out = {"name": "xgrammar", "version": package_version("xgrammar")}
    bm = np.zeros((1, (width + 31) // 32), dtype=np.int32)
    compiled = 0
    compile_ms, mask_us = [], []
    tested = rejected = 0
    for c in cases:
        t0 = time.process_time()
        try:
            cg = compiler.compile_json_schema(c["schema"], any_whitespace=False, separators=(",", ":"), strict_mode=False)
        except Exception:  # noqa: BLE001 - a refused schema counts against coverage
            compile_ms.append((time.process_time() - t0) * 1e3)
            continue
        compile_ms.append((time.process_time() - t0) * 1e3)
        compiled += 1
        if c["ids"] is None:
            continue
        m = xgr.GrammarMatcher(cg)
        tested += 1
        ok = True
        for tid in c["ids"] + [eos]:
            t1 = time.thread_time()
            m.fill_next_token_bitmask(bm)
            mask_us.append((time.thread_time() - t1) * 1e6)
            if not m.accept_token(tid):
                ok = False
                break
        rejected += 0 if ok else 1
    out.update(compiled=compiled, total=len(cases), compile_ms=compile_ms, mask_us=mask_us, tested=tested, rejected=rejected)
    return out


def run_llguidance(tok_json, cases, width, eos):
    import numpy as np
    import llguidance
    import llguidance.numpy as lln
    tok = llguidance.LLTokenizer(open(tok_json, encoding="utf-8").read(), n_vocab=width, eos_token=eos)
    out = {"name": "llguidance", "version": package_version("llguidance")}
    bm = np.zeros((1, (width + 31) // 32), dtype=np.int32)
    compiled = 0
    compile_ms, mask_us = [], []
    tested = rejected = 0
    opts = {"whitespace_flexible": False}
    for c in cases:
        t0 = time.process_time()
        try:
            g = llguidance.LLMatcher.grammar_from_json_schema(c["schema"], defaults=opts)
            m = llguidance.LLMatcher(tok, g, log_level=0)
            ok_compile = not m.is_error()
        except Exception:  # noqa: BLE001
            ok_compile = False
        compile_ms.append((time.process_time() - t0) * 1e3)
        if not ok_compile:
            continue
        compiled += 1
        if c["ids"] is None:
            continue
        tested += 1
        ok = True
        for tid in c["ids"] + [eos]:
            t1 = time.thread_time()
            lln.fill_next_token_bitmask(m, bm, 0)
            mask_us.append((time.thread_time() - t1) * 1e6)
            if not m.consume_token(tid):
                ok = False
                break
        rejected += 0 if ok else 1
    out.update(compiled=compiled, total=len(cases), compile_ms=compile_ms, mask_us=mask_us, tested=tested, rejected=rejected)
    return out


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--width", type=int, default=129280)
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    if not os.path.isfile(a.tokenizer):  # a builtin name: the repository's packed tokenizer
        import tempfile
        sys.path.insert(0, os.path.join(HERE, "..", "tokenizer"))
        import tokenizer_data
        a.tokenizer = str(tokenizer_data.tokenizer_path(a.tokenizer, tempfile.mkdtemp()))
    from tokenizers import Tokenizer
    spec = json.load(open(a.tokenizer, encoding="utf-8"))
    eos = next(t["id"] for t in spec.get("added_tokens", []) if t["content"] == "<\uff5cend\u2581of\u2581sentence\uff5c>")
    spec["added_tokens"] = []  # plain text, as deepinfer's EncodeText
    tok = Tokenizer.from_str(json.dumps(spec))
    cases = []
    for line in open(a.data, encoding="utf-8"):
        if a.limit and len(cases) >= a.limit:
            break
        row = json.loads(line)
        valid = [t for t in row.get("tests", []) if t["valid"]]
        ids = None
        if valid:
            text = json.dumps(valid[0]["data"], separators=(",", ":"), ensure_ascii=False)
            ids = tok.encode(text, add_special_tokens=False).ids
        cases.append({"schema": json.dumps(row["schema"], ensure_ascii=False), "ids": ids})
    peers = []
    for runner in (run_xgrammar, run_llguidance):
        try:
            peers.append(runner(a.tokenizer, cases, a.width, eos))
        except ImportError as e:
            peers.append({"name": runner.__name__[4:], "error": "not installed: %s" % e})
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"cases": [c["ids"] for c in cases], "peers": peers}, f)


if __name__ == "__main__":
    main()
