"""`deepinfer kvstore stats|verify|gc` on stores written by an independent Python writer of the block format
the README documents ("KV store format"): if the format description and the code drift apart, verify fails.
Also every way a file can be wrong, expiry in the file times, the watermark, and operator-facing errors."""
import json
import os
import pathlib
import struct
import subprocess
import time

import pytest
import xxhash

HEADER = 4096


def h128(data):
    """XXH3-128 as (high, low)."""
    d = xxhash.xxh3_128_intdigest(data)
    return d >> 64, d & ((1 << 64) - 1)


def hex128(v):
    return f"{v[0]:016x}{v[1]:016x}"


def le128(v):
    return struct.pack("<QQ", v[1], v[0])  # low half first


def namespace_id(fingerprint, segments, description):
    # XXH3-128 over: magic, fingerprint (low, high), u64 (version << 32 | segment count), each segment size,
    # the description (StoreLayout::Id).
    data = b"DIKVBLK\0" + le128(fingerprint) + struct.pack("<Q", (1 << 32) | len(segments))
    data += b"".join(struct.pack("<Q", s) for s in segments) + description.encode()
    return h128(data)


def block_bytes(ns, block_hash, parent, index, ttl_class, tokens, payload, version=1):
    header = bytearray(HEADER)
    header[0:8] = b"DIKVBLK\0"
    struct.pack_into("<IIQq", header, 8, version, HEADER, len(payload), 1764000000000)
    header[32:48] = le128(ns)
    header[48:64] = le128(block_hash)
    header[64:80] = le128(parent)
    struct.pack_into("<IB", header, 80, index, ttl_class)
    struct.pack_into("<I", header, 88, 128)
    struct.pack_into("<128i", header, 112, *tokens)
    header[96:112] = le128(h128(bytes(header) + payload))  # checksum field zero while hashing
    return bytes(header) + payload


class PyStore:
    """Writes a store directory the way the README says a store looks."""

    def __init__(self, root, fingerprint=(0xAB, 0xCD), segments=(3000, 5000), description="py test layout"):
        self.root = pathlib.Path(root)
        self.segments = list(segments)
        self.ns = namespace_id(fingerprint, self.segments, description)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "KVSTORE").write_text("deepinfer-kvstore 1\n")
        for d in ("tmp", "trash", "quarantine"):
            (self.root / d).mkdir(exist_ok=True)
        nsdir = self.root / hex128(self.ns)
        nsdir.mkdir(exist_ok=True)
        (nsdir / "NAMESPACE").write_text(json.dumps({
            "format": 1, "model_fingerprint": hex128(fingerprint), "segment_bytes": self.segments,
            "payload_bytes": sum(self.segments), "description": description}, indent=2) + "\n")

    def path(self, block_hash):
        hx = hex128(block_hash)
        return self.root / hex128(self.ns) / hx[:2] / f"{hx}.kvb"

    def put(self, seed, ttl_class=1, expires_in=86400, used_ago=0, ns=None):
        block_hash = h128(b"block %d" % seed)
        tokens = [(seed * 7919 + i) % 129280 for i in range(128)]
        payload = bytes((seed + i * 31) & 0xFF for i in range(sum(self.segments)))
        p = self.path(block_hash)
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(block_bytes(ns or self.ns, block_hash, (0, 0), 0, ttl_class, tokens, payload))
        now = time.time()
        os.utime(p, (now - used_ago, now + expires_in))  # atime = last use, mtime = expiry
        return p


def run(binary, *args):
    return subprocess.run([binary, "kvstore", *args], capture_output=True, text=True, timeout=120)


