#!/usr/bin/env python3
"""The Python API's overhead beside the C++ CLI: decoding tokens/s of one batch of token-id prompts through
`LLM.generate` and through `deepinfer generate --prompt-ids`, on the same checkpoint with the same engine
settings, greedy, every output exactly --max-tokens long (ignore EOS).

Each side is timed at --max-tokens and at 1 token; the difference is the decoding of (max_tokens - 1) tokens
per prompt, so model loading, process start-up and prefill cancel out. Runs alternate (CLI, Python) for
--rounds rounds and the medians are compared, by wall time and by CPU time (user + system of every thread:
the CLI's from its process, the Python side's from this one). On a machine shared with other work the wall
figures swing with the load; the CPU figures much less.

    tools/python/bench_overhead.py --model DIR [--batch 64] [--max-tokens 64] [--rounds 3]
(DIR: e.g. `deepinfer init-model --preset small --out DIR`; the package from build/release/python.)
"""
import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--build-dir", default=str(ROOT / "build" / "release"))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.build_dir, "python"))
    import deepinfer

    binary = os.path.join(args.build_dir, "bin", "deepinfer")
    # Distinct prompts (no prefix sharing), the same on both sides.
    prompts = [[(7 * i + 13 * j) % 5000 + 100 for j in range(args.prompt_len)] for i in range(args.batch)]
    engine_flags = ["--max-num-seqs", str(args.batch), "--kv-cache-memory-bytes", str(1 << 30), "--no-prefix-cache"]

    def cpu_children():
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def cpu_self():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def cli(max_tokens):
        cmd = [binary, "generate", "--model", args.model, "--max-tokens", str(max_tokens), "--ignore-eos",
               *engine_flags]
        for p in prompts:
            cmd += ["--prompt-ids", ",".join(map(str, p))]
        start, cpu = time.perf_counter(), cpu_children()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - start, cpu_children() - cpu

    llm = deepinfer.LLM(args.model, max_num_seqs=args.batch, kv_cache_bytes=1 << 30, enable_prefix_caching=False)

    def py(max_tokens):
        params = deepinfer.SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
        start, cpu = time.perf_counter(), cpu_self()
        out = llm.generate(prompts, params)
        elapsed = time.perf_counter() - start, cpu_self() - cpu
        assert all(len(o.outputs[0].token_ids) == max_tokens for o in out)
        return elapsed

    rates = {"CLI": ([], []), "Python": ([], [])}
    decoded = args.batch * (args.max_tokens - 1)
    for _ in range(args.rounds):
        for name, run in (("CLI", cli), ("Python", py)):
            (wall_n, cpu_n), (wall_1, cpu_1) = run(args.max_tokens), run(1)
            rates[name][0].append(decoded / (wall_n - wall_1))
            rates[name][1].append(decoded / (cpu_n - cpu_1))
    for i, what in enumerate(("wall", "CPU")):
        c, p = statistics.median(rates["CLI"][i]), statistics.median(rates["Python"][i])
        print(f"batch {args.batch}, {args.max_tokens} tokens each, {what}: CLI {c:.1f} tok/s, Python {p:.1f} tok/s "
              f"({(p / c - 1) * 100:+.1f}%); rounds CLI {[round(r, 1) for r in rates['CLI'][i]]} "
              f"Python {[round(r, 1) for r in rates['Python'][i]]}")


if __name__ == "__main__":
    main()
