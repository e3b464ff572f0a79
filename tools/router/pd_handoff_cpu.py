#!/usr/bin/env python3
"""CPU a decode unit spends per prefill/decode hand-off, by thread, in one run.

A `--role prefill` and a `--role decode` unit (the tiny preset, or --model DIR) on one KV store behind a router,
pinned to a core each as in pd_tbt.py; --hand-offs long prompts (one output token each, unique so that
nothing is cached) go through the router one after another, and each of the decode unit's threads is read
from /proc/PID/task/TID/schedstat (nanoseconds on the CPU) before and after, and its replayed tokens and
snapshot hits from its /metrics. Every microsecond printed is
taken from the decode unit's core between its decode steps, whichever thread spends it (pd_tbt.py's decode
TBT under long prompts); CPU time, unlike those gaps, barely moves with other load on the machine, so two
binaries compare on a busy machine too (alternate them). Part of it is the unit's work with no hand-off at all
(the router's health checks, lease renewals), which grows with the wall time a hand-off takes: it is measured
first (--idle-s seconds without requests) and printed apart, per thread, as the rate times that wall time.

Usage: python3 tools/router/pd_handoff_cpu.py [--binary build/release/bin/deepinfer] [--model DIR]
         [--hand-offs 20] [--prompt-tokens 2048] [--token-ids] [--max-tokens 1] [--idle-s 5]
Not run in CI (a benchmark).
"""
import argparse
import collections
import http.client
import os
import random
import shutil
import time

from deepinfer_process import stream_completion
from pd_tbt import MODEL, long_prompt, start_units, wait_routable


def thread_cpu_ns(pid):
    """Nanoseconds on the CPU per thread name, summed over the threads of that name."""
    out = collections.Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[name] += int(f.read().split()[0])
        except OSError:
            pass  # the thread ended meanwhile
    return out


def replay_counters(port):
    """The decode unit's replayed tokens and snapshot hits so far, from its /metrics."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for line in text.splitlines():
        for name in ("deepinfer:replayed_tokens_total", "deepinfer:snapshot_hits_total"):
            if line.startswith(name):
                out[name] = out.get(name, 0) + float(line.split()[-1])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/release/bin/deepinfer")
    ap.add_argument("--model")
    ap.add_argument("--hand-offs", type=int, default=20)
    ap.add_argument("--prompt-tokens", type=int, default=2048)
    # 1: the prefill unit's token is the whole output; more: the decode unit resumes after it and decodes.
    ap.add_argument("--max-tokens", type=int, default=1)
    ap.add_argument("--idle-s", type=float, default=5)
    # Exactly --prompt-tokens tokens (random ids), where words tokenize to about that many: a prompt of
    # whole blocks (a multiple of 128) stays one.
    ap.add_argument("--token-ids", action="store_true")
    args = ap.parse_args()
    pin = (os.cpu_count() or 1) >= 2
    work, _, prefill, decode, router = start_units(args.binary, args.model, pin, colocated_unit=False)
    rng = random.Random(7)

    def hand_off():
        prompt = ([rng.randrange(3, 250) for _ in range(args.prompt_tokens)] if args.token_ids
                  else long_prompt(rng, args.prompt_tokens))
        body = {"model": MODEL, "prompt": prompt, "max_tokens": args.max_tokens,
                "temperature": 0, "ignore_eos": True}
        stream_completion(router.port, body)

    try:
        wait_routable(router.port)
        for _ in range(2):  # warm: first allocations, the store's directories
            hand_off()
        # What the unit spends with no hand-off (the router's health checks, lease renewals), per second.
        idle_before = thread_cpu_ns(decode.proc.pid)
        time.sleep(args.idle_s)
        idle_after = thread_cpu_ns(decode.proc.pid)
        counters_before = replay_counters(decode.port)
        before = thread_cpu_ns(decode.proc.pid)
        start = time.monotonic()
        for _ in range(args.hand_offs):
            hand_off()
        wall_s = (time.monotonic() - start) / args.hand_offs
        after = thread_cpu_ns(decode.proc.pid)
        counters_after = replay_counters(decode.port)
    finally:
        for p in (router, prefill, decode):
            p.stop()
        shutil.rmtree(work, ignore_errors=True)
    total = own_total = 0.0
    print(f"{'thread':24s} {'us/hand-off':>11s} {'of it idle':>10s} {'own':>9s}   (idle: the unit's rate without"
          f" hand-offs x {wall_s * 1e3:.0f} ms per hand-off)")
    for name in sorted(after):
        us = (after[name] - before.get(name, 0)) / args.hand_offs / 1e3
        idle_us = (idle_after[name] - idle_before.get(name, 0)) / args.idle_s * wall_s / 1e3
        total += us
        own_total += us - idle_us
        if us >= 1:
            print(f"{name:24s} {us:11.1f} {idle_us:10.1f} {us - idle_us:9.1f}")
    print(f"{'total':24s} {total:11.1f} {total - own_total:10.1f} {own_total:9.1f}"
          f"   (load average {os.getloadavg()[0]:.1f})")
    per = {name: (counters_after.get(name, 0) - counters_before.get(name, 0)) / args.hand_offs
           for name in counters_after}
    print(f"per hand-off on the decode unit: {per.get('deepinfer:replayed_tokens_total', 0):.0f} tokens replayed,"
          f" {per.get('deepinfer:snapshot_hits_total', 0):.2f} snapshot hits")


if __name__ == "__main__":
    main()