def test_python_written_store_verifies_and_reports(deepinfer_bin, tmp_path):
    store = PyStore(tmp_path / "s")
    for seed in range(5):
        store.put(seed)
    proc = run(deepinfer_bin, "verify", str(store.root), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["checked"] == 5 and report["good"] == 5 and report["bad"] == 0
    proc = run(deepinfer_bin, "stats", str(store.root), "--json")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    [ns] = stats["namespaces"]
    assert ns["id"] == hex128(store.ns)
    assert ns["model_fingerprint"] == hex128((0xAB, 0xCD))
    assert ns["blocks"] == 5 and ns["bytes"] == 5 * (HEADER + 8000) and ns["expired"] == 0
    proc = run(deepinfer_bin, "stats", str(store.root))
    assert "5 blocks" in proc.stdout and hex128(store.ns) in proc.stdout


def test_verify_names_every_kind_of_bad_file(deepinfer_bin, tmp_path):
    store = PyStore(tmp_path / "s")
    good = store.put(0)
    flipped = store.put(1)
    data = bytearray(flipped.read_bytes())
    data[HEADER + 4000] ^= 0x40
    flipped.write_bytes(bytes(data))
    truncated = store.put(2)
    truncated.write_bytes(truncated.read_bytes()[:HEADER + 10])
    swapped = store.put(3)
    swapped.write_bytes(good.read_bytes())  # another block's file under this name
    other_ns = store.put(4, ns=namespace_id((1, 2), store.segments, "another model"))
    newer = store.put(5)
    data = bytearray(newer.read_bytes())
    struct.pack_into("<I", data, 8, 2)
    data[96:112] = bytes(16)
    data[96:112] = le128(h128(bytes(data)))
    newer.write_bytes(bytes(data))
    proc = run(deepinfer_bin, "verify", str(store.root), "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["checked"] == 6 and report["good"] == 1
    assert report["reasons"] == {"checksum": 1, "truncated": 1, "hash": 1, "namespace": 1, "version": 1}
    by_path = {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in report["files"]}
    assert by_path[str(flipped)] == "checksum"
    assert by_path[str(truncated)] == "truncated"
    assert by_path[str(swapped)] == "hash"
    assert by_path[str(other_ns)] == "namespace"
    assert by_path[str(newer)] == "version"
    # --quarantine moves the bad ones out of the way; a second verify is clean.
    proc = run(deepinfer_bin, "verify", str(store.root), "--quarantine")
    assert proc.returncode == 1 and "quarantined 5" in proc.stdout
    assert len(list((store.root / "quarantine").iterdir())) == 5
    assert run(deepinfer_bin, "verify", str(store.root)).returncode == 0
    assert good.exists()


def test_gc_expiry_watermark_and_all(deepinfer_bin, tmp_path):
    store = PyStore(tmp_path / "s")
    expired = [store.put(s, expires_in=-60) for s in range(2)]
    # Live blocks with last uses 50, 40, ..., 10 minutes ago (seed 10 least recent).
    live = [store.put(10 + i, used_ago=(5 - i) * 600) for i in range(5)]
    (store.root / "tmp" / "elsewhere.1.1.tmp").write_bytes(b"partial")
    os.utime(store.root / "tmp" / "elsewhere.1.1.tmp", (0, 0))  # a stalled writer's: long past max age
    proc = run(deepinfer_bin, "gc", str(store.root), "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["expired"] == 2 and all(p.exists() for p in expired)
    file_bytes = HEADER + 8000
    # Capacity for 5 blocks: after expiry 5 remain = 100% > 90%: LRU down to 2 blocks (40%).
    proc = run(deepinfer_bin, "gc", str(store.root), "--json", "--capacity", str(5 * file_bytes), "--high", "0.9",
               "--low", "0.4", "--trash-grace", "0")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert r["expired"] == 2 and r["capacity_evicted"] == 3 and r["tmp_removed"] == 1
    assert [p.exists() for p in live] == [False, False, False, True, True]
    assert not any(p.exists() for p in expired)
    proc = run(deepinfer_bin, "gc", str(store.root), "--all")
    assert proc.returncode == 0 and not any(p.exists() for p in live)
    assert list((store.root / "trash").iterdir()) == []


def test_operator_errors_are_one_line(deepinfer_bin, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("not a store")
    for args, code, text in [
        (("stats", str(tmp_path / "missing")), 1, "No such file"),
        (("verify", str(notes)), 1, "not a deepinfer KV store"),
        (("gc",), 2, "DIR"),
        (("frobnicate", str(notes)), 2, "unknown action"),
        (("gc", str(notes), "--high", "2"), 2, "--high"),
        (("gc", str(notes), "--high", "0.5", "--low", "0.8"), 2, "--low"),
    ]:
        proc = run(deepinfer_bin, *args)
        assert proc.returncode == code, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and text in proc.stderr, (args, proc.stderr)
        assert proc.stderr.startswith("deepinfer kvstore")
    assert (notes / "todo.txt").exists()
    other = tmp_path / "newer"
    other.mkdir()
    (other / "KVSTORE").write_text("deepinfer-kvstore 2\n")
    proc = run(deepinfer_bin, "stats", str(other))
    assert proc.returncode == 1 and "format '2', this build reads format 1" in proc.stderr
