#!/usr/bin/env python3
"""The deepseek-recipe side of `deepinfer bench parse`: the same completion chunks (written by deepinfer) pushed
through deepseek-recipe's StreamProcessor with to_json of every event; read with
`deepinfer bench parse --peer FILE`.

    .venv/bin/python tools/recipe/bench_parse.py --deepinfer build/release/bin/deepinfer --out recipe.json \\
        [--kib 512] [--chunk-bytes 4]
    build/release/bin/deepinfer bench parse --peer recipe.json [--kib 512] [--chunk-bytes 4]

Throughput is the best of 3 unclocked runs; per-chunk latencies come from a separate clocked run.
"""
import argparse
import importlib.metadata
import json
import pathlib
import sys
import time

import deepseek_recipe as dr

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_peer  # noqa: E402


def run(chunks, clocked):
    request = dr.ChatCompletionRequest({
        "model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "q"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]})
    converted = request.convert(dr.ConversionOptions())
    options = dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart)
    proc = dr.StreamProcessor(dr.ChatCompletionRequest.chunk_generator(converted, "id", "m"), options)
    proc.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=1)))
    times, events = [], 0
    clock = time.perf_counter
    start = clock()
    for c in chunks:
        t = clock() if clocked else 0
        out = proc.push(dr.InferenceChunk.text(c, 1))
        for o in out:
            o.to_json()
        if clocked:
            times.append(clock() - t)
        events += len(out)
    proc.push(dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop))
    return clock() - start, sorted(times), events


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deepinfer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--kib", default="512")
    parser.add_argument("--chunk-bytes", default="4")
    args = parser.parse_args()
    tmp, manifest = bench_peer.bench_inputs(args.deepinfer, "parse", "--kib", args.kib, "--chunk-bytes", args.chunk_bytes)
    chunks = json.loads(pathlib.Path(tmp.name, "chunks.json").read_text(encoding="utf-8"))
    seconds = min(run(chunks, False)[0] for _ in range(3))
    _, times, events = run(chunks, True)

    def pick(q):
        return times[min(len(times) - 1, int(q * len(times)))]

    figures = {"seconds": seconds, "p50": pick(0.5), "p99": pick(0.99), "p999": pick(0.999), "worst": times[-1],
               "events": events}
    bench_peer.write_result(args.out, manifest, f"deepseek-recipe {importlib.metadata.version('deepseek-recipe')}",
                            figures)


if __name__ == "__main__":
    main()
