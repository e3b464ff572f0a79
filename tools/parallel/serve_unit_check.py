#!/usr/bin/env python3
"""A serving unit under load against one process: starts `deepinfer serve MODEL` alone and as a unit of N ranks
(`serve --data-parallel-size N`, which runs mpirun itself), sends the same greedy chat completions to each (many at
once, streamed and not, of varied lengths), and reports whether every answer (text, finish reason, logprobs) is
the same, how the unit placed the requests, and its expert balance. Exit 1 on any difference.

Usage: tools/parallel/serve_unit_check.py MODEL_DIR [--ranks N] [--requests R] [--concurrency C]
                                          [--no-expert-parallel] [--num-redundant-experts R]
                                          [--eplb-step-interval S] [--deepinfer BIN]
With --num-redundant-experts the unit's load balancer places the experts anew every S steps (default 16, window
2 × S) while it serves."""
import argparse
import json
import os
import pathlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python" / "server"))
from server_process import Server  # noqa: E402

# tests/parallel/mpi_env.sh
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_MCA_btl": "self,vader",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}
WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly hex every judge".split()


def request(i):
    prompt = " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(3 + (i * 13) % 40))
    return {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": 4 + (i * 5) % 29,
            "temperature": 0, "ignore_eos": True, "logprobs": True, "top_logprobs": 2, "stream": i % 2 == 1}


def answer(server, body):
    status, _, payload = server.request("POST", "/v1/chat/completions", body, timeout=600)
    if status != 200:
        return ("error", status, payload.decode(errors="replace"))
    if not body["stream"]:
        choice = json.loads(payload)["choices"][0]
        return choice["message"]["content"], choice["finish_reason"], choice["logprobs"]["content"]
    text, finish, logprobs = "", None, []
    for line in payload.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            choices = json.loads(line[6:])["choices"]
            if choices:
                text += choices[0]["delta"].get("content") or ""
                finish = choices[0].get("finish_reason") or finish
                logprobs += (choices[0].get("logprobs") or {}).get("content") or []
    return text, finish, logprobs


def run_all(server, n, concurrency):
    start = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        out = list(pool.map(lambda i: answer(server, request(i)), range(n)))
    return out, time.monotonic() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--no-expert-parallel", action="store_true")
    p.add_argument("--num-redundant-experts", type=int, default=0)
    p.add_argument("--eplb-step-interval", type=int, default=16)
    p.add_argument("--deepinfer", default=str(ROOT / "build" / "release" / "bin" / "deepinfer"))
    a = p.parse_args()
    common = ["--served-model-name", "m", "--no-thinking", "--kv-cache-memory-bytes", str(256 << 20),
              "--ep-timeout-s", "60"]
    single = Server(a.deepinfer, a.model, *common)
    try:
        want, single_s = run_all(single, a.requests, a.concurrency)
    finally:
        single.stop()
    unit_args = [*common, "--data-parallel-size", str(a.ranks)]
    if not a.no_expert_parallel:
        unit_args.append("--enable-expert-parallel")
    if a.num_redundant_experts:
        unit_args += ["--num-redundant-experts", str(a.num_redundant_experts), "--eplb-step-interval",
                      str(a.eplb_step_interval), "--eplb-window-size", str(2 * a.eplb_step_interval)]
    unit = Server(a.deepinfer, a.model, *unit_args, env={**os.environ, **MPI_ENV})
    try:
        got, unit_s = run_all(unit, a.requests, a.concurrency)
        metrics = unit.metrics()
    finally:
        code = unit.stop()
    differ = [i for i in range(a.requests) if got[i] != want[i]]
    placed = [int(metrics.get(f'deepinfer_unit_rank_requests_placed_total{{rank="{r}"}}', 0)) for r in range(a.ranks)]
    print(f"requests {a.requests} at concurrency {a.concurrency}: {a.requests - len(differ)} identical, "
          f"{len(differ)} differ; one process {single_s:.1f} s, unit of {a.ranks} {unit_s:.1f} s; placed {placed}")
    for name in ("last_step", "window", "total"):
        key = f"deepinfer_unit_expert_balance_{name}"
        layers = sorted((k for k in metrics if k.startswith(key + "{layer=")),
                        key=lambda k: int(k.split('"')[1]))
        if layers:
            values = " ".join(f"{metrics[k]:.3f}" for k in layers)
            print(f"expert balance per layer and step ({name}): {values}")
    if "deepinfer_unit_expert_rebalances_total" in metrics:
        print(f"expert placements applied: {int(metrics['deepinfer_unit_expert_rebalances_total'])}")
    print(f"unit exit status {code}")
    for i in differ[:3]:
        print(f"request {i}: one process {str(want[i])[:200]}\n           unit {str(got[i])[:200]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
