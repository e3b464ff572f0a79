"""Prefill/decode disaggregation through `deepinfer router`: a `serve --role prefill` unit computes each long prompt
and writes its KV blocks to a shared `--kv-store`, a `serve --role decode` unit reads them from there (every block
verified; the window state replayed exactly) and generates. Its output equals a colocated unit's, greedy and
seeded; a prefill unit killed during the hand-off costs the request nothing (the decode unit computes what it
does not find) and leaves no sticky state; no KV block stays held once the streams closed."""
import http.client
import json
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from server_process import Server, wait_for  # noqa: E402
from conftest import make_tiny_model  # noqa: E402
from router_process import Router  # noqa: E402

MODEL = "tiny"
UNIT_ARGS = ["--served-model-name", MODEL, "--kv-cache-memory-bytes", str(64 << 20)]
# Several KV blocks of prompt (a block is 128 tokens).
PROMPT = " ".join(f"Paragraph {i}: the quick brown fox jumps over the lazy dog near the river bank." for i in range(40))


def metric(unit, name):
    return sum(v for k, v in unit.metrics().items() if k.split("{")[0] == name)


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=5)


@pytest.fixture
def pd(deepinfer_bin, tiny_model, tmp_path):
    store, unit_dir = tmp_path / "store", tmp_path / "units"
    unit_dir.mkdir()
    where = ["--kv-store", str(store), "--unit-dir", str(unit_dir)]
    prefill = Server(deepinfer_bin, tiny_model, *UNIT_ARGS, *where, "--role", "prefill")
    decode = Server(deepinfer_bin, tiny_model, *UNIT_ARGS, *where, "--role", "decode")
    colocated = Server(deepinfer_bin, tiny_model, *UNIT_ARGS)  # beside the router: the reference
    wait_for(lambda: len(list(unit_dir.glob("*.lease"))) == 2, timeout=10)
    roles = sorted(json.loads(p.read_text())["role"] for p in unit_dir.glob("*.lease"))
    assert roles == ["decode", "prefill"]  # the leases carry the role
    router = Router(deepinfer_bin, "--unit-dir", str(unit_dir), "--apply-plan", "--plan-interval-s", "0")
    yield router, prefill, decode, colocated
    assert router.stop() == 0
    for u in (prefill, decode, colocated):
        u.stop(signal.SIGKILL)


def chat_stream_text(status_headers_payload):
    status, headers, payload = status_headers_payload
    assert status == 200, payload
    text = ""
    for event in payload.decode().split("\n\n"):
        if event.startswith("data: {"):
            for c in json.loads(event[6:])["choices"]:
                text += (c["delta"].get("content") or "") + (c["delta"].get("reasoning_content") or "")
    return text, headers


def test_pd_output_equals_a_colocated_unit(pd):
    router, prefill, decode, colocated = pd
    greedy = {"model": MODEL, "prompt": PROMPT, "max_tokens": 24, "temperature": 0, "ignore_eos": True}
    status, headers, body = router.request("POST", "/v1/completions", greedy)
    assert status == 200 and headers["x-deepinfer-unit"] == f"unit-{decode.proc.pid}-{decode.port}"
    _, _, reference = colocated.json("POST", "/v1/completions", greedy)
    assert json.loads(body)["choices"][0]["text"] == reference["choices"][0]["text"]
    usage = json.loads(body)["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (reference["usage"]["prompt_tokens"], 24)
    # The prompt was computed on the prefill unit, which sampled the first token there and stored the state
    # after the prompt's last position (its full blocks and a snapshot of the rest), flushed before it answered.
    # The decode unit read them from the store and reported that token: it computed no prompt position (every
    # one of them cached), only the 23 rows of the tokens it generated.
    prompt_tokens = usage["prompt_tokens"]
    assert prompt_tokens >= 256 and prompt_tokens % 128 != 0
    assert usage["prompt_tokens_details"]["cached_tokens"] == prompt_tokens
    assert metric(prefill, "deepinfer:prompt_tokens_total") == prompt_tokens
    assert metric(decode, "deepinfer:external_prefix_cache_hits_total") == prompt_tokens // 128 * 128
    assert metric(decode, "deepinfer:generation_tokens_total") == 23
    m = router.metrics()
    assert m["deepinfer_router:prefills_total"] == 1 and m["deepinfer_router:first_tokens_handed_total"] == 1
    # A streamed, seeded Completions request: the stream, its ids and its usage equal the colocated unit's.
    streamed = {**greedy, "temperature": 1.0, "seed": 5, "stream": True, "return_token_ids": True,
                "stream_options": {"include_usage": True}}

    def chunks(payload):
        return [json.loads(e[6:]) for e in payload.decode().split("\n\n") if e.startswith("data: {")]

    status, _, payload = router.request("POST", "/v1/completions", streamed)
    assert status == 200
    got, want = chunks(payload), chunks(colocated.request("POST", "/v1/completions", streamed)[2])
    assert [c["choices"] for c in got] == [c["choices"] for c in want] and got[-1]["usage"]["completion_tokens"] == 24
    assert got[-1]["usage"]["prompt_tokens"] == want[-1]["usage"]["prompt_tokens"]
    assert router.metrics()["deepinfer_router:first_tokens_handed_total"] == 2
    # The id a unit is handed is checked (a client may send the header to a unit itself): malformed or out of
    # the vocabulary, a clear error.
    for bad in ("x", "-1", "1e3", "4294967296", "99999999"):
        status, _, answer = decode.request("POST", "/v1/completions", greedy, {"x-deepinfer-first-token": bad})
        assert status == 400 and b"x-deepinfer-first-token" in answer, (bad, answer)

    seeded = {"model": MODEL, "messages": [{"role": "user", "content": PROMPT + " Go on."}], "max_tokens": 24,
              "temperature": 1.0, "seed": 77, "ignore_eos": True, "stream": True}
    text, _ = chat_stream_text(router.request("POST", "/v1/chat/completions", seeded))
    assert text and text == chat_stream_text(colocated.request("POST", "/v1/chat/completions", seeded))[0]
    m = router.metrics()
    assert m["deepinfer_router:prefills_total"] == 3 and m["deepinfer_router:prefill_fallbacks_total"] == 0
    assert m["deepinfer_router:first_tokens_handed_total"] == 3
    # Short prompts skip the hand-off, and so do requests that generate nothing.
    status, _, _ = router.request("POST", "/v1/completions", {**greedy, "prompt": "Hi"})
    assert status == 200
    status, _, _ = router.request("POST", "/v1/messages/count_tokens",
                                  {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}]})
    assert status == 200 and router.metrics()["deepinfer_router:prefills_total"] == 3
    wait_for(lambda: metric(decode, "deepinfer:kv_blocks_used") == 0 and metric(prefill, "deepinfer:kv_blocks_used") == 0)


