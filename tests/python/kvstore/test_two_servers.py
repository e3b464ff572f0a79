"""Two servers on one KV store directory under load, with the sweeper evicting (a capacity of a few blocks):
every answer equals a cold server's (seeded, exact replay), no request fails, no block fails verification,
and the directory verifies clean afterwards."""
import json
import pathlib
import random
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "server"))
from conftest import make_tiny_model  # noqa: E402
from server_process import Server  # noqa: E402

MODEL = "tiny-two"


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=17)


def request(i):
    text = " ".join(f"base{j % 7}x{j}" for j in range(150 + 40 * (i % 3))) + f" question {i}"
    return {"model": MODEL, "max_tokens": 2, "seed": 9, "messages": [{"role": "user", "content": text}]}


def test_two_servers_share_a_directory_under_eviction(deepinfer_bin, tiny_model, tmp_path):
    prompts = list(range(12))
    cold_server = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--swa-replay", "exact",
                         "--no-enable-prefix-caching")
    try:
        cold = {}
        for i in prompts:
            status, _, body = cold_server.json("POST", "/v1/chat/completions", request(i))
            assert status == 200
            cold[i] = body["choices"][0]["message"]
    finally:
        assert cold_server.stop() == 0
    store = tmp_path / "kv"
    # One block file of the tiny model, from a first server's write, sizes the capacity: 6 blocks.
    first = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--kv-store", str(store))
    first.json("POST", "/v1/chat/completions", request(0))
    assert first.stop() == 0
    block_file = next(store.rglob("*.kvb")).stat().st_size
    args = ["--served-model-name", MODEL, "--kv-store", str(store), "--swa-replay", "exact",
            "--kv-store-capacity", str(6 * block_file), "--kv-store-sweep-s", "0.1"]
    servers = [Server(deepinfer_bin, tiny_model, *args) for _ in range(2)]
    failures = []
    answered = [0]
    try:
        def load(server, seed):
            rng = random.Random(seed)
            end = time.monotonic() + 6
            while time.monotonic() < end:
                i = rng.choice(prompts)
                status, _, body = server.json("POST", "/v1/chat/completions", request(i))
                if status != 200 or body["choices"][0]["message"] != cold[i]:
                    failures.append((i, status, body))
                answered[0] += 1

        threads = [threading.Thread(target=load, args=(s, k)) for k, s in enumerate(servers * 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        metrics = [s.metrics() for s in servers]
    finally:
        for s in servers:
            assert s.stop() == 0, "\n".join(s.log)
    assert not failures, failures[:3]
    assert answered[0] > 20
    total = lambda name: sum(v for m in metrics for k, v in m.items() if k.startswith(name))  # noqa: E731
    assert total("deepinfer:kvstore_verify_failures_total") == 0
    assert total("deepinfer:kvstore_evictions_total") > 0, "the watermark never evicted"
    assert total("deepinfer:kvstore_hit_blocks_total") > 0, "no server read a block the other wrote"
    proc = subprocess.run([deepinfer_bin, "kvstore", "verify", str(store), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["bad"] == 0
