#!/usr/bin/env python3
"""The Hugging Face `tokenizers` side of `deepinfer bench tokenize`: the same inputs (written by deepinfer),
encoded by the `tokenizers` package; the result is read with `deepinfer bench tokenize --peer FILE`.

    .venv/bin/python tools/tokenizer/bench_hf.py --deepinfer build/release/bin/deepinfer --out hf.json \\
        [--tokenizer deepseek-v4] [--mixed-mb 10]
    build/release/bin/deepinfer bench tokenize --peer hf.json [--tokenizer ...] [--mixed-mb ...]

One-thread figures are process CPU time (as deepinfer's), all-core figures wall time; best of 3 (the mixed
file on one thread: 1 run). Plain-text encoding: added tokens are removed from the spec, as EncodeText.
"""
import argparse
import json
import pathlib
import sys
import time

import tokenizers
from tokenizers import Tokenizer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_peer  # noqa: E402


def best(f, n=3, clock=time.perf_counter):
    times = []
    for _ in range(n):
        start = clock()
        f()
        times.append(clock() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deepinfer", required=True, help="the deepinfer binary")
    parser.add_argument("--out", required=True, help="the result JSON to write")
    parser.add_argument("--tokenizer", default="deepseek-v4")
    parser.add_argument("--mixed-mb", default="10")
    args = parser.parse_args()
    tmp, manifest = bench_peer.bench_inputs(args.deepinfer, "tokenize", "--tokenizer", args.tokenizer,
                                            "--mixed-mb", args.mixed_mb)
    d = pathlib.Path(tmp.name)
    spec = json.loads((d / "tokenizer.json").read_text(encoding="utf-8"))
    spec["added_tokens"] = []
    tok = Tokenizer.from_str(json.dumps(spec))
    corpus = [json.loads(line) for line in (d / "corpus.jsonl").read_text(encoding="utf-8").split("\n") if line]
    raw = (d / "mixed.txt").read_bytes()
    mixed = raw.decode("utf-8")
    prompt = raw[:manifest["prompt_bytes"]].decode("utf-8")
    chunks, pos = [], 0
    while pos < len(mixed):
        end = mixed.find("\n", pos + 65536)
        end = len(mixed) if end < 0 else end + 1
        chunks.append(mixed[pos:end])
        pos = end
    cpu = time.process_time
    figures = {
        "corpus_1t": best(lambda: [tok.encode(s, add_special_tokens=False) for s in corpus], 3, cpu),
        "corpus_all": best(lambda: tok.encode_batch(corpus, add_special_tokens=False)),
        "mixed_1t": best(lambda: tok.encode(mixed, add_special_tokens=False), 1, cpu),
        "mixed_all": best(lambda: tok.encode_batch(chunks, add_special_tokens=False), 2),
        "mixed_count": len(tok.encode(mixed, add_special_tokens=False).ids),
        "prompt_1t": best(lambda: tok.encode(prompt, add_special_tokens=False), 3, cpu),
    }
    bench_peer.write_result(args.out, manifest, f"Hugging Face tokenizers {tokenizers.__version__}", figures)


if __name__ == "__main__":
    main()
