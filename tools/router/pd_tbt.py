#!/usr/bin/env python3
"""Decode TBT under a long-prompt load, colocated against prefill/decode disaggregation, in one run.

Units (the tiny preset, or --model DIR): one colocated `deepinfer serve` unit, and a `--role prefill` and a
`--role decode` unit on one KV store behind a router; with --pin (default on when the machine has 2 cores or
more) the prefill unit runs on core 0, the decode unit on core 1 and the colocated unit on both. The router and
this tool's own threads (the clients that time the events) may run on either core (on the prefill unit's core
alone they would wait behind its compute thread), and the clients ask for a short scheduler slice, as the units'
HTTP threads do, so that an event is stamped when it arrives. The long prompts are sent from a process of their
own: building and sending a prompt of thousands of tokens holds Python's interpreter lock for a while, and in
this process a timing thread whose event arrived meanwhile would stamp it only after that (a delay the settings
with a loader would have and the others not).

Each round measures --decode-streams greedy streams of short prompts (under one KV block: no hand-off), their
gaps between events (one per token), in four settings, in an order that alternates between rounds:
  alone      the streams on the colocated unit, nothing else;
  colocated  the same while a loader sends long prompts (one output token each) back to back to that unit;
  pd_alone   the streams through the router to the decode unit, nothing else;
  pd         the streams and the loader through the router: the long prompts are computed on the prefill unit
             and handed to the decode unit through the store.
Prints each setting's TBT p50 and p99 over all rounds, p99 of `colocated` and `pd` over `alone`, and of `pd` over
`pd_alone` (the decode unit on its own core without hand-offs: the baseline that isolates what the hand-offs
cost it). A round holds about 500 gaps per setting, so a run's p99 rests on its few largest gaps: --out keeps
every gap (milliseconds) too, so that several runs' gaps can be pooled (pooled_p99.py).

Usage: python3 tools/router/pd_tbt.py [--binary build/release/bin/deepinfer] [--model DIR] [--rounds 3]
         [--decode-streams 4] [--tokens 128] [--prompt-tokens 2048] [--no-pin] [--out pd_tbt.json]
Not run in CI (a benchmark: timings).
"""
import argparse
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time

from deepinfer_process import Process, ask_short_slice, stream_completion

MODEL = "tiny"


def decode_gaps(port, streams, tokens, tag, stamps=None):
    """The gaps between the events of `streams` greedy streams (seconds); with `stamps`, each stream's event
    times (time.perf_counter) are appended to it too."""
    gaps, threads = [], []

    def one(i):
        ask_short_slice()
        times = []
        body = {"model": MODEL, "prompt": f"Short question {tag}-{i}?", "max_tokens": tokens, "temperature": 0,
                "ignore_eos": True, "stream": True}
        stream_completion(port, body, times.append)
        gaps.extend(b - a for a, b in zip(times, times[1:]))
        if stamps is not None:
            stamps.append(times)

    for i in range(streams):
        threads.append(threading.Thread(target=one, args=(i,)))
        threads[-1].start()
    for t in threads:
        t.join()
    return gaps


