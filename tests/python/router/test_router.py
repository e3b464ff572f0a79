"""`deepinfer router` in front of real `deepinfer serve` units (the tiny preset): discovery through lease files,
the API proxied in each protocol's shape, refusal when no unit can meet the SLO, a retry when a unit is gone
before the first byte, and a stream migrated to another unit when its unit is killed mid-stream."""
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from server_process import Server, wait_for  # noqa: E402
from conftest import make_tiny_model  # noqa: E402
from router_process import CuttingRelay, Router  # noqa: E402

UNIT_ARGS = ["--kv-cache-memory-bytes", str(64 << 20)]
# A seeded stream of the tiny model whose chunks end inside a character at some boundaries.
CUT_PROMPT = "Write a poem about the sea #46"
CUT_SEED = 1047


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=5)


@pytest.fixture
def cluster(deepinfer_bin, tiny_model, tmp_path):
    """Two units registered in one lease directory (sorted by unit id, as the router orders ties)."""
    unit_dir = tmp_path / "units"
    unit_dir.mkdir()
    units = [Server(deepinfer_bin, tiny_model, "--unit-dir", str(unit_dir), "--served-model-name", "tiny", *UNIT_ARGS)
             for _ in range(2)]
    wait_for(lambda: len(list(unit_dir.glob("*.lease"))) == 2, timeout=10)
    units.sort(key=lambda u: f"unit-{u.proc.pid}-{u.port}")  # the lease directory's order
    routers = []

    def start_router(*args, static=False):
        # static: the units listed by URL (no lease to lapse while health checks are far apart).
        where = [a for u in units for a in ("--unit", u.url)] if static else ["--unit-dir", str(unit_dir)]
        routers.append(Router(deepinfer_bin, *where, *args))
        return routers[-1]

    yield unit_dir, units, start_router
    for r in routers:
        assert r.stop() == 0
    for u in units:
        u.stop(signal.SIGKILL)


def sse_events(payload):
    return [e for e in payload.decode().split("\n\n") if e]


def completion_text(events):
    return "".join(json.loads(e[len("data: "):])["choices"][0]["text"] for e in events
                   if e.startswith("data: {") and json.loads(e[len("data: "):])["choices"])


def test_proxies_each_protocol_and_discovers_units(cluster):
    unit_dir, units, start_router = cluster
    router = start_router()
    status, _, body = router.request("GET", "/health")
    assert status == 200 and json.loads(body)["units"] == 2
    status, _, body = router.request("GET", "/v1/models")
    assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == ["tiny"]

    # Greedy output is a function of the prompt: through the router it equals a unit's own answer.
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "temperature": 0, "seed": 7}
    status, headers, body = router.request("POST", "/v1/chat/completions", chat)
    assert status == 200 and headers["x-deepinfer-unit"].startswith("unit-")
    _, _, direct = units[1].json("POST", "/v1/chat/completions", chat)
    assert json.loads(body)["choices"][0]["message"] == direct["choices"][0]["message"]

    status, headers, body = router.request("POST", "/v1/chat/completions", {**chat, "stream": True})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(body)
    assert events[-1] == "data: [DONE]" and len(events) >= 3

    # Errors stay the unit's, in the protocol's shape: Anthropic's for /v1/messages, OpenAI's elsewhere.
    status, _, body = router.request("POST", "/v1/messages", {"model": "tiny", "messages": []})
    assert status == 400 and json.loads(body)["type"] == "error"
    status, _, body = router.request("POST", "/v1/completions", "{not json")
    assert status == 400 and "message" in json.loads(body)["error"]
    status, _, body = router.request("DELETE", "/v1/models")
    assert status == 405 and json.loads(body)["error"]["message"]

    # A malformed lease and one of another model are skipped with a metric; a lapsed lease takes its unit out.
    (unit_dir / "garbage.lease").write_text("{\"format\": 7")
    lease = json.loads(next(unit_dir.glob("unit-*.lease")).read_text())
    other = dict(lease, unit_id="other-model", models=["not-tiny"])
    (unit_dir / "other-model.lease").write_text(json.dumps(other))
    router_other = start_router("--served-model-name", "tiny")
    m = router_other.metrics()
    assert m["deepinfer_router:lease_errors_total"] >= 1 and m["deepinfer_router:units_ignored_total"] >= 1
    assert m["deepinfer_router:units_healthy"] == 2
    units[0].proc.send_signal(signal.SIGSTOP)  # no renewal: the lease lapses after its TTL (3 s)
    try:
        wait_for(lambda: router_other.metrics()["deepinfer_router:units_healthy"] == 1, timeout=8)
        for _ in range(3):
            status, headers, _ = router_other.request("POST", "/v1/completions",
                                                      {"model": "tiny", "prompt": "x", "max_tokens": 2})
            assert status == 200 and headers["x-deepinfer-unit"] == f"unit-{units[1].proc.pid}-{units[1].port}"
    finally:
        units[0].proc.send_signal(signal.SIGCONT)


def test_refuses_with_retry_after_when_no_unit_meets_the_slo(cluster):
    _, _, start_router = cluster
    # A TTFT objective of a microsecond: every unit's predicted time to first token is longer.
    router = start_router("--ttft-slo-ms", "0.001")
    status, headers, body = router.request("POST", "/v1/chat/completions",
                                           {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}]})
    assert status == 429 and int(headers["retry-after"]) >= 1
    assert json.loads(body)["error"]["type"] == "rate_limit_error"
    status, _, body = router.request("POST", "/v1/messages", {"model": "tiny", "max_tokens": 4,
                                                               "messages": [{"role": "user", "content": "Hi"}]})
    assert status == 429 and json.loads(body)["type"] == "error"
    assert router.metrics()["deepinfer_router:rejected_slo_total"] == 2


