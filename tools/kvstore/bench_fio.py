#!/usr/bin/env python3
"""Measures the device's limit with fio (Debian `fio`) for `deepinfer bench kvstore --peer FILE`: for each block
size, a write pass and a cold read pass on one file in the same directory the store bench uses, with the
same block size and queue depth, through io_uring. Writes are buffered with an fdatasync after every block
(what the store does with `--fsync data`); reads are O_DIRECT (what `bench kvstore` reads with), so both
sides read the device, not the page cache.

Usage: python3 tools/kvstore/bench_fio.py --dir DIR [--block-bytes 114688,880640,1761280] [--queue-depth 32]
         [--total-mib 512] --out fio.json
The bench prints these figures beside its own with the ratio. Not run in CI (it writes --total-mib per size).
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile


def run_fio(path, rw, bs, qd, total, extra):
    cmd = [
        "fio", "--name=kvstore", f"--filename={path}", f"--rw={rw}", f"--bs={bs}", f"--iodepth={qd}",
        "--ioengine=io_uring", f"--size={total}", "--numjobs=1", "--output-format=json", "--group_reporting",
    ] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    side = job["read" if "read" in rw else "write"]
    pct = side.get("clat_ns", {}).get("percentile", {})
    return {
        "gbps": side["bw_bytes"] / 1e9,
        "p50_ms": pct.get("50.000000", 0) / 1e6,
        "p99_ms": pct.get("99.000000", 0) / 1e6,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="the directory the store bench uses (a scratch file goes there)")
    ap.add_argument("--block-bytes", default="114688,880640,1761280")
    ap.add_argument("--queue-depth", type=int, default=32)
    ap.add_argument("--total-mib", type=int, default=512)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if shutil.which("fio") is None:
        raise SystemExit("bench_fio.py: fio is not installed (Debian package fio; scripts/setup.sh installs it)")
    os.makedirs(args.dir, exist_ok=True)
    version = subprocess.run(["fio", "--version"], check=True, capture_output=True, text=True).stdout.strip()
    result = {"system": f"{version} io_uring, queue depth {args.queue_depth}", "queue_depth": args.queue_depth,
              "results": []}
    # A scratch file beside the store (not inside it: the store refuses foreign files), removed afterwards.
    scratch = tempfile.mkdtemp(prefix="fio.", dir=os.path.dirname(os.path.abspath(args.dir)) or ".")
    try:
        path = os.path.join(scratch, "fio.dat")
        for bs in [int(x) for x in args.block_bytes.split(",") if x]:
            # O_DIRECT needs 4 KiB multiples; the store's files are header + payload, read whole.
            direct_bs = (bs + 4096 + 4095) // 4096 * 4096
            blocks = max(16, args.total_mib * 2**20 // direct_bs)
            total = blocks * direct_bs
            write = run_fio(path, "write", direct_bs, args.queue_depth, total, ["--fdatasync=1", "--direct=0"])
            read = run_fio(path, "randread", direct_bs, args.queue_depth, total, ["--direct=1"])
            result["results"].append({"block_bytes": bs, "io_bytes": direct_bs, "write": write, "read": read})
            print(f"{bs} B blocks: write {write['gbps']:.3f} GB/s, read {read['gbps']:.3f} GB/s "
                  f"(p50 {read['p50_ms']:.3f} ms, p99 {read['p99_ms']:.3f} ms)", flush=True)
            os.unlink(path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
