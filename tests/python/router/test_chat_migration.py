"""Chat Completions, Responses and Messages streams through `deepinfer router`, continued on another unit when
their unit is killed (SIGKILL) or hangs (SIGSTOP past the stall deadline) mid-stream, and ended with the
protocol's error event when no unit is left. The clients are the real
`openai` and `anthropic` SDKs: they must see one unbroken stream, without an error event and without the
router's resume comments, whose text (reasoning, content, tool-call arguments) equals an uninterrupted run's."""
import json
import signal
import sys
from pathlib import Path

import anthropic
import openai
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from server_process import Server  # noqa: E402
from conftest import make_tiny_model  # noqa: E402
from router_process import Router  # noqa: E402

MODEL = "tiny"
UNIT_ARGS = ["--served-model-name", MODEL, "--enable-test-hooks", "--kv-cache-memory-bytes", str(64 << 20)]
# A scripted output (the engine allows exactly these tokens): reasoning, content, then a tool call, long
# enough that the kill lands inside it.
SCRIPT = ("Let me think this through step by step. " * 6 + "</think>" + "The answer comes after a call. " * 6 +
          "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
          "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
          "</｜DSML｜tool_calls>")
TOOL = {"name": "get_weather", "description": "Weather of a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=5)


@pytest.fixture
def cluster(deepinfer_bin, tiny_model):
    """Three units behind a router that learns of a dead unit only from the request that fails on it."""
    units = [Server(deepinfer_bin, tiny_model, *UNIT_ARGS) for _ in range(3)]
    router = Router(deepinfer_bin, *[a for u in units for a in ("--unit", u.url)], "--refresh-s", "60",
                    "--stall-timeout-s", "1.5")
    yield router, units
    assert router.stop() == 0
    for u in units:
        if u.proc.poll() is None:
            u.proc.send_signal(signal.SIGCONT)
        u.stop(signal.SIGKILL)


def check_every_cut_point(unit):
    """The unit's side alone, at every group boundary of one stream: the text sent before the cut plus the
    continuation's is the whole text. This seed's output holds back an incomplete character at some boundaries
    (a group without text), where the codec's state depends on how its updates were cut."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Write a poem about the sea #46"}],
            "max_tokens": 16, "ignore_eos": True, "stream": True, "temperature": 1.0, "seed": 1046}

    def run(extra=None):
        status, _, payload = unit.request("POST", "/v1/messages", {**body, **(extra or {})},
                                          headers={"x-deepinfer-stream-resume": "1"})
        assert status == 200
        head, groups, text = None, [], ""
        for event in payload.decode().split("\n\n"):
            if event.startswith(": deepinfer-resume "):
                head = json.loads(event[len(": deepinfer-resume "):])
            elif event.startswith(": deepinfer-token-ids "):
                groups.append((json.loads(event[len(": deepinfer-token-ids "):])["ids"], text))
                text = ""
            elif "content_block_delta" in event:
                delta = json.loads(event.split("data: ", 1)[1])["delta"]
                text += delta.get("thinking") or delta.get("text") or ""
        return head, groups

    head, groups = run()
    whole = "".join(text for _, text in groups)
    assert any(ids and not text for ids, text in groups[:-1])  # a boundary inside a character
    for cut in range(1, len(groups)):
        resume = {"token_ids": [i for ids, _ in groups[:cut] for i in ids],
                  "update_sizes": [len(ids) for ids, _ in groups[:cut]],
                  "seed": head["seed"], "id": head["id"], "created": head["created"]}
        _, rest = run({"deepinfer_resume": resume})
        assert "".join(text for _, text in groups[:cut]) + "".join(text for _, text in rest) == whole, cut


def interrupt(units, served_by, sig):
    victim = next(u for u in units if u.url == served_by)
    victim.proc.send_signal(sig)
    return victim


def chat_run(router, units, body, kill_after=None, sig=signal.SIGKILL):
    """Streams a chat completion; after `kill_after` chunks the unit serving it gets `sig`."""
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{router.port}/v1", api_key="none", max_retries=0)
    reasoning, content, finish, ids = "", "", None, set()
    with client.chat.completions.with_streaming_response.create(**body, stream=True) as response:
        served_by = response.headers["x-deepinfer-unit"]
        for n, chunk in enumerate(response.parse()):
            if n == kill_after:
                interrupt(units, served_by, sig)
            ids.add(chunk.id)
            for c in chunk.choices:
                content += c.delta.content or ""
                reasoning += (c.delta.model_extra or {}).get("reasoning_content") or ""
                assert "token_ids" not in (c.model_extra or {})
                finish = c.finish_reason or finish
    assert len(ids) == 1  # one response id throughout
    return reasoning, content, finish


def test_chat_stream_greedy_and_seeded_continue_after_kill_and_hang(cluster):
    router, units = cluster
    check_every_cut_point(units[0])
    # Greedy: sampling parameters count outside thinking mode only (thinking mode samples with its own).
    greedy = {"model": MODEL, "messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 100,
              "temperature": 0, "extra_body": {"ignore_eos": True, "thinking": {"type": "disabled"}}}
    reference = chat_run(router, units, greedy)
    assert reference[2] == "length" and reference[0] == "" and len(reference[1]) > 60
    assert chat_run(router, units, greedy, kill_after=25) == reference
    assert router.metrics()["deepinfer_router:migrations_total"] == 1

    # Seeded sampling continues too: the seed travels with the continuation. A hung unit: the stall deadline.
    seeded = {**greedy, "temperature": 1.0, "seed": 1234, "extra_body": {"ignore_eos": True}}
    reference = chat_run(router, units, seeded)
    assert len(reference[0]) > 60  # reasoning
    assert chat_run(router, units, seeded, kill_after=25, sig=signal.SIGSTOP) == reference
    m = router.metrics()
    assert m["deepinfer_router:migrations_total"] == 2 and m["deepinfer_router:failed_total"] == 0


def test_messages_and_responses_continue_with_reasoning_and_tool_calls(cluster):
    router, units = cluster
    claude = anthropic.Anthropic(base_url=f"http://127.0.0.1:{router.port}", api_key="none", max_retries=0)
    body = {"model": MODEL, "max_tokens": 400, "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [TOOL], "extra_body": {"deepinfer_test_output": SCRIPT}}

    killed_in = []

    def messages_run(kill_after=None):
        with claude.messages.with_streaming_response.create(**body, stream=True) as response:
            served_by = response.headers["x-deepinfer-unit"]
            blocks, stop, types = {}, None, []
            for n, event in enumerate(response.parse()):
                if n == kill_after:
                    interrupt(units, served_by, signal.SIGKILL)
                    killed_in.append(blocks[max(blocks)]["type"])
                types.append(event.type)
                if event.type == "content_block_start":
                    blocks[event.index] = {"type": event.content_block.type, "text": "",
                                           "name": getattr(event.content_block, "name", None)}
                elif event.type == "content_block_delta":
                    d = event.delta
                    blocks[event.index]["text"] += (getattr(d, "thinking", None) or getattr(d, "text", None) or
                                                    getattr(d, "partial_json", None) or "")
                elif event.type == "message_delta":
                    stop = event.delta.stop_reason
        assert types[0] == "message_start" and types.count("message_start") == 1 and types[-1] == "message_stop"
        return blocks, stop

    reference = messages_run()
    assert [b["type"] for b in reference[0].values()] == ["thinking", "text", "tool_use"]
    assert json.loads(reference[0][2]["text"]) == {"city": "Paris"} and reference[1] == "tool_use"
    # Killed inside the content: the continuation's codec starts where the first one stopped.
    assert messages_run(kill_after=70) == reference
    assert killed_in == ["text"]

    # Responses on the two units left: killed inside the reasoning this time.
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{router.port}/v1", api_key="none", max_retries=0)
    request = {"model": MODEL, "input": "Weather in Paris?", "max_output_tokens": 400,
               "tools": [{"type": "function", "name": "get_weather", "parameters": TOOL["input_schema"]}],
               "extra_body": {"deepinfer_test_output": SCRIPT}}

    def responses_run(kill_after=None):
        with client.responses.with_streaming_response.create(**request, stream=True) as response:
            served_by = response.headers["x-deepinfer-unit"]
            events = []
            for n, event in enumerate(response.parse()):
                if n == kill_after:
                    interrupt(units, served_by, signal.SIGKILL)
                events.append(event)
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert events[-1].type == "response.completed"
        final = events[-1].response
        assert all(final.id + "_" in item.id for item in final.output)  # the response's own items
        # Ids (and the reasoning's encrypted reference) name the response; the rest must be equal.
        return [{k: v for k, v in item.model_dump().items() if k not in ("id", "call_id", "encrypted_content")}
                for item in final.output]

    reference = responses_run()
    assert [item["type"] for item in reference] == ["reasoning", "message", "function_call"]
    assert responses_run(kill_after=15) == reference
    assert router.metrics()["deepinfer_router:migrations_total"] == 2

    # The last unit dies mid-stream: the continuation has nowhere to go, and the stream ends with the
    # protocol's error event (the SDK raises it), not a silent cut.
    with claude.messages.with_streaming_response.create(**body, stream=True) as response:
        with pytest.raises(anthropic.APIStatusError, match="no other could continue it"):
            for n, _ in enumerate(response.parse()):
                if n == 20:
                    interrupt(units, response.headers["x-deepinfer-unit"], signal.SIGKILL)
    m = router.metrics()
    assert m["deepinfer_router:failed_total"] == 1 and m["deepinfer_router:migrations_total"] == 2

