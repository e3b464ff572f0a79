"""Two servers on one KV store directory under load, with the sweeper evicting (a capacity of a few blocks):
every answer equals a cold server's (seeded, exact replay), no request fails, no block fails verification,
one server answers from blocks the other wrote, and the directory verifies clean afterwards."""
import json
import pathlib
import random
import shutil
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "server"))
from conftest import make_tiny_model  # noqa: E402
from server_process import Server, wait_for  # noqa: E402

MODEL = "tiny-two"


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=17)


def request(i):
    text = " ".join(f"base{j % 7}x{j}" for j in range(150 + 40 * (i % 3))) + f" question {i}"
    return {"model": MODEL, "max_tokens": 2, "seed": 9, "messages": [{"role": "user", "content": text}]}


# A prompt sharing no block with request(i): 401 text tokens, 484 with the chat template's, 3 full blocks.
PROBE = {"model": MODEL, "max_tokens": 2, "seed": 9,
         "messages": [{"role": "user", "content": " ".join(f"probe{j % 5}y{j}" for j in range(100))}]}


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
        status, _, cold_probe = cold_server.json("POST", "/v1/chat/completions", PROBE)
        assert status == 200
    finally:
        assert cold_server.stop() == 0
    store = tmp_path / "kv"
    # One block file of the tiny model, from a first server's write, sizes the capacity: 6 blocks. The store
    # is emptied again, so that what the servers below find is only what they wrote.
    first = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--kv-store", str(store))
    first.json("POST", "/v1/chat/completions", request(0))
    assert first.stop() == 0
    block_file = next(store.rglob("*.kvb")).stat().st_size
    shutil.rmtree(store)
    args = ["--served-model-name", MODEL, "--kv-store", str(store), "--swa-replay", "exact",
            "--kv-store-capacity", str(6 * block_file), "--kv-store-sweep-s", "0.1"]
    servers = [Server(deepinfer_bin, tiny_model, *args) for _ in range(2)]
    failures = []
    answered = [0]
    try:
        # First one server reads what the other wrote, in turn: the second asks for the probe only once the
        # first's writes are done. A sweep evicts when the store is over 90% of its 6 blocks (5.4) and only
        # down to 80% (4.8 blocks), snapshot records first: the probe's 3 blocks are all the blocks there are,
        # so no sweep can take them before the read, however the sweeps and requests interleave under load. (Nor
        # is recomputing them chosen: the tiny model's prefill of them takes tens of milliseconds, the read one.)
        status, _, writer = servers[0].json("POST", "/v1/chat/completions", PROBE)
        assert status == 200 and writer["choices"][0]["message"] == cold_probe["choices"][0]["message"]
        full_blocks = (writer["usage"]["prompt_tokens"] - 1) // 128  # the last prompt token's block is recomputed
        assert full_blocks == 3
        assert wait_for(lambda: servers[0].metrics().get("deepinfer:kvstore_writes_total", 0) >= full_blocks, 60)
        status, _, reader = servers[1].json("POST", "/v1/chat/completions", PROBE)
        assert status == 200 and reader["choices"][0]["message"] == cold_probe["choices"][0]["message"]
        # Every block the second server did not compute came from the store, which holds only the first's
        # writes: all 3 were read. (The first's snapshot record of the finished probe may add the prompt's last
        # tokens to the hit when no sweep has evicted it yet, so the hit is at least the blocks.)
        assert servers[1].metrics()["deepinfer:kvstore_hit_blocks_total"] == full_blocks
        assert reader["usage"]["prompt_cache_hit_tokens"] >= full_blocks * 128, reader["usage"]

        # Then both under load on the request(i) prompts, whose blocks (more than 6) the sweeps keep evicting.
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
    proc = subprocess.run([deepinfer_bin, "kvstore", "verify", str(store), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["bad"] == 0
