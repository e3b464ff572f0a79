"""`deepinfer parse --protocol messages --stream`: the SSE stream read back through the anthropic SDK's SSE
decoder, event models and its own stream accumulator must rebuild exactly the non-streaming message
(thinking with signature, text, tool_use input parsed from the streamed partial JSON), for every chunk size.
"""
import json
import subprocess

import pytest
from anthropic._streaming import SSEDecoder
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent
from pydantic import TypeAdapter

COMPLETIONS = [
    ("thinking", [], "\n\nLet me think about 日本.\n\n</think>\n\nThe answer is \"42\" 😀.\n"),
    ("tools", [], 'hmm</think>Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
                  '<｜DSML｜parameter name="city" string="true">Paris "FR"\\n</｜DSML｜parameter>\n'
                  '<｜DSML｜parameter name="days" string="false">[1, 2.5, 1e-7, {"k": null}]</｜DSML｜parameter>\n'
                  '</｜DSML｜invoke>\n<｜DSML｜invoke name="noop">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'),
    ("chat-stop", ["--no-thinking", "--stop", "END"], "keep this END drop this"),
]
EVENT = TypeAdapter(RawMessageStreamEvent)


def run(binary, text, *args):
    proc = subprocess.run([binary, "parse", "--protocol", "messages", "--prompt-tokens", "9",
                           "--cache-hit-tokens", "2", *args], input=text.encode(), capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


@pytest.mark.parametrize("name,extra,text", COMPLETIONS, ids=[c[0] for c in COMPLETIONS])
@pytest.mark.parametrize("chunk_size", [1, 5, 1000000])
def test_sdk_accumulates_stream_into_the_message(deepinfer_bin, name, extra, text, chunk_size):
    body = json.loads(run(deepinfer_bin, text, *extra))
    sse = run(deepinfer_bin, text, *extra, "--stream", "--chunk-size", str(chunk_size))
    snapshot, json_bufs, names = None, {}, []
    for sse_event in SSEDecoder().iter_bytes(iter([sse])):
        payload = json.loads(sse_event.data)
        assert sse_event.event == payload["type"]
        names.append(sse_event.event)
        if sse_event.event == "ping":
            continue
        snapshot = accumulate_event(event=EVENT.validate_python(payload), current_snapshot=snapshot,
                                    json_bufs=json_bufs)
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("ping") == 1
    def blocks(content):  # tool-call ids are random per run
        return [{k: v for k, v in block.items() if k != "id" and v is not None} for block in content]
    assert blocks(snapshot.model_dump(mode="json")["content"]) == blocks(body["content"])
    assert all(block.id.startswith("call_") for block in snapshot.content if block.type == "tool_use")
    assert snapshot.stop_reason == body["stop_reason"] and snapshot.stop_sequence == body["stop_sequence"]
    # Each fed chunk counts as one token; a stop sequence ends the feed early.
    fed = -(-len(text.encode()) // chunk_size)
    assert snapshot.usage.output_tokens == fed or ("--stop" in extra and 1 <= snapshot.usage.output_tokens < fed)
    assert snapshot.usage.cache_read_input_tokens == 2 and snapshot.usage.input_tokens == 7