def test_unit_gone_before_first_byte_and_mid_stream(cluster):
    unit_dir, units, start_router = cluster
    # Health checks far apart: the router learns of the dead unit only from the request that fails on it.
    router = start_router("--refresh-s", "60", static=True)
    body = {"model": "tiny", "prompt": "Once upon a time", "max_tokens": 300, "temperature": 0,
            "ignore_eos": True, "stream": True}
    # The uninterrupted stream.
    status, headers, payload = router.request("POST", "/v1/completions", body)
    reference = sse_events(payload)
    assert status == 200 and reference[-1] == "data: [DONE]"
    assert all("token_ids" not in e for e in reference)  # the router asked for them, the client did not
    # A client that asks for the ids gets them (vLLM's return_token_ids): the prompt's once, then every token's.
    _, _, with_ids = router.request("POST", "/v1/completions", {**body, "max_tokens": 40, "return_token_ids": True})
    chunks = [json.loads(e[6:])["choices"][0] for e in sse_events(with_ids) if e.startswith("data: {")]
    assert [c["prompt_token_ids"] for c in chunks if "prompt_token_ids" in c] == [chunks[0]["prompt_token_ids"]]
    assert len(chunks[0]["prompt_token_ids"]) >= 4 and sum(len(c["token_ids"]) for c in chunks) == 40

    # Kill the unit after a few events: the stream goes on on the other unit, and equals the reference.
    conn = http.client.HTTPConnection("127.0.0.1", router.port, timeout=60)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    # Greedy output does not depend on the unit: kill whichever one the router chose.
    victim = next(u for u in units if resp.getheader("x-deepinfer-unit") == u.url)
    survivor = next(u for u in units if u is not victim)
    received = b""
    while received.count(b"\n\n") < 20:
        chunk = resp.read1(65536)
        assert chunk, received
        received += chunk
    victim.proc.send_signal(signal.SIGKILL)
    received += resp.read()
    conn.close()
    events = sse_events(received)
    assert router.metrics()["deepinfer_router:migrations_total"] == 1
    assert completion_text(events) == completion_text(reference)
    assert events[-1] == "data: [DONE]"
    ids = {json.loads(e[6:])["id"] for e in events if e.startswith("data: {")}
    assert len(ids) == 1  # one response id throughout, as the uninterrupted stream has

    # A new request: the router tries no dead unit twice; it lands on the survivor.
    status, headers, payload = router.request("POST", "/v1/completions", {**body, "stream": False, "max_tokens": 3})
    assert status == 200 and headers["x-deepinfer-unit"] == survivor.url

    # The survivor's lease now carries its engine's fitted step-cost model, what placement predicts from.
    lease_path = unit_dir / f"unit-{survivor.proc.pid}-{survivor.port}.lease"
    wait_for(lambda: json.loads(lease_path.read_text())["load"]["calibrated"], timeout=5)
    assert any(c > 0 for c in json.loads(lease_path.read_text())["load"]["step_cost"])


def test_retry_on_another_unit_before_the_first_byte(cluster):
    _, units, start_router = cluster
    router = start_router("--refresh-s", "60", static=True)
    units[0].proc.send_signal(signal.SIGKILL)  # the unit the router would pick first among idle equals
    units[0].proc.wait()
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0}
    for _ in range(2):
        status, headers, _ = router.request("POST", "/v1/chat/completions", chat)
        assert status == 200 and headers["x-deepinfer-unit"] == units[1].url
    assert router.metrics()["deepinfer_router:retries_total"] == 1


def test_completion_cut_inside_a_character_continues_exactly(cluster, deepinfer_bin):
    """A legacy Completions stream cut right after a chunk whose last token ends inside a UTF-8 character (its
    unit holds the character's first bytes back): the unit that continues it must hold the same bytes, or the
    text loses or gains a U+FFFD there."""
    _, units, _ = cluster
    body = {"model": "tiny", "prompt": CUT_PROMPT, "max_tokens": 40, "temperature": 1.0, "seed": CUT_SEED,
            "ignore_eos": True, "stream": True, "return_token_ids": True}
    _, _, payload = units[1].request("POST", "/v1/completions", body)
    chunks = [json.loads(e[6:])["choices"][0] for e in sse_events(payload) if e.startswith("data: {")]
    texts = [c["text"] for c in chunks]
    ids = [c["token_ids"] for c in chunks]

    def held_bytes_after(k):
        # One-shot decoding writes held-back bytes as U+FFFD; the stream has not written them yet.
        decoded = units[1].json("POST", "/detokenize", {"tokens": [i for c in ids[:k + 1] for i in c]})[2]["prompt"]
        return decoded.endswith("\ufffd") and not texts[k].endswith("\ufffd")

    cut = next(k for k in range(len(chunks) - 2) if held_bytes_after(k))
    relay = CuttingRelay(units[0].port)
    try:
        router = Router(deepinfer_bin, "--unit", relay.url, "--unit", units[1].url, "--refresh-s", "60")
        relay.cut_after = cut + 1
        status, headers, resumed = router.request("POST", "/v1/completions", body)
        assert status == 200 and headers["x-deepinfer-unit"] == relay.url and relay.cuts == 1
        assert router.metrics()["deepinfer_router:migrations_total"] == 1
        events = sse_events(resumed)
        assert completion_text(events) == "".join(texts)
        got = [json.loads(e[6:])["choices"][0] for e in events if e.startswith("data: {")]
        assert [i for c in got for i in c["token_ids"]] == [i for c in ids for i in c]
        assert events[-1] == "data: [DONE]"
        assert router.stop() == 0
    finally:
        relay.close()
