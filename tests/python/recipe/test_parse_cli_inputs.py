"""`deepinfer parse` input forms for scripting the codec: --jsonl (many completions in one
process), --chunks (explicit chunk boundaries), --token-ids (engine tokens through a builtin vocabulary),
--after-think, and Responses tools declared with --function / --namespace. Expected bodies come from the
live deepseek-recipe oracle fed the same chunks, or from the text path of the same command (token input
must read like the text it decodes to, apart from what only tokens carry).
"""
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "recipe"))

TOOLS_TEXT = ('Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
              '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
              '</｜DSML｜invoke>\n</｜DSML｜tool_calls>')


def parse(binary, stdin, *args):
    proc = subprocess.run([binary, "parse", *args], input=stdin.encode(), capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def without_ids(body):
    """The body without what is random (tool-call ids) or a clock (Responses times)."""
    text = json.dumps(body, sort_keys=True)
    import re
    text = re.sub(r'"call_\d\d_[A-Za-z0-9]+"', '"call_ID"', text)
    return json.loads(re.sub(r'"(created_at|completed_at)": \d+', r'"\1": 0', text))


def test_jsonl_gives_one_result_per_line_like_single_runs(deepinfer_bin):
    lines = ["r</think>hello", {"chunks": ["r</th", "ink>hel", "lo"]}, {"text": "r</think>x", "finish": "length"},
             "r</think>" + TOOLS_TEXT]
    stdin = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines) + "not json\n"
    out = [json.loads(x) for x in parse(deepinfer_bin, stdin, "--jsonl").splitlines()]
    assert len(out) == len(lines) + 1
    assert "invalid JSON" in out[-1]["error"]
    # The first two are the same completion, chunked differently: the same message (each chunk counts as a
    # token, so only the usage differs).
    assert out[0]["response"]["choices"] == out[1]["response"]["choices"]
    assert out[1]["response"]["usage"]["completion_tokens"] == 3
    assert out[0]["response"]["choices"][0]["message"]["content"] == "hello"
    assert out[2]["response"]["choices"][0]["finish_reason"] == "length"
    # Each line as its own run gives the same body.
    single = json.loads(parse(deepinfer_bin, "r</think>" + TOOLS_TEXT))
    assert without_ids(single) == without_ids(out[3]["response"])


def test_jsonl_stream_events_are_the_sse_stream(deepinfer_bin):
    out = json.loads(parse(deepinfer_bin, json.dumps("r</think>hi") + "\n", "--jsonl", "--stream", "--protocol", "messages"))
    sse = parse(deepinfer_bin, "r</think>hi", "--stream", "--protocol", "messages")
    names = [line[len("event: "):] for line in sse.splitlines() if line.startswith("event: ")]
    assert [e["event"] for e in out["events"]] == names
    datas = [json.loads(line[len("data: "):]) for line in sse.splitlines() if line.startswith("data: ")]
    assert [e["data"] for e in out["events"]] == datas


def test_explicit_chunks_match_the_oracle(deepinfer_bin):
    dr = pytest.importorskip("deepseek_recipe")
    import gen_outputs
    chunks = ["Let me", " th", "ink</th", "ink>\n\nCheck", "ing.\n\n<｜DSML｜tool", "_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
              "<｜DSML｜parameter name=\"city\" string=\"true\">Par", "is</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"]
    case = {"tools": True, "starts_in_tool_calls": False, "json_mode": False, "initial_stage": "reasoning_start",
            "stop": [], "chunks": chunks, "finish": "stop", "thinking": True, "include_usage": None}
    _, want = gen_outputs.run_oracle(case)
    got = parse(deepinfer_bin, json.dumps(chunks), "--chunks", "--model", "deepseek-test", "--id", "resp-1",
                "--prompt-tokens", "11", "--cache-hit-tokens", "4")
    assert without_ids(json.loads(got)) == without_ids(json.loads(want))


