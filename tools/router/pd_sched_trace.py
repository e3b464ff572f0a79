#!/usr/bin/env python3
"""What runs on the decode unit's core while its streams wait for their next token, from the kernel's scheduler
events (`perf record -e sched:sched_switch`; Linux, root or perf_event_paranoid <= 0).

The units of pd_tbt.py (a prefill unit on core 0, a decode unit on core 1, a router in front), and --rounds
rounds of the settings `pd_alone` (the decode streams alone) and `pd` (the same while long prompts arrive), the
order alternating. Prints, per setting:
  - each group's CPU on each core in milliseconds per second: the decode unit's threads by name (D:...), the
    prefill unit (P), the router (R), this tool's processes (C: the timing clients and the long-prompt sender)
    and every other process (other);
  - the decode unit's threads other than its step thread on the decode core: how often each ran and for how
    long at once (p90, max). A thread that runs for a millisecond at once on that core lengthens one gap of
    every running stream by that much; at normal priority it preempts the step thread whenever it wakes;
  - the streams' gaps (p50, p99), and for the --top largest, what ran on the decode core meanwhile.
Other work on the machine shows as `other`: a gap during which other processes held the decode core tells
nothing about the units.

Usage: python3 tools/router/pd_sched_trace.py [--binary build/release/bin/deepinfer] [--rounds 2] [--top 5]
Not run in CI (it needs perf and root; a diagnosis, not a test).
"""
import argparse
import collections
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time

from pd_tbt import decode_gaps, measure, percentile, start_units, wait_routable

SWITCH = re.compile(r"\s*(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch:.*next_comm=(.*?) next_pid=(\d+)")


def runs_per_core(perf_data):
    """[(core, start, end, tid, comm)] for every stretch a thread ran, and {tid: process id}."""
    text = subprocess.run(["perf", "script", "-i", perf_data, "-F", "pid,tid,cpu,time,event,trace"],
                          capture_output=True, text=True, check=True).stdout
    runs, process_of, current = [], {}, {}
    for line in text.splitlines():
        m = SWITCH.match(line)
        if not m:
            continue
        process_of[int(m.group(2))] = int(m.group(1))  # the thread switched out, named with its process
        core, t = int(m.group(3)), float(m.group(4))
        if core in current:
            runs.append((core, current[core][0], t) + current[core][1:])
        current[core] = (t, int(m.group(6)), m.group(5))
    return runs, process_of


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/release/bin/deepinfer")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--decode-streams", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=2048)
    args = ap.parse_args()
    if not shutil.which("perf"):
        raise SystemExit("perf is not installed")
    work, _, prefill, decode, router = start_units(args.binary, None, pin=True, colocated_unit=False)
    perf_data = os.path.join(tempfile.mkdtemp(prefix="pd_sched_"), "perf.data")
    windows, gaps = [], collections.defaultdict(list)  # (setting, start, end, [(gap, from, to)])
    rng = random.Random(7)
    try:
        wait_routable(router.port)
        decode_gaps(router.port, 2, 16, "warm")
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "sched:sched_switch", "-a", "-k", "CLOCK_MONOTONIC",
                                 "-o", perf_data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        try:
            for r in range(args.rounds):
                for name, load in (("pd_alone", None), ("pd", router.port))[:: 1 if r % 2 == 0 else -1]:
                    stamps = []
                    start = time.perf_counter()  # CLOCK_MONOTONIC, as perf's -k CLOCK_MONOTONIC
                    measure(router.port, load, args, rng, f"{r}-{name}", stamps=stamps)
                    windows.append((name, start, time.perf_counter()))
                    for s in stamps:
                        gaps[name] += [(b - a, a, b) for a, b in zip(s, s[1:])]
        finally:
            perf.send_signal(signal.SIGINT)
            perf.wait(60)
    finally:
        for p in (router, prefill, decode):
            p.stop()
        shutil.rmtree(work, ignore_errors=True)
    runs, process_of = runs_per_core(perf_data)
    shutil.rmtree(os.path.dirname(perf_data), ignore_errors=True)
    groups = {decode.proc.pid: "D", prefill.proc.pid: "P", router.proc.pid: "R", os.getpid(): "C"}

    def group(tid, comm):
        if tid == 0:
            return "idle"
        g = groups.get(process_of.get(tid, -1))
        if g is None and comm.startswith("python"):
            g = "C"  # the long-prompt sender, a process of its own
        return g + ":" + comm if g == "D" else (g or "other")

    def on_core(core, t0, t1):
        c = collections.Counter()
        for rc, s, e, tid, comm in runs:
            if rc == core and e > t0 and s < t1:
                c[group(tid, comm)] += min(e, t1) - max(s, t0)
        return c

    for name in ("pd_alone", "pd"):
        mine = [(s, e) for n, s, e in windows if n == name]
        seconds = sum(e - s for s, e in mine)
        for core in (0, 1):
            c = collections.Counter()
            for s, e in mine:
                c.update(on_core(core, s, e))
            print(f"{name} core {core}, ms/s: "
                  + ", ".join(f"{k} {v * 1e3 / seconds:.1f}" for k, v in c.most_common(10)))
        stretches = collections.defaultdict(list)
        for core, s, e, tid, comm in runs:
            g = group(tid, comm)
            if core == 1 and g.startswith("D:") and g != "D:di-engine-step" and any(a <= s <= b for a, b in mine):
                stretches[g].append(e - s)
        for g, v in sorted(stretches.items(), key=lambda kv: -sum(kv[1])):
            v.sort()
            print(f"  {g}: {len(v)} runs, {sum(v) * 1e3:.1f} ms, p90 {percentile(v, 0.9) * 1e6:.0f} us,"
                  f" max {v[-1] * 1e6:.0f} us")
        g = sorted(gaps[name], reverse=True)
        values = [x[0] for x in g]
        print(f"  gaps: {len(values)}, p50 {percentile(values, 0.5) * 1e3:.2f} ms,"
              f" p99 {percentile(values, 0.99) * 1e3:.2f} ms")
        for gap, a, b in g[:args.top]:
            c = on_core(1, a, b)
            print(f"  gap {gap * 1e3:.2f} ms, decode core meanwhile: "
                  + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in c.most_common(6)))


if __name__ == "__main__":
    main()
