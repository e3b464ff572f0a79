"""`deepinfer parse --protocol responses --stream`: every SSE event is turned into the openai SDK's
ResponseStreamEvent the way the SDK's own stream does (construct_type, which tolerates the
`input_tokens_details.cache_write_tokens` field that deepseek-recipe 0.2 omits and newer SDK models
require), and the SDK's ResponseStreamState, fed the events, must rebuild the same output items (reasoning
text, message text, function calls) as the non-streaming response object.
"""
import json
import subprocess

import pytest
from openai import omit
from openai._models import construct_type
from openai._streaming import SSEDecoder
from openai.lib.streaming.responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent

COMPLETIONS = [
    ("thinking", [], "\n\nLet me think about 日本.\n\n</think>\n\nThe answer is \"42\" 😀.\n"),
    ("tools", [], 'hmm</think>Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
                  '<｜DSML｜parameter name="city" string="true">Paris "FR"\\n</｜DSML｜parameter>\n'
                  '<｜DSML｜parameter name="days" string="false">[1, 2.5, {"k": null}]</｜DSML｜parameter>\n'
                  '</｜DSML｜invoke>\n<｜DSML｜invoke name="noop">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'),
    ("length", ["--no-thinking", "--finish", "length"], "cut off in the mid"),
]


def run(binary, text, *args):
    proc = subprocess.run([binary, "parse", "--protocol", "responses", "--prompt-tokens", "9",
                           "--cache-hit-tokens", "2", *args], input=text.encode(), capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


def items(output):
    """Output items without their random call ids, as plain data."""
    out = []
    for item in output:
        item = {k: v for k, v in item.items() if k != "call_id" and v is not None}
        out.append(item)
    return out


@pytest.mark.parametrize("name,extra,text", COMPLETIONS, ids=[c[0] for c in COMPLETIONS])
@pytest.mark.parametrize("chunk_size", [1, 5, 1000000])
def test_sdk_accumulates_stream_into_the_response(deepinfer_bin, name, extra, text, chunk_size):
    body = json.loads(run(deepinfer_bin, text, *extra))
    response = construct_type(type_=Response, value=body)
    assert response.status == body["status"] and response.usage.input_tokens == 9
    sse = run(deepinfer_bin, text, *extra, "--stream", "--chunk-size", str(chunk_size))
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    sequence, final, reasoning = 0, None, {}
    for sse_event in SSEDecoder().iter_bytes(iter([sse])):
        payload = json.loads(sse_event.data)
        assert sse_event.event == payload["type"] and payload["sequence_number"] == sequence
        sequence += 1
        event = construct_type(type_=ResponseStreamEvent, value=payload)
        assert type(event).__name__.endswith("Event"), payload["type"]  # a known event type
        state.handle_event(event)
        if payload["type"] == "response.reasoning_text.delta":  # the SDK state does not keep reasoning text
            reasoning[payload["item_id"]] = reasoning.get(payload["item_id"], "") + event.delta
        if payload["type"] in ("response.completed", "response.incomplete"):
            final = payload["response"]
    assert final is not None and final["status"] == body["status"]
    snapshot = state._ResponseStreamState__current_snapshot.model_dump(mode="json", warnings=False)
    got = items(snapshot["output"])
    want = items(body["output"])
    # The SDK keeps the in-progress status of items it saw added; compare the content that streamed.
    for g, w in zip(got, want, strict=True):
        assert g["type"] == w["type"] and g["id"] == w["id"]
        if w["type"] == "function_call":
            assert (g["name"], g["arguments"]) == (w["name"], w["arguments"])
            json.loads(g["arguments"])
        elif w["type"] == "reasoning":
            assert [reasoning[g["id"]]] == [p["text"] for p in w["content"]]
        else:
            assert [p["text"] for p in g["content"]] == [p["text"] for p in w["content"]]
    assert items(final["output"]) == want
