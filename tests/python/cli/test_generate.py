"""`deepinfer generate`: a request through request parsing, prompt rendering, tokenization, the model
(prefill + greedy decode), the streaming detokenizer and the output parser, on a generated tiny V4
checkpoint. Checked with the official openai SDK's stream accumulator and against `deepinfer render`."""
import json
import subprocess

import pytest
from conftest import make_tiny_model
from openai._streaming import SSEDecoder
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

MAX_TOKENS = 24


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=3)


def generate(binary, model, *args, stdin=None):
    proc = subprocess.run([binary, "generate", "--model", model, "--max-tokens", str(MAX_TOKENS), *args],
                          input=stdin, capture_output=True, text=True, timeout=300)
    return proc


def body_of(binary, model, *args, stdin=None):
    proc = generate(binary, model, *args, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_stream_accumulates_into_the_body(deepinfer_bin, tiny_model):
    body = body_of(deepinfer_bin, tiny_model, "--prompt", "Write a haiku about caches.")
    proc = generate(deepinfer_bin, tiny_model, "--prompt", "Write a haiku about caches.", "--stream")
    assert proc.returncode == 0, proc.stderr
    events = list(SSEDecoder().iter_bytes(iter([proc.stdout.encode()])))
    assert events[-1].data == "[DONE]"
    state = ChatCompletionStreamState()
    reasoning = ""
    for event in events[:-1]:
        chunk = ChatCompletionChunk.model_validate(json.loads(event.data))
        state.handle_chunk(chunk)
        for choice in chunk.choices:
            reasoning += getattr(choice.delta, "reasoning_content", None) or ""
    # get_final_completion() refuses length-limited completions; the snapshot is the same accumulation.
    final = state.current_completion_snapshot
    message = body["choices"][0]["message"]
    assert (final.choices[0].message.content or "") == message["content"]
    assert reasoning == message.get("reasoning_content", "")
    assert final.choices[0].finish_reason == body["choices"][0]["finish_reason"]
    assert final.usage.completion_tokens == body["usage"]["completion_tokens"]


def test_prompt_is_what_render_gives(deepinfer_bin, tiny_model):
    request = {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": "Count: 一二三 <｜Assistant｜>"}],
               "max_tokens": 5}
    rendered = subprocess.run([deepinfer_bin, "render", "--ids", "--tokenizer", tiny_model + "/tokenizer.json", "-"],
                              input=json.dumps(request), capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    body = body_of(deepinfer_bin, tiny_model, "--request", "-", stdin=json.dumps(request))
    assert body["usage"]["prompt_tokens"] == len(json.loads(rendered.stdout))
    assert body["usage"]["completion_tokens"] <= 5  # the request's max_tokens wins over --max-tokens


# Property: how the prompt is cut into prefill chunks never changes a generated token.
def test_prefill_chunking_never_changes_the_output(deepinfer_bin, tiny_model):
    bodies = [body_of(deepinfer_bin, tiny_model, "--prompt", "Explain KV caches in one line.", "--no-thinking",
                      "--prefill-chunk", str(n))["choices"] for n in (1, 7, 64, 4096)]
    assert all(b == bodies[0] for b in bodies[1:])
    again = body_of(deepinfer_bin, tiny_model, "--prompt", "Explain KV caches in one line.", "--no-thinking")
    assert again["choices"] == bodies[0]


def test_the_kv_budget_flag_is_the_servers_and_the_older_spelling_still_works(deepinfer_bin, tiny_model):
    body = body_of(deepinfer_bin, tiny_model, "--prompt", "Hi", "--kv-cache-memory-bytes", str(64 << 20))
    assert body_of(deepinfer_bin, tiny_model, "--prompt", "Hi", "--kv-cache-mib", "64")["choices"] == body["choices"]


def test_anthropic_request(deepinfer_bin, tiny_model):
    request = {"model": "claude-like", "max_tokens": 6, "messages": [{"role": "user", "content": "Hi"}]}
    body = body_of(deepinfer_bin, tiny_model, "--protocol", "anthropic", "--request", "-", stdin=json.dumps(request))
    assert body["type"] == "message" and body["role"] == "assistant"
    assert body["usage"]["output_tokens"] <= 6
    assert body["stop_reason"] in ("end_turn", "max_tokens", "stop_sequence")


def test_bad_input_is_a_clear_error(deepinfer_bin, tiny_model, tmp_path):
    bad = generate(deepinfer_bin, tiny_model, "--request", "-", stdin='{"model": "m", "messages": []}')
    assert bad.returncode == 1
    prefix = "deepinfer generate: HTTP 400 "
    assert bad.stderr.startswith(prefix) and len(bad.stderr.strip().splitlines()) == 1
    assert "error" in json.loads(bad.stderr[len(prefix):])
    missing = generate(deepinfer_bin, str(tmp_path / "none"), "--prompt", "x")
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1
    usage = generate(deepinfer_bin, tiny_model)
    assert usage.returncode == 2


# --prompt builds the request itself, so a given --temperature must reach it: the protocol would otherwise fill
# temperature 1. Greedy output depends on no seed, and equals the same request sent as a body.
def test_prompt_with_temperature_zero_is_greedy_and_equals_the_request_body(deepinfer_bin, tiny_model):
    flags = ("--prompt", "Explain KV caches in one line.", "--no-thinking", "--temperature", "0", "--max-tokens", "8")
    first = body_of(deepinfer_bin, tiny_model, *flags, "--seed", "1")["choices"]
    assert body_of(deepinfer_bin, tiny_model, *flags, "--seed", "2")["choices"] == first
    request = {"model": "m", "messages": [{"role": "user", "content": "Explain KV caches in one line."}],
               "thinking": {"type": "disabled"}, "temperature": 0, "max_tokens": 8}
    assert body_of(deepinfer_bin, tiny_model, "--request", "-", stdin=json.dumps(request))["choices"] == first
