#!/usr/bin/env python3
"""Times Hugging Face transformers' deepseek_v4 on CPU for the runs `deepinfer bench model` makes, and writes
the figures as JSON for `deepinfer bench model --peer FILE`, which prints them beside ours with the ratio.

Same work as ours: one prompt of each length (prefill tokens/s), then for each batch size that many
sequences with a context of --context tokens, timed over --steps single-token decode steps on a DynamicCache
(tokens/s = batch / median step time). Token ids follow the same formula as ours.

transformers cannot run the FP8/MXFP4 checkpoints on CPU, so give it a BF16 checkpoint of the same shape
(`deepinfer init-model --preset bench --format bf16 --out DIR`) and run ours on that directory too for a
like-for-like row. torch runs on all cores in bf16 (its fast CPU path; --dtype float32 for the exact one).

Usage: .venv/bin/python tools/model/bench_transformers.py --model DIR [--prompts 512,4096] [--batches 1,8,32]
         [--context 256] [--steps 4] [--dtype bfloat16|float32] --out peer.json
Needs torch and transformers (scripts/setup.sh --reference). Not run in CI.
"""
import argparse
import json
import os
import time

import torch
import transformers
from transformers import DeepseekV4ForCausalLM, DynamicCache


def token_at(seq, i, vocab):
    return (seq * 7919 + i * 104729 + 17) % vocab


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", default="512,4096")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    torch.set_num_threads(os.cpu_count())
    dtype = getattr(torch, args.dtype)
    model = DeepseekV4ForCausalLM.from_pretrained(args.model, dtype=dtype)
    model.eval()
    vocab = model.config.vocab_size
    result = {
        "system": f"transformers {transformers.__version__} deepseek_v4, torch {torch.__version__} CPU, "
                  f"{args.dtype}, {torch.get_num_threads()} threads",
        "prefill": {},
        "decode": {},
    }
    with torch.no_grad():
        for length in [int(x) for x in args.prompts.split(",") if x]:
            ids = torch.tensor([[token_at(0, i, vocab) for i in range(length)]])
            start = time.perf_counter()
            model(ids, use_cache=True, past_key_values=DynamicCache(config=model.config))
            seconds = time.perf_counter() - start
            result["prefill"][str(length)] = length / seconds
            print(f"prefill {length}: {length / seconds:.2f} tokens/s", flush=True)
        for batch in [int(x) for x in args.batches.split(",") if x]:
            context = max(args.context, 1)
            ids = torch.tensor([[token_at(s + 1, i, vocab) for i in range(context)] for s in range(batch)])
            cache = DynamicCache(config=model.config)
            model(ids, use_cache=True, past_key_values=cache)
            times = []
            for step in range(args.steps + 1):
                pos = context + step
                nxt = torch.tensor([[token_at(s + 1, pos, vocab)] for s in range(batch)])
                start = time.perf_counter()
                model(nxt, use_cache=True, past_key_values=cache, position_ids=torch.full((batch, 1), pos))
                if step > 0:  # step 0 warms up, as in ours
                    times.append(time.perf_counter() - start)
            median = sorted(times)[len(times) // 2]  # as ours: robust to one slow step
            result["decode"][str(batch)] = batch / median
            print(f"decode batch {batch}: {batch / median:.2f} tokens/s (median of {len(times)} steps)", flush=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
