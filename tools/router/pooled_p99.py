#!/usr/bin/env python3
"""Pools the decode gaps of several pd_tbt.py runs (their --out files) per setting and prints each setting's p50
and p99 over the pool, and the ratios pd_tbt.py prints for one run. One run's p99 rests on its few largest gaps
(about 5 of 500 per round and setting); a pool of runs puts more gaps behind each percentile.

Usage: python3 tools/router/pooled_p99.py LABEL=RUN.json[,RUN.json...] [LABEL=...]
  e.g. pooled_p99.py old=old-1.json,old-2.json new=new-1.json,new-2.json
Not run in CI (it reads benchmark output).
"""
import json
import sys

from pd_tbt import percentile

SETTINGS = ("alone", "colocated", "pd_alone", "pd")


def pooled(paths):
    gaps = {name: [] for name in SETTINGS}
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        for name in SETTINGS:
            gaps[name] += run["gaps_ms"][name]
    return gaps


def main():
    if len(sys.argv) < 2 or any("=" not in a for a in sys.argv[1:]):
        sys.exit(__doc__)
    for arg in sys.argv[1:]:
        label, paths = arg.split("=", 1)
        gaps = pooled(paths.split(","))
        p99 = {name: percentile(g, 0.99) for name, g in gaps.items()}
        print(f"{label}: " + ", ".join(f"{name} p50 {percentile(g, 0.5):.2f} p99 {p99[name]:.2f} ms ({len(g)} gaps)"
                                       for name, g in gaps.items()))
        print(f"{label}: pd/pd_alone {p99['pd'] / p99['pd_alone']:.3f}, pd/alone {p99['pd'] / p99['alone']:.3f},"
              f" colocated/alone {p99['colocated'] / p99['alone']:.3f} (p99 over the pool)")


if __name__ == "__main__":
    main()