def wait_routable(port, deadline_s=120):
    """Until the router places a request (the units register and pass a health check after they start)."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            stream_completion(port, {"model": MODEL, "prompt": "Warm?", "max_tokens": 2, "temperature": 0,
                                     "stream": True})
            return
        except RuntimeError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def long_prompt(rng, tokens):
    # Words of a few tokens each; unique per request, so that no prefix is cached.
    return " ".join(f"w{rng.randrange(10**6)}" for _ in range(tokens // 3))


def load_long_prompts(port, prompt_tokens, seed, started, stop, latencies):
    """In a process of its own: long prompts (one output token each) back to back until `stop`; each one's
    latency in seconds goes to the `latencies` queue, then None."""
    ask_short_slice()
    rng = random.Random(seed)
    started.set()
    while not stop.is_set():
        body = {"model": MODEL, "prompt": long_prompt(rng, prompt_tokens), "max_tokens": 1, "temperature": 0}
        start = time.monotonic()
        stream_completion(port, body)
        latencies.put(time.monotonic() - start)
    latencies.put(None)


def measure(port_decode, port_load, args, rng, tag, stamps=None):
    loader = None
    if port_load:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: this one runs threads
        started, stop, latencies = context.Event(), context.Event(), context.Queue()
        loader = context.Process(target=load_long_prompts,
                                 args=(port_load, args.prompt_tokens, rng.randrange(1 << 30), started, stop, latencies))
        loader.start()
        if not started.wait(60):
            loader.kill()
            raise RuntimeError("the long-prompt process did not start")
        time.sleep(0.5)  # the load is running when the streams start
    gaps = decode_gaps(port_decode, args.decode_streams, args.tokens, tag, stamps)
    loaded = []
    if loader:
        stop.set()
        while (latency := latencies.get(timeout=600)) is not None:  # drained before the join: a full pipe blocks
            loaded.append(latency)
        loader.join(60)
    return gaps, loaded


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def start_units(binary, model, pin, colocated_unit):
    """A prefill unit on core 0 and a decode unit on core 1 (pinned when `pin`) sharing a KV store, a router in
    front of them, and with `colocated_unit` one unit on both cores beside them; a tiny model unless `model`.
    Returns (work dir, colocated or None, prefill, decode, router)."""
    work = tempfile.mkdtemp(prefix="pd_units_")
    if not model:
        model = os.path.join(work, "model")
        subprocess.run([binary, "init-model", "--preset", "tiny", "--out", model, "--seed", "5"], check=True,
                       capture_output=True)
    unit_dir, store = os.path.join(work, "units"), os.path.join(work, "store")
    os.makedirs(unit_dir)
    base = [binary, "serve", model, "--port", "0", "--served-model-name", MODEL,
            "--kv-cache-memory-bytes", str(1 << 30)]
    cores = lambda c: ["taskset", "-c", c] if pin else []  # noqa: E731
    colocated = Process(cores("0,1") + base) if colocated_unit else None
    pd_args = ["--kv-store", store, "--unit-dir", unit_dir]
    prefill = Process(cores("0") + base + pd_args + ["--role", "prefill"])
    decode = Process(cores("1") + base + pd_args + ["--role", "decode"])
    router = Process([binary, "router", "--port", "0", "--unit-dir", unit_dir])
    return work, colocated, prefill, decode, router


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/release/bin/deepinfer")
    ap.add_argument("--model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--decode-streams", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=2048)
    ap.add_argument("--no-pin", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    pin = not args.no_pin and (os.cpu_count() or 1) >= 2
    work, colocated, prefill, decode, router = start_units(args.binary, args.model, pin, colocated_unit=True)
    rng = random.Random(7)
    gaps = {"alone": [], "colocated": [], "pd_alone": [], "pd": []}
    long_prompts = {"colocated": [], "pd": []}  # each long prompt's latency (its answer's last byte), seconds
    try:
        decode_gaps(colocated.port, 2, 16, "warm")
        wait_routable(router.port)
        decode_gaps(router.port, 2, 16, "warm")
        settings = [("alone", colocated.port, None), ("colocated", colocated.port, colocated.port),
                    ("pd_alone", router.port, None), ("pd", router.port, router.port)]
        for r in range(args.rounds):
            for name, port, load in settings if r % 2 == 0 else reversed(settings):
                g, latencies = measure(port, load, args, rng, f"{r}-{name}")
                gaps[name] += g
                if name in long_prompts:
                    long_prompts[name] += latencies
                print(f"round {r} {name}: p99 {percentile(g, 0.99) * 1e3:.2f} ms over {len(g)} gaps"
                      + (f", {len(latencies)} long prompts" if load else ""), flush=True)
    finally:
        for p in (router, prefill, decode, colocated):
            p.stop()
        shutil.rmtree(work, ignore_errors=True)
    summary = {name: {"p50_ms": percentile(g, 0.5) * 1e3, "p99_ms": percentile(g, 0.99) * 1e3, "gaps": len(g)}
               for name, g in gaps.items()}
    summary["long_prompts"] = {name: len(v) for name, v in long_prompts.items()}
    # How long a long prompt's answer took (what moving a decode unit's work into its core's spare time costs).
    summary["long_prompt_latency_ms"] = {
        name: {"p50": percentile(v, 0.5) * 1e3, "p99": percentile(v, 0.99) * 1e3} if v else None
        for name, v in long_prompts.items()}
    summary["colocated_p99_over_alone"] = summary["colocated"]["p99_ms"] / summary["alone"]["p99_ms"]
    summary["pd_p99_over_alone"] = summary["pd"]["p99_ms"] / summary["alone"]["p99_ms"]
    summary["pd_p99_over_pd_alone"] = summary["pd"]["p99_ms"] / summary["pd_alone"]["p99_ms"]
    summary["gaps_ms"] = {name: [round(x * 1e3, 4) for x in g] for name, g in gaps.items()}
    summary["load_average"] = os.getloadavg()  # other work on the machine widens every gap
    summary["pinned"] = pin
    print(json.dumps({k: v for k, v in summary.items() if k != "gaps_ms"}))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
