"""The official `openai` and `anthropic` SDKs against the real `deepinfer serve` on a tiny random model: chat,
Responses and Messages, streaming and not. The model's output is scripted through --enable-test-hooks (the
request's `deepinfer_test_output` text becomes the only tokens the engine's logits mask allows, one after
another), so real reasoning, content and tool calls come back through the whole serving path: engine,
detokenizer, the codec's parser and event generators, SSE, the SDK's own parsing.

A server without a generation engine answers 503; these tests then skip, saying so."""
import concurrent.futures
import json
import socket
import time

import anthropic
import openai
import pytest
from conftest import make_tiny_model
from server_process import Server, wait_for

MODEL = "tiny-sdk"
REASONING = "Let me think about the weather."
ANSWER = "It is sunny in Paris."
TOOL_OUTPUT = ("I should call the tool.</think>Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
               "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
               "</｜DSML｜tool_calls>")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}]


@pytest.fixture(scope="module")
def server(deepinfer_bin, tmp_path_factory):
    model = make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=7)
    s = Server(deepinfer_bin, model, "--served-model-name", MODEL, "--enable-test-hooks", "--max-model-len", "4096",
               "--kv-cache-memory-bytes", str(256 << 20))
    status, _, body = s.request("POST", "/v1/chat/completions",
                                {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
    if status == 503 and b"no generation engine" in body:
        s.stop()
        pytest.skip("the server has no generation engine")
    yield s
    assert s.stop() == 0, "\n".join(s.log[-50:])


@pytest.fixture
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


@pytest.fixture
def claude(server):
    return anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0)


def scripted(text):
    return {"deepinfer_test_output": text}


def test_chat_reasoning_and_content(oai):
    r = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather?"}],
                                    extra_body=scripted(REASONING + "</think>" + ANSWER))
    choice = r.choices[0]
    assert choice.message.content == ANSWER
    assert choice.message.model_extra["reasoning_content"] == REASONING
    assert choice.finish_reason == "stop"
    assert r.model == MODEL
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_stream_accumulates_to_the_same_message(oai):
    stream = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather?"}], stream=True,
                                         stream_options={"include_usage": True},
                                         extra_body=scripted(REASONING + "</think>" + ANSWER))
    content, reasoning, finish, usage = "", "", None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            content += c.delta.content or ""
            reasoning += (c.delta.model_extra or {}).get("reasoning_content") or ""
            finish = c.finish_reason or finish
    assert (reasoning, content, finish) == (REASONING, ANSWER, "stop")
    assert usage is not None and usage.completion_tokens > 0


def test_chat_tool_call_round_trip(oai):
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    r = oai.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, extra_body=scripted(TOOL_OUTPUT))
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking."
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    # The same call, streamed: the SDK's accumulator gets the same function call.
    with oai.chat.completions.stream(model=MODEL, messages=messages, tools=TOOLS, extra_body=scripted(TOOL_OUTPUT)) as s:
        final = s.get_final_completion()
    streamed = final.choices[0].message.tool_calls[0]
    assert streamed.function.name == "get_weather" and json.loads(streamed.function.arguments) == {"city": "Paris"}
    # The result goes back in the next turn and renders (the request is accepted and answered).
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    r2 = oai.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS,
                                     extra_body=scripted("ok</think>" + ANSWER))
    assert r2.choices[0].message.content == ANSWER


def test_chat_stop_sequence_cuts_the_content(oai):
    r = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], stop=["STOP"],
                                    extra_body={**scripted("r</think>Hello STOP world"), "thinking": {"type": "enabled"}})
    assert r.choices[0].message.content == "Hello "
    assert r.choices[0].finish_reason == "stop"


def test_chat_logprobs(oai):
    r = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], logprobs=True,
                                    top_logprobs=2, extra_body=scripted("r</think>" + ANSWER))
    entries = r.choices[0].logprobs.content
    assert "".join(e.token for e in entries) == ANSWER
    for e in entries:
        assert e.logprob <= 0 and len(e.top_logprobs) == 2


