#!/usr/bin/env python3
"""Kill drill for `deepinfer router`: a router and --units `deepinfer serve` units (the tiny preset) on one lease
directory, --streams concurrent streams per round over the four streaming APIs (legacy Completions, Chat
Completions, Messages, Responses; greedy and seeded), and in each of --rounds rounds one unit that is serving
streams is killed with SIGKILL mid-run (and a fresh unit started in its place, found through its lease).

Every stream's text is compared with the same request's uninterrupted text (taken through the router before the
drill). After each round, once the streams closed, every live unit's /metrics must report 0 KV blocks held by
live sequences. Prints one line per round and a JSON summary: failed requests (non-200, an error event, a
broken stream), text mismatches, blocks held, migrations (from the router's /metrics).

With --pd the units share a KV store and the first is a `--role prefill` unit, the others `--role decode`; every
prompt is several KV blocks long and new in each round, and the unit killed each round is the prefill unit,
during its hand-offs (then started again). The reference texts then come from a colocated unit beside the
router, and the summary adds the router's hand-offs and fallbacks.

Usage: python3 tools/router/kill_drill.py [--binary build/release/bin/deepinfer] [--units 3] [--streams 32]
         [--rounds 5] [--max-tokens 160] [--seed 1] [--pd] [--out drill.json]
Not run in CI (minutes of CPU).
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from deepinfer_process import Process

MODEL = "tiny"


# Several KV blocks of prompt (a block is 128 tokens), for the prefill/decode drill.
LONG_PROMPT = " ".join(f"Paragraph {i}: the quick brown fox jumps over the lazy dog near the river bank."
                       for i in range(30))


def requests_for(count, max_tokens, prefix=""):
    """`count` stream requests: the four APIs, greedy (outside thinking mode) and seeded (with reasoning)."""
    prompts = ["Once upon a time", "Tell me a story", "The weather in Paris", "Write a poem about the sea"]
    out = []
    for i in range(count):
        api = ["completions", "chat", "messages", "responses"][i % 4]
        prompt = prefix + prompts[(i // 4) % len(prompts)] + f" #{i}"
        sampling = {"temperature": 0} if (i // 2) % 2 == 0 else {"temperature": 1.0, "seed": 1000 + i}
        if api == "completions":
            out.append(("/v1/completions", {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens,
                                            "ignore_eos": True, "stream": True, **sampling}))
        elif api == "chat":
            thinking = {} if "seed" in sampling else {"thinking": {"type": "disabled"}}
            out.append(("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": prompt}],
                                                 "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
                                                 **sampling, **thinking}))
        elif api == "messages":
            thinking = {} if "seed" in sampling else {"thinking": {"type": "disabled"}}
            out.append(("/v1/messages", {"model": MODEL, "messages": [{"role": "user", "content": prompt}],
                                         "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
                                         **sampling, **thinking}))
        else:
            out.append(("/v1/responses", {"model": MODEL, "input": prompt, "max_output_tokens": max_tokens,
                                          "ignore_eos": True, "stream": True, "seed": 1000 + i}))
    return out


def stream_text(port, path, body):
    """The stream's text (every delta of content, reasoning, tool arguments) or an exception's message."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    payload = resp.read().decode()
    conn.close()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {payload[:200]}")
    text = []
    for event in payload.split("\n\n"):
        if event.startswith(":") or not event.strip():
            continue
        if event.startswith("event: error") or '"error"' in event.split("data: ", 1)[-1][:20]:
            raise RuntimeError("error event: " + event[:300])
        data = event.split("data: ", 1)[-1]
        if data == "[DONE]":
            continue
        j = json.loads(data)
        if "choices" in j:
            for c in j["choices"]:
                text.append(c.get("text") or "")
                d = c.get("delta") or {}
                text.append((d.get("content") or "") + (d.get("reasoning_content") or ""))
        elif j.get("type") == "content_block_delta":
            d = j["delta"]
            text.append(d.get("text") or d.get("thinking") or d.get("partial_json") or "")
        elif isinstance(j.get("delta"), str):
            text.append(j["delta"])
    return "".join(text)


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/release/bin/deepinfer")
    ap.add_argument("--units", type=int, default=3)
    ap.add_argument("--streams", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pd", action="store_true", help="kill the prefill unit of a prefill/decode setup")
    ap.add_argument("--out")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="kill_drill_")
    model, unit_dir = os.path.join(work, "model"), os.path.join(work, "units")
    os.makedirs(unit_dir)
    subprocess.run([args.binary, "init-model", "--preset", "tiny", "--out", model, "--seed", "5"], check=True,
                   capture_output=True)
    unit_args = [args.binary, "serve", model, "--port", "0", "--served-model-name", MODEL, "--unit-dir", unit_dir,
                 "--kv-cache-memory-bytes", str(256 << 20)]
    reference_unit = None
    if args.pd:
        colocated_args = list(unit_args)
        del colocated_args[colocated_args.index("--unit-dir"):colocated_args.index("--unit-dir") + 2]
        reference_unit = Process(colocated_args)
        unit_args += ["--kv-store", os.path.join(work, "store")]
    role_args = [["--role", "prefill"] if args.pd and n == 0 else ["--role", "decode"] if args.pd else []
                 for n in range(args.units)]
    units = [Process(unit_args + role_args[n]) for n in range(args.units)]
    router = Process([args.binary, "router", "--port", "0", "--unit-dir", unit_dir, "--stall-timeout-s", "10"])
    summary = {"rounds": args.rounds, "streams_per_round": args.streams, "units": args.units, "pd": args.pd,
               "failed": 0, "mismatched": 0, "blocks_held_after_round": [], "kills": 0}
    try:
        deadline = time.time() + 30
        while router.metrics().get("deepinfer_router:units_healthy", 0) < args.units and time.time() < deadline:
            time.sleep(0.2)
        requests = requests_for(args.streams, args.max_tokens)
        if not args.pd:
            references = [stream_text(router.port, path, body) for path, body in requests]
        for r in range(args.rounds):
            if args.pd:
                # New prompts each round: the decode units find none of them in their own caches.
                requests = requests_for(args.streams, args.max_tokens, prefix=f"Round {r}. {LONG_PROMPT} ")
                references = [None] * len(requests)

                def reference(i):
                    references[i] = stream_text(reference_unit.port, *requests[i])

                ref_threads = [threading.Thread(target=reference, args=(i,)) for i in range(len(requests))]
                for t in ref_threads:
                    t.start()
                for t in ref_threads:
                    t.join()
            results = [None] * len(requests)

            def run(i):
                try:
                    results[i] = stream_text(router.port, *requests[i])
                except Exception as e:  # noqa: BLE001 -- a failed request is what the drill counts
                    results[i] = e

            threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
            for t in threads:
                t.start()
            if args.pd:
                time.sleep(rng.uniform(0.05, 0.6))
                victim = units[0]
            else:
                time.sleep(rng.uniform(0.5, 1.5))
                busy = [u for u in units if u.metrics().get("deepinfer:num_requests_running", 0) > 0] or units
                victim = rng.choice(busy)
            victim.stop(signal.SIGKILL)
            summary["kills"] += 1
            n = units.index(victim)
            units[n] = Process(unit_args + role_args[n])
            for t in threads:
                t.join()
            failed = [i for i, x in enumerate(results) if isinstance(x, Exception)]
            mismatched = [i for i, x in enumerate(results) if not isinstance(x, Exception) and x != references[i]]
            # The units free a request's blocks once its connection closes: a moment after the client's end.
            deadline = time.time() + 5
            while True:
                held = sum(u.metrics().get("deepinfer:kv_blocks_used", 0) for u in units)
                if held == 0 or time.time() > deadline:
                    break
                time.sleep(0.1)
            summary["failed"] += len(failed)
            summary["mismatched"] += len(mismatched)
            summary["blocks_held_after_round"].append(held)
            print(f"round {r + 1}: failed {len(failed)} mismatched {len(mismatched)} blocks held {held:.0f}"
                  + "".join(f"\n  failed {requests[i][0]}: {results[i]}" for i in failed[:3])
                  + "".join(f"\n  mismatch {requests[i][0]} {json.dumps({k: v for k, v in requests[i][1].items() if k not in ('messages', 'input', 'prompt')})}"
                            f" from char {first_difference(results[i], references[i])} of {len(references[i])}:"
                            f" {results[i][first_difference(results[i], references[i]):][:40]!r} vs"
                            f" {references[i][first_difference(results[i], references[i]):][:40]!r}" for i in mismatched[:5]),
                  flush=True)
        m = router.metrics()
        summary["migrations"] = m.get("deepinfer_router:migrations_total", 0)
        summary["router_failed"] = m.get("deepinfer_router:failed_total", 0)
        summary["prefills"] = m.get("deepinfer_router:prefills_total", 0)
        summary["prefill_fallbacks"] = m.get("deepinfer_router:prefill_fallbacks_total", 0)
    finally:
        router.stop()
        if reference_unit:
            reference_unit.stop(signal.SIGKILL)
        for u in units:
            u.stop(signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(summary))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if summary["failed"] == 0 and summary["mismatched"] == 0 and not any(summary["blocks_held_after_round"]) \
        else 1


if __name__ == "__main__":
    sys.exit(main())
