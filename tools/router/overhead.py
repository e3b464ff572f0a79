#!/usr/bin/env python3
"""What `deepinfer router` adds to a stream: one `deepinfer serve` unit (the tiny preset, or --model DIR) and a
router in front of it, the same greedy streamed /v1/completions requests sent directly to the unit and through
the router, alternating per round so that both see the same machine load, at each of --streams concurrencies.

For each path and concurrency it reports the streamed tokens per second (all streams' tokens over the round's
wall time), the time to the first event and the mean gap between events (one event per token), each the median
over --rounds rounds; the router's added time to first token and gap (routed minus direct); and the router
process's CPU time per streamed token (its user + system time over the round, from /proc), which the client's
own costs do not blur (a Python client reading several relayed events at once sees shorter gaps).

Usage: python3 tools/router/overhead.py [--binary build/release/bin/deepinfer] [--model DIR] [--streams 1,16]
         [--tokens 256] [--rounds 5] [--out overhead.json]
Not run in CI (a benchmark: timings).
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time

from deepinfer_process import Process, stream_completion

MODEL = "tiny"


def one_stream(port, body, out):
    """Times one stream: (time to the first event, the gaps between events, tokens) appended to `out`."""
    start = time.perf_counter()
    stamps = []
    stream_completion(port, body, stamps.append, timeout_s=300)
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    out.append((stamps[0] - start, gaps, len(stamps)))


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def round_of(port, streams, tokens, prompt_seed, cpu_pid=None):
    results, threads = [], []
    body = {"model": MODEL, "max_tokens": tokens, "temperature": 0, "ignore_eos": True, "stream": True}
    start = time.perf_counter()
    cpu_before = cpu_seconds(cpu_pid) if cpu_pid else 0
    for i in range(streams):
        b = {**body, "prompt": f"Benchmark stream {prompt_seed}-{i}: tell me about the sea."}
        threads.append(threading.Thread(target=one_stream, args=(port, b, results)))
        threads[-1].start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if len(results) != streams:
        raise RuntimeError("a stream failed")
    out = {"tokens_per_s": sum(r[2] for r in results) / wall,
           "ttft_s": statistics.mean(r[0] for r in results),
           "gap_s": statistics.mean(g for r in results for g in r[1])}
    if cpu_pid:
        out["router_cpu_us_per_token"] = (cpu_seconds(cpu_pid) - cpu_before) / sum(r[2] for r in results) * 1e6
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/release/bin/deepinfer")
    ap.add_argument("--model", help="a model directory (default: the tiny preset, random weights)")
    ap.add_argument("--streams", default="1,16")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="router_overhead_")
    model = args.model
    if not model:
        model = os.path.join(work, "model")
        subprocess.run([args.binary, "init-model", "--preset", "tiny", "--out", model, "--seed", "5"], check=True,
                       capture_output=True)
    unit = Process([args.binary, "serve", model, "--port", "0", "--served-model-name", MODEL,
                    "--kv-cache-memory-bytes", str(512 << 20)])
    router = Process([args.binary, "router", "--port", "0", "--unit", f"http://127.0.0.1:{unit.port}"])
    summary = {"tokens": args.tokens, "rounds": args.rounds, "by_streams": {}}
    try:
        round_of(unit.port, 2, 16, "warm")  # the engine's first steps calibrate
        for streams in [int(s) for s in args.streams.split(",")]:
            runs = {"direct": [], "router": []}
            for r in range(args.rounds):
                order = [("direct", unit.port), ("router", router.port)]
                for name, port in order if r % 2 == 0 else reversed(order):
                    runs[name].append(round_of(port, streams, args.tokens, f"{streams}-{r}-{name}",
                                               router.proc.pid if name == "router" else None))
            med = {name: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for name, rs in runs.items()}
            med["added_ttft_ms"] = (med["router"]["ttft_s"] - med["direct"]["ttft_s"]) * 1e3
            med["added_per_token_us"] = (med["router"]["gap_s"] - med["direct"]["gap_s"]) * 1e6
            summary["by_streams"][streams] = med
            print(f"streams {streams}: tokens/s direct {med['direct']['tokens_per_s']:.0f} router "
                  f"{med['router']['tokens_per_s']:.0f}; TTFT direct {med['direct']['ttft_s'] * 1e3:.2f} ms router "
                  f"{med['router']['ttft_s'] * 1e3:.2f} ms; gap direct {med['direct']['gap_s'] * 1e6:.0f} us router "
                  f"{med['router']['gap_s'] * 1e6:.0f} us; router CPU per token "
                  f"{med['router']['router_cpu_us_per_token']:.1f} us",
                  flush=True)
    finally:
        router.stop()
        unit.stop()
    print(json.dumps(summary))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
