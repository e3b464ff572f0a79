#!/usr/bin/env python3
"""The deepseek-recipe side of `deepinfer bench render`: the same request (written by deepinfer) converted
and encoded for DeepSeek V4 by the deepseek-recipe package; read with `deepinfer bench render --peer FILE`.

    .venv/bin/python tools/recipe/bench_render.py --deepinfer build/release/bin/deepinfer --out recipe.json \\
        [--turns 160] [--iterations 20]
    build/release/bin/deepinfer bench render --peer recipe.json [--turns 160]
"""
import argparse
import importlib.metadata
import pathlib
import statistics
import sys
import time

import deepseek_recipe as dr

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_peer  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deepinfer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--turns", default="160")
    parser.add_argument("--tokenizer", default="deepseek-v4")
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    tmp, manifest = bench_peer.bench_inputs(args.deepinfer, "render", "--turns", args.turns, "--tokenizer", args.tokenizer)
    d = pathlib.Path(tmp.name)
    body = (d / "request.json").read_text(encoding="utf-8")
    encoding = dr.DeepseekV4Encoding().with_tokenizer(dr.Tokenizer.from_file(str(d / "tokenizer.json")))
    times = []
    for _ in range(args.iterations):
        start = time.perf_counter()
        converted = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
        ids = encoding.encode(converted.conversation)
        times.append((time.perf_counter() - start) * 1e3)
    figures = {"ms": statistics.median(times), "iterations": args.iterations, "tokens": len(ids),
               "ids_head": ids[:64], "ids_sum": sum(ids)}
    bench_peer.write_result(args.out, manifest, f"deepseek-recipe {importlib.metadata.version('deepseek-recipe')}",
                            figures)


if __name__ == "__main__":
    main()
