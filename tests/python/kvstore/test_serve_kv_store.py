"""`deepinfer serve --kv-store DIR`: the prompt's full 128-token blocks are written behind to DIR, verify clean,
show on /metrics, and servers restarted (or run beside each other) on the same DIR keep serving; a DIR that
cannot be used is logged and the server runs on its RAM cache."""
import json
import pathlib
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "server"))
from conftest import make_tiny_model  # noqa: E402
from server_process import Server, wait_for  # noqa: E402

MODEL = "tiny-kv"


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=11)


def long_prompt_request(max_tokens=2):
    # Well over two 128-token blocks in the tiny model's tokenizer.
    text = " ".join(f"word{i}" for i in range(300))
    return {"model": MODEL, "max_tokens": max_tokens, "seed": 3,
            "messages": [{"role": "user", "content": text}]}


def kvstore_cli(binary, *args):
    return subprocess.run([binary, "kvstore", *args], capture_output=True, text=True, timeout=120)


def test_serve_writes_blocks_behind_and_reports_them(deepinfer_bin, tiny_model, tmp_path):
    store = tmp_path / "kv"
    server = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--kv-store", str(store),
                    "--kv-ttl-class", "agent")
    try:
        status, _, body = server.json("POST", "/v1/chat/completions", long_prompt_request())
        assert status == 200, body
        prompt_tokens = body["usage"]["prompt_tokens"]
        assert prompt_tokens >= 256
        assert wait_for(lambda: server.metrics().get("deepinfer:kvstore_writes_total", 0) >= prompt_tokens // 128)
        m = server.metrics()
        assert m["deepinfer:kvstore_writes_failed_total"] == 0
        assert m['deepinfer:kvstore_health{state="ok"}'] == 1
        assert m["deepinfer:kvstore_written_bytes_total"] > 0
    finally:
        assert server.stop() == 0, "\n".join(server.log)
    proc = kvstore_cli(deepinfer_bin, "verify", str(store), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["good"] == report["checked"] >= prompt_tokens // 128
    stats = json.loads(kvstore_cli(deepinfer_bin, "stats", str(store), "--json").stdout)
    [ns] = stats["namespaces"]
    assert "compute=exact kv=f32" in ns["description"]
    assert stats["tmp_files"] == 0
    # A restarted server on the same directory serves the stored prefix: exact prompt_cache_hit_tokens
    # (the full blocks from the block files, then the prompt's snapshot: every position but the last, which
    # is always recomputed), the same answer as the first server, and no block written twice.
    full_blocks = (prompt_tokens - 1) // 128
    again = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--kv-store", str(store))
    try:
        status, _, body2 = again.json("POST", "/v1/chat/completions", long_prompt_request())
        assert status == 200
        assert body2["usage"]["prompt_cache_hit_tokens"] == prompt_tokens - 1
        assert body2["usage"]["prompt_tokens_details"]["cached_tokens"] == prompt_tokens - 1
        assert body2["choices"][0]["message"] == body["choices"][0]["message"]
        m = again.metrics()
        assert m["deepinfer:kvstore_hit_blocks_total"] == full_blocks
        [external] = [v for k, v in m.items() if k.startswith("deepinfer:external_prefix_cache_hits_total")]
        assert external == full_blocks * 128
        assert m.get("deepinfer:kvstore_writes_total", 0) == 0
    finally:
        assert again.stop() == 0, "\n".join(again.log)


def test_request_ttl_class_sets_the_blocks_expiry(deepinfer_bin, tiny_model, tmp_path):
    store = tmp_path / "kv"
    server = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--kv-store", str(store),
                    "--kv-ttl-agent-s", "1000", "--kv-ttl-chat-s", "100000")
    try:
        status, _, body = server.json("POST", "/v1/chat/completions", {**long_prompt_request(), "kv_ttl_class": "x"})
        assert status == 400 and body["error"]["param"] == "kv_ttl_class", body
        before = time.time()
        status, _, body = server.json("POST", "/v1/chat/completions",
                                      {**long_prompt_request(), "kv_ttl_class": "agent"})
        assert status == 200, body
        assert wait_for(lambda: server.metrics().get("deepinfer:kvstore_writes_total", 0) >= 2)
    finally:
        assert server.stop() == 0
    blocks = list(store.rglob("*.kvb"))
    assert blocks
    for p in blocks:
        # mtime = expiry = last use + the agent TTL (1000 s), not the server's default chat TTL.
        assert before + 990 <= p.stat().st_mtime <= time.time() + 1010, p


def test_unusable_store_directory_leaves_the_server_on_ram(deepinfer_bin, tiny_model, tmp_path):
    notes = tmp_path / "not-a-store"
    notes.mkdir()
    (notes / "keep.txt").write_text("an operator's file")
    server = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--kv-store", str(notes))
    try:
        status, _, body = server.json("POST", "/v1/chat/completions", long_prompt_request())
        assert status == 200, body
        assert not any(k.startswith("deepinfer:kvstore_") for k in server.metrics())
        assert any("KV store unavailable" in line and "not a deepinfer KV store" in line for line in server.log)
    finally:
        assert server.stop() == 0
    assert sorted(p.name for p in notes.iterdir()) == ["keep.txt"]
