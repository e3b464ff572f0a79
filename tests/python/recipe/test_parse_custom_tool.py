"""`deepinfer parse --protocol responses --custom-tool apply_patch` against the live deepseek-recipe: a
completion that calls the apply_patch custom tool (and a function) becomes the same Responses events and
response object (custom_tool_call items whose input is the raw patch text), up to the random call ids,
the clock and the echoed request settings (the CLI has no request to echo).
"""
import json
import re
import subprocess

import pytest

dr = pytest.importorskip("deepseek_recipe")

PATCH = '*** Begin Patch\n*** Update File: a.py\n@@ def f():\n-x = 1\n+x = "é" \\\\ 😀\n*** End Patch\n'
COMPLETIONS = {
    "patch": "Let me fix it.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"apply_patch\">\n"
             f"<｜DSML｜parameter name=\"input\" string=\"true\">{PATCH}</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
             "<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"false\">[1, 2]</｜DSML｜parameter>\n"
             "</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
    "odd_parameter": "ok</think><｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"apply_patch\">\n"
                     "<｜DSML｜parameter name=\"patch\" string=\"true\">x\"y</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
                     "</｜DSML｜tool_calls>",
}
NORMALISE = [(re.compile(r'"call_\d\d_[A-Za-z0-9_-]+"'), '"call_ID"'),
             (re.compile(r'"(created_at|completed_at)":\d+'), r'"\1":0'),
             (re.compile(r'"parallel_tool_calls":.*?"truncation":"disabled",'), '@ECHO@')]


def normalise(text):
    for pattern, replacement in NORMALISE:
        text = pattern.sub(replacement, text)
    return text


def oracle(text):
    body = {"model": "DeepSeek-V4-Pro", "input": "fix", "stream": True,
            "tools": [{"type": "custom", "name": "apply_patch"}, {"type": "function", "name": "f"}]}
    request = dr.ResponsesRequest(body).convert(dr.ConversionOptions())
    proc = dr.StreamProcessor(dr.ResponsesRequest.chunk_generator(request, "resp-1", "deepseek-test"),
                              request.parsing_options)
    response = dr.ResponsesResponse("resp-1", "deepseek-test", 0, 9, 2)
    events = []
    for out in (proc.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=9, prompt_cache_hit_tokens=2))),
                proc.push(dr.InferenceChunk.text(text, 1)), proc.push(dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop))):
        for event in out:
            events.append(normalise(event.to_json()))
            response.accumulate(event)
    return events, normalise(response.to_json())


@pytest.mark.parametrize("name", sorted(COMPLETIONS))
def test_custom_tool_call_events_match_oracle(deepinfer_bin, name):
    text = COMPLETIONS[name]
    args = [deepinfer_bin, "parse", "--protocol", "responses", "--custom-tool", "apply_patch", "--id", "resp-1",
            "--model", "deepseek-test", "--created", "0", "--prompt-tokens", "9", "--cache-hit-tokens", "2"]
    body = subprocess.run(args, input=text.encode(), capture_output=True, check=True, timeout=60).stdout.decode()
    sse = subprocess.run(args + ["--stream"], input=text.encode(), capture_output=True, check=True, timeout=60).stdout.decode()
    events = [normalise(line[len("data: "):]) for line in sse.split("\n") if line.startswith("data: ")]
    want_events, want_body = oracle(text)
    assert events == want_events
    assert normalise(body.strip()) == want_body
    assert any('"type":"custom_tool_call"' in e for e in events)