def test_prefill_unit_killed_during_hand_off(pd):
    router, prefill, decode, colocated = pd
    body = {"model": MODEL, "prompt": PROMPT + " Once more.", "max_tokens": 24, "temperature": 0,
            "ignore_eos": True, "stream": True}
    # Hung while it holds the hand-off, then killed: the router's wait for it ends, and the decode unit
    # computes the prompt itself.
    prefill.proc.send_signal(signal.SIGSTOP)
    result = {}
    thread = threading.Thread(target=lambda: result.update(r=router.request("POST", "/v1/completions", body)))
    thread.start()
    time.sleep(0.5)
    prefill.proc.send_signal(signal.SIGKILL)
    thread.join(60)
    status, headers, payload = result["r"]
    assert status == 200 and headers["x-deepinfer-unit"] == f"unit-{decode.proc.pid}-{decode.port}"

    def text(payload):
        return "".join(json.loads(e[6:])["choices"][0]["text"] for e in payload.decode().split("\n\n")
                       if e.startswith("data: {") and json.loads(e[6:])["choices"])

    reference = text(colocated.request("POST", "/v1/completions", body)[2])
    assert text(payload) == reference
    assert router.metrics()["deepinfer_router:prefill_fallbacks_total"] == 1
    # No sticky failure: the next requests succeed (the dead prefill unit is out; the decode unit computes).
    for _ in range(2):
        status, _, payload = router.request("POST", "/v1/completions", body)
        assert status == 200 and text(payload) == reference
    wait_for(lambda: metric(decode, "deepinfer:kv_blocks_used") == 0)


def finished(unit, reason):
    return sum(v for k, v in unit.metrics().items()
               if k.startswith("deepinfer:request_success_total{") and f'finished_reason="{reason}"' in k)


def open_stream(router, body, headers=None, events=5):
    """A stream through the router, read until `events` events arrived; the connection stays open."""
    conn = http.client.HTTPConnection("127.0.0.1", router.port, timeout=60)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    assert resp.status == 200
    received = b""
    while received.count(b"\n\n") < events:
        chunk = resp.read1(65536)
        assert chunk, received
        received += chunk
    return conn, resp, received