def test_chat_n_choices(oai):
    def once():
        return oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], n=3, max_tokens=6,
                                           temperature=1.0, seed=3,
                                           extra_body={"thinking": {"type": "disabled"}, "ignore_eos": True})
    r = once()
    assert [c.index for c in r.choices] == [0, 1, 2]
    texts = [c.message.content for c in r.choices]
    # Three samples of six random-model tokens each: the outputs draw different tokens (a repeat of all six
    # is a ~vocab^-6 event), and the request's seed fixes all three.
    assert len(set(texts)) == 3, texts
    assert [c.message.content for c in once().choices] == texts
    assert all(c.finish_reason == "length" for c in r.choices)
    assert r.usage.completion_tokens == 3 * 6


def test_chat_n_choices_stream_and_scripted(oai):
    # Each output gets its own logits mask: every choice is the scripted message.
    stream = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather?"}], n=2,
                                         stream=True, stream_options={"include_usage": True},
                                         extra_body=scripted(REASONING + "</think>" + ANSWER))
    content, reasoning, finish, usage = {}, {}, {}, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            content[c.index] = content.get(c.index, "") + (c.delta.content or "")
            reasoning[c.index] = reasoning.get(c.index, "") + ((c.delta.model_extra or {}).get("reasoning_content") or "")
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    assert content == {0: ANSWER, 1: ANSWER}
    assert reasoning == {0: REASONING, 1: REASONING}
    assert finish == {0: "stop", 1: "stop"}
    assert usage is not None and usage.completion_tokens > 0


def test_chat_n_out_of_range_is_400(server):
    for n in (0, 129):
        status, _, body = server.json("POST", "/v1/chat/completions",
                                      {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "n": n})
        assert status == 400, body
        assert body["error"]["param"] == "n"


def test_reasoning_tokens_in_usage_without_logprobs(server, oai):
    # The reasoning's tokens, re-encoded as deepseek-recipe counts them, whether or not logprobs were asked.
    _, _, counted = server.json("POST", "/tokenize", {"prompt": REASONING})
    for logprobs in (False, True):
        r = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather?"}],
                                        logprobs=logprobs, extra_body=scripted(REASONING + "</think>" + ANSWER))
        assert r.usage.completion_tokens_details.reasoning_tokens == counted["count"], logprobs
        assert (r.choices[0].logprobs is not None) == logprobs
    resp = oai.responses.create(model=MODEL, input="Weather?", extra_body=scripted(REASONING + "</think>" + ANSWER))
    assert resp.usage.output_tokens_details.reasoning_tokens == counted["count"]


def test_seeded_requests_repeat_alone_and_under_load(oai):
    def once():
        r = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Tell me a story"}],
                                        max_tokens=12, temperature=1.0, seed=1234,
                                        extra_body={"thinking": {"type": "disabled"}})
        return r.choices[0].message.content, r.usage.completion_tokens
    first = once()
    assert once() == first
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: once(), range(8)))
    assert results == [first] * 8


def test_usage_counts_cached_prompt_tokens(server, oai):
    long_prompt = "Explain the history of caching in computer systems. " * 40  # several 128-token blocks
    messages = [{"role": "user", "content": long_prompt}]
    status, _, counted = server.json("POST", "/tokenize", {"messages": messages})
    first = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=2)
    second = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=2)
    assert first.usage.prompt_tokens == counted["count"] == second.usage.prompt_tokens
    hit = second.model_extra["usage"]["prompt_cache_hit_tokens"] if "usage" in second.model_extra else \
        second.usage.model_extra["prompt_cache_hit_tokens"]
    assert hit == counted["count"] - 1  # every position but the last, whose logits are sampled
    assert second.usage.model_extra["prompt_cache_miss_tokens"] == counted["count"] - hit
    assert second.usage.prompt_tokens_details.cached_tokens == hit