def test_token_ids_read_like_their_text(deepinfer_bin):
    sys.path.insert(0, str(ROOT / "tools" / "tokenizer"))
    tokenizers = pytest.importorskip("tokenizers")
    import tokenizer_data
    tok = tokenizers.Tokenizer.from_str(tokenizer_data.tokenizer_json("deepseek-v4.1").decode())
    text = "Let me think.</think>The answer is 42 😀."
    # Split at the control token so that </think> is one added token, as the model generates it.
    reasoning, answer = text.split("</think>")
    ids = tok.encode(reasoning, add_special_tokens=False).ids + [tok.token_to_id("</think>")] + \
        tok.encode(answer, add_special_tokens=False).ids
    body = json.loads(parse(deepinfer_bin, json.dumps(ids), "--token-ids", "--model-version", "v4.1"))
    message = body["choices"][0]["message"]
    assert message["reasoning_content"] == reasoning and message["content"] == answer
    assert body["choices"][0]["logprobs"] is None  # none asked for
    assert body["usage"]["completion_tokens"] == len(ids)
    # Reasoning tokens are counted from the tokens (deepseek-recipe re-encodes the reasoning text).
    assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] == len(tok.encode(reasoning, add_special_tokens=False).ids)
    with_logprobs = json.loads(parse(deepinfer_bin, json.dumps(ids), "--token-ids", "--model-version", "v4.1", "--logprobs"))
    entries = with_logprobs["choices"][0]["logprobs"]["content"]
    # Tokens that are not whole characters are written \xNN in "token" (as the oracle writes them); "bytes"
    # holds them exactly.
    assert b"".join(bytes(e["bytes"]) for e in entries).decode() == answer
    # A bad id is one clear line and exit 1.
    proc = subprocess.run([deepinfer_bin, "parse", "--token-ids"], input=b"[1, 99999999]", capture_output=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.decode().count("\n") == 1 and b"99999999" in proc.stderr


def test_after_think_starts_in_the_answer(deepinfer_bin):
    pytest.importorskip("deepseek_recipe")
    import gen_outputs
    text = "more answer</think> stays"
    case = {"tools": True, "starts_in_tool_calls": False, "json_mode": False, "initial_stage": "content_continuation",
            "stop": [], "chunks": [text], "finish": "stop", "thinking": True, "include_usage": None}
    want = json.loads(gen_outputs.run_oracle(case)[1])["choices"][0]["message"]
    body = json.loads(parse(deepinfer_bin, text, "--after-think"))
    assert body["choices"][0]["message"] == want
    assert want["content"] == "more answer stays" and want["reasoning_content"] == ""  # no reasoning part


def test_declared_responses_tools_split_namespace_calls(deepinfer_bin):
    dr = pytest.importorskip("deepseek_recipe")
    for version, model, name, block, p in [("v4", "DeepSeek-V4-Pro", "docs__lookup", "tool_calls", ""),
                                           ("v4.1", "DeepSeek-V4.1-Flash", "docs::lookup", " calls", " ")]:
        text = (f'x</think>\n\n<｜DSML｜{block}>\n<｜DSML｜{p}invoke name="{name}">\n<｜DSML｜{p}parameter name="q" '
                f'string="true">a</｜DSML｜{p}parameter>\n</｜DSML｜{p}invoke>\n<｜DSML｜{p}invoke name="f">\n</｜DSML｜{p}invoke>\n'
                f'</｜DSML｜{block}>')
        body = json.loads(parse(deepinfer_bin, text, "--protocol", "responses", "--model-version", version,
                                "--function", "f", "--namespace", "docs:lookup", "--id", "resp-1", "--model", "m"))
        # The oracle with the same tools declared in a request.
        request = dr.ResponsesRequest({"model": model, "input": "x", "tools": [
            {"type": "function", "name": "f"},
            {"type": "namespace", "name": "docs", "tools": [{"type": "function", "name": "lookup"}]}]})
        namespaces = request.namespace_tool_map(dr.ConversionOptions())
        echo = request.echo()
        converted = request.convert(dr.ConversionOptions())
        generator = dr.ResponsesRequest.chunk_generator(converted, "resp-1", "m").with_namespace_tool_map(namespaces)
        processor = dr.StreamProcessor(generator.with_echo(echo), converted.parsing_options)
        response = dr.ResponsesResponse("resp-1", "m", 0, 0, 0)
        for chunk in [dr.InferenceChunk.ready(), dr.InferenceChunk.text(text, 1),
                      dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop)]:
            for out in processor.push(chunk):
                response.accumulate(out)
        want = json.loads(response.to_json())
        assert [o for o in without_ids(body)["output"] if o["type"] == "function_call"] == \
            [o for o in without_ids(want)["output"] if o["type"] == "function_call"]
        assert body["tools"] == want["tools"]