def test_client_gone_or_request_cancelled_frees_both_units_and_a_unit_switches_roles(pd, tmp_path):
    router, prefill, decode, _ = pd
    body = {"model": MODEL, "prompt": PROMPT + " Abort.", "max_tokens": 1500, "temperature": 0, "ignore_eos": True,
            "stream": True}
    held = lambda u: metric(u, "deepinfer:kv_blocks_used") + metric(u, "deepinfer:num_requests_running")  # noqa: E731

    # The client leaves mid-stream: the decode unit aborts the request (it does not run to max_tokens).
    conn, resp, _ = open_stream(router, body)
    assert resp.getheader("x-request-id").startswith("router-")  # the id the router gave it, for a cancel
    conn.close()
    wait_for(lambda: finished(decode, "abort") == 1 and held(decode) == 0, timeout=10)

    # The client leaves while the prefill unit holds the hand-off: the router closes its connection there and
    # never reaches the decode unit; once the prefill unit runs again it holds nothing.
    decode_prompts = metric(decode, "deepinfer:prompt_tokens_total")
    prefill.proc.send_signal(signal.SIGSTOP)
    conn = http.client.HTTPConnection("127.0.0.1", router.port, timeout=60)
    conn.request("POST", "/v1/completions", json.dumps({**body, "prompt": PROMPT + " Gone."}),
                 {"Content-Type": "application/json"})
    wait_for(lambda: router.metrics()["deepinfer_router:requests_in_flight"] == 1, timeout=5)
    time.sleep(0.3)
    conn.close()
    wait_for(lambda: router.metrics()["deepinfer_router:requests_in_flight"] == 0, timeout=5)
    prefill.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: held(prefill) == 0, timeout=10)
    assert metric(decode, "deepinfer:prompt_tokens_total") == decode_prompts

    # Cancelled at the router by its x-request-id: the stream ends with an error event, the unit aborts.
    status, _, _ = router.request("POST", "/router/cancel", {"request_id": "nobody"})
    assert status == 404
    assert router.request("POST", "/router/cancel", {"request_id": 7})[0] == 400
    conn, resp, received = open_stream(router, body, {"x-request-id": "cancel-me"})
    assert resp.getheader("x-request-id") == "cancel-me"
    status, _, answer = router.request("POST", "/router/cancel", {"request_id": "cancel-me"})
    assert status == 200 and json.loads(answer)["cancelled"] == 1
    received += resp.read()
    conn.close()
    last = [e for e in received.decode().split("\n\n") if e][-1]
    assert "cancelled at the router" in json.loads(last[6:])["error"]["message"]
    wait_for(lambda: finished(decode, "abort") == 2 and held(decode) == 0, timeout=10)
    m = router.metrics()
    assert m["deepinfer_router:cancelled_total"] == 1 and m["deepinfer_router:requests_in_flight"] == 0
    # (On the same units, to spare CI a second set.)
    check_drain_and_role_switch(router, decode, tmp_path / "units")


def check_drain_and_role_switch(router, decode, unit_dir):
    """A role request (what `router --apply-plan` writes): the decode unit drains (its lease says so, the router
    sends it nothing new, its running stream finishes in full), then switches to prefill. Two prefill units and no
    decode unit are not the planner's 1:1 split (on /metrics, for the requests the router served): the router
    (--apply-plan) asks one of them to switch back, and requests are served again."""
    planned = router.metrics()["deepinfer_router:planner_requests"]
    decode_id = f"unit-{decode.proc.pid}-{decode.port}"
    lease = lambda: json.loads((unit_dir / f"{decode_id}.lease").read_text())  # noqa: E731
    body = {"model": MODEL, "prompt": PROMPT + " Drain.", "max_tokens": 400, "temperature": 0, "ignore_eos": True,
            "stream": True}
    conn, resp, received = open_stream(router, body)
    (unit_dir / f"{decode_id}.role").write_text(json.dumps({"role": "prefill"}))
    wait_for(lambda: lease()["draining"], timeout=5)
    wait_for(lambda: router.metrics()["deepinfer_router:units_healthy"] == 1, timeout=5)  # it read the lease
    status, _, _ = router.request("POST", "/v1/completions", {**body, "stream": False, "max_tokens": 2})
    assert status == 503  # the only decode unit drains: nothing new goes there
    received += resp.read()
    conn.close()
    chunks = [json.loads(e[6:]) for e in received.decode().split("\n\n") if e.startswith("data: {")]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"  # the running stream finished in full
    wait_for(lambda: lease()["role"] == "prefill" and not lease()["draining"], timeout=10)
    m = router.metrics()
    assert m["deepinfer_router:planner_requests"] == planned + 1  # the drained stream
    assert m["deepinfer_router:planner_prefill_units"] == 1 and m["deepinfer_router:planner_decode_units"] == 1

    def roles():
        leases = [json.loads(p.read_text()) for p in unit_dir.glob("*.lease")]
        return sorted(lease["role"] + ("+draining" if lease["draining"] else "") for lease in leases)

    wait_for(lambda: roles() == ["decode", "prefill"] and router.metrics()["deepinfer_router:units_healthy"] == 2,
             timeout=15)
    assert router.metrics()["deepinfer_router:role_switches_total"] == 1
    assert not list(unit_dir.glob("*.role"))
    status, _, _ = router.request("POST", "/v1/completions", {**body, "stream": False, "max_tokens": 2})
    assert status == 200
