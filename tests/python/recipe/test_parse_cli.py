"""`deepinfer parse`: the SSE stream read back through the openai SDK's own SSE decoder and stream
accumulator must rebuild exactly the message of the non-streaming body, for every chunk size; and the
live deepseek-recipe oracle must produce the same body for the same completion (when it is installed).
"""
import json
import subprocess

import pytest
from openai._streaming import SSEDecoder
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

COMPLETIONS = [
    ("thinking", [], "\n\nLet me think about 日本.\n\n</think>\n\nThe answer is \"42\" 😀.\n"),
    ("tools", [], 'Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
                  '<｜DSML｜parameter name="city" string="true">Paris "FR"\\n</｜DSML｜parameter>\n'
                  '<｜DSML｜parameter name="days" string="false">[1, 2.5, {"k": null}]</｜DSML｜parameter>\n'
                  '</｜DSML｜invoke>\n<｜DSML｜invoke name="noop">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'),
    ("v41-tools", [], 'x</think>\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name="f">\n'
                      '<｜DSML｜ parameter name="a" string="true">b</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>'),
    ("stop", ["--stop", "END"], "r</think>keep this END drop this"),
]


def run(binary, text, *args):
    proc = subprocess.run([binary, "parse", "--prompt-tokens", "9", "--cache-hit-tokens", "2", *args],
                          input=text.encode(), capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


@pytest.mark.parametrize("name,extra,text", COMPLETIONS, ids=[c[0] for c in COMPLETIONS])
@pytest.mark.parametrize("chunk_size", [1, 3, 1000000])
def test_sdk_accumulates_stream_into_the_body(deepinfer_bin, name, extra, text, chunk_size):
    body = json.loads(run(deepinfer_bin, text, *extra))
    sse = run(deepinfer_bin, text, *extra, "--stream", "--chunk-size", str(chunk_size), "--include-usage", "true")
    events = list(SSEDecoder().iter_bytes(iter([sse])))
    assert events[-1].data == "[DONE]"
    state = ChatCompletionStreamState()
    reasoning = ""
    for event in events[:-1]:
        chunk = ChatCompletionChunk.model_validate(json.loads(event.data))
        state.handle_chunk(chunk)
        for choice in chunk.choices:
            reasoning += getattr(choice.delta, "reasoning_content", None) or ""
    final = state.get_final_completion()
    message = body["choices"][0]["message"]
    assert (final.choices[0].message.content or "") == message["content"]
    assert final.choices[0].finish_reason == body["choices"][0]["finish_reason"]
    assert reasoning == message.get("reasoning_content", "")
    got_calls = [(c.id, c.function.name, c.function.arguments) for c in final.choices[0].message.tool_calls or []]
    want_calls = [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls", [])]
    assert [c[1:] for c in got_calls] == [c[1:] for c in want_calls]
    for _, _, arguments in got_calls:
        json.loads(arguments)  # every call in this corpus is well-formed JSON
    assert final.usage.prompt_tokens == 9 and final.usage.prompt_tokens_details.cached_tokens == 2


@pytest.mark.parametrize("name,extra,text", COMPLETIONS, ids=[c[0] for c in COMPLETIONS])
def test_body_matches_live_oracle(deepinfer_bin, name, extra, text):
    dr = pytest.importorskip("deepseek_recipe")
    stops = extra[1::2]
    request = dr.ChatCompletionRequest({"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "q"}]})
    converted = request.convert(dr.ConversionOptions())
    options = dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart, stop_sequences=stops)
    proc = dr.StreamProcessor(dr.ChatCompletionRequest.chunk_generator(converted, "id-1", "m"), options)
    response = dr.ChatCompletionResponse("id-1", "m", 0, 9, 2)
    out = proc.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=9, prompt_cache_hit_tokens=2)))
    out += proc.push(dr.InferenceChunk.text(text, 1))
    if not proc.finished:
        out += proc.push(dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop))
    for chunk in out:
        response.accumulate(chunk)
    want = json.loads(response.to_json())
    got = json.loads(run(deepinfer_bin, text, *extra, "--id", "id-1", "--model", "m"))
    for call in want["choices"][0]["message"].get("tool_calls", []) + got["choices"][0]["message"].get("tool_calls", []):
        call["id"] = "normalised"
    assert got == want


def test_bad_input_is_a_clear_error(deepinfer_bin):
    proc = subprocess.run([deepinfer_bin, "parse", "/nonexistent/completion.txt"], capture_output=True, timeout=60)
    assert proc.returncode == 1 and b"deepinfer parse:" in proc.stderr
    proc = subprocess.run([deepinfer_bin, "parse", "--chunk-size", "0"], capture_output=True, timeout=60)
    assert proc.returncode == 2 and b"--chunk-size" in proc.stderr