def test_responses_stream_and_not(oai):
    r = oai.responses.create(model=MODEL, input="Weather?", extra_body=scripted(REASONING + "</think>" + ANSWER))
    assert r.output_text == ANSWER
    assert r.status == "completed"
    events = list(oai.responses.create(model=MODEL, input="Weather?", stream=True,
                                       extra_body=scripted(REASONING + "</think>" + ANSWER)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == ANSWER
    assert events[-1].response.output_text == ANSWER


def test_messages_stream_and_not(claude):
    m = claude.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Weather?"}],
                               thinking={"type": "enabled", "budget_tokens": 1024},
                               extra_body=scripted(REASONING + "</think>" + ANSWER))
    kinds = [b.type for b in m.content]
    assert kinds == ["thinking", "text"]
    assert m.content[0].thinking == REASONING and m.content[1].text == ANSWER
    assert m.stop_reason == "end_turn"
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0
    with claude.messages.stream(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Weather?"}],
                                thinking={"type": "enabled", "budget_tokens": 1024},
                                extra_body=scripted(REASONING + "</think>" + ANSWER)) as s:
        final = s.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"] and final.content[1].text == ANSWER


def test_messages_tool_use(claude):
    tools = [{"name": "get_weather", "description": "Weather of a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    m = claude.messages.create(model=MODEL, max_tokens=128, tools=tools,
                               messages=[{"role": "user", "content": "Weather in Paris?"}],
                               thinking={"type": "enabled", "budget_tokens": 1024}, extra_body=scripted(TOOL_OUTPUT))
    tool = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use" and tool[0].name == "get_weather" and tool[0].input == {"city": "Paris"}


def test_legacy_completions(oai):
    r = oai.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=5, temperature=0, logprobs=1)
    assert r.choices[0].finish_reason in ("length", "stop")
    assert r.usage.completion_tokens == len(r.choices[0].logprobs.tokens)
    streamed = "".join(c.choices[0].text for c in oai.completions.create(
        model=MODEL, prompt="Once upon a time", max_tokens=5, temperature=0, stream=True) if c.choices)
    assert streamed == r.choices[0].text


def test_disconnect_mid_stream_frees_blocks(server):
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "go"}], "stream": True,
                       "max_tokens": 2000, "ignore_eos": True}).encode()
    before = server.metrics()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    received = b""
    while b"data:" not in received:  # the stream is running: at least one event arrived
        chunk = sock.recv(65536)
        assert chunk, received
        received += chunk
    sock.close()
    assert wait_for(lambda: server.metrics().get('deepinfer:num_requests_running{model_name="%s"}' % MODEL, 1) == 0)
    after = server.metrics()
    assert after['deepinfer:kv_blocks_used{model_name="%s"}' % MODEL] == 0
    assert after["deepinfer:http_disconnects_total"] == before["deepinfer:http_disconnects_total"] + 1
    aborted = 'deepinfer:request_success_total{model_name="%s",finished_reason="abort"}' % MODEL
    assert after[aborted] == before.get(aborted, 0) + 1


def test_stream_overhead_metrics_count_each_update_written_once(server, oai):
    # Every streamed update that writes bytes records its hand-off (step thread -> output thread) and its
    # delivery (events made and sent) exactly once; an update whose bytes are still held back (a partial
    # UTF-8 character or tag) records neither. So over one stream of 6 tokens (6 updates) both counts grow by
    # the same number, between 1 and 6.
    names = ["deepinfer:http_stream_handoff_seconds", "deepinfer:http_stream_delivery_seconds",
             "deepinfer:http_stream_overhead_seconds"]
    before = server.metrics()
    stream = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "go"}], max_tokens=6,
                                         stream=True, extra_body={"ignore_eos": True})
    assert sum(1 for _ in stream) > 0

    def grown():
        after = server.metrics()
        return after, [after[n + "_count"] - before.get(n + "_count", 0) for n in names]

    # The delivery is recorded just after the last bytes went out, so the client may read /metrics first.
    assert wait_for(lambda: len(set(grown()[1][:2])) == 1)
    after, counts = grown()
    assert counts[0] == counts[1] and 1 <= counts[0] <= 6, counts
    assert counts[2] >= 1
    for n in names:
        assert 0 < after[n + '{quantile="0.5"}'] <= after[n + '{quantile="0.99"}'] < 10, n
