"""The official openai SDK reads the logprobs and custom tool calls of the committed output goldens
(tests/recipe/data/parse/logprob_cases.jsonl and responses_custom_cases.jsonl: deepseek-recipe's bytes,
which recipe_output_parser_golden_test requires deepinfer to reproduce exactly): a Chat Completions stream
accumulated by the SDK's ChatCompletionStreamState carries the same logprobs as the non-streaming body, and
in a Responses stream the SDK's output_text delta events carry the final response's output_text logprobs
and its custom_tool_call_input deltas add up to the final custom tool call inputs.
"""
import json
import pathlib

from openai import omit
from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.lib.streaming.responses import ResponseStreamState
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent

DATA = pathlib.Path(__file__).resolve().parents[2] / "recipe" / "data" / "parse"
ENVELOPE = ('{"id":"resp-1","object":"chat.completion.chunk","created":0,"model":"deepseek-test",'
            '"system_fingerprint":null,"choices":[')


def cases(name):
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").split("\n") if line]


def responses_events(case):
    """The case's Responses events with the request settings (stored once, in the response) put back."""
    response = case["response"]
    begin = response.index('"parallel_tool_calls":')
    end = response.index('"truncation":"disabled",') + len('"truncation":"disabled",')
    stored = response[:begin] + "@ECHO@" + response[end:]
    for step in case["pushes"]:
        for event in step:
            text = event.split(" ", 1)[1].replace("@RESPONSE@", stored).replace("@ECHO@", response[begin:end])
            yield construct_type(type_=ResponseStreamEvent, value=json.loads(text))


def test_chat_logprobs_accumulate_like_the_body():
    checked = 0
    for case in cases("logprob_cases.jsonl"):
        if case["protocol"] != "chat":
            continue
        state = ChatCompletionStreamState()
        for step in case["pushes"]:
            for chunk in step:
                state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=json.loads(ENVELOPE + chunk)))
        streamed = state.current_completion_snapshot.choices[0].logprobs
        body = json.loads(case["response"])["choices"][0]["logprobs"]
        tokens = [(e.token, e.logprob, e.bytes, [(t.token, t.logprob) for t in e.top_logprobs])
                  for e in (streamed.content or [])] if streamed else []
        want = [(e["token"], e["logprob"], e["bytes"], [(t["token"], t["logprob"]) for t in e["top_logprobs"]])
                for e in ((body or {}).get("content") or [])]
        assert tokens == want, case["name"]
        checked += bool(want)
    assert checked >= 5


def test_responses_logprobs_and_custom_tool_calls_rebuild_the_response():
    checked_logprobs = checked_custom = 0
    for case in cases("logprob_cases.jsonl") + cases("responses_custom_cases.jsonl"):
        if case.get("protocol", "responses") != "responses":
            continue
        state = ResponseStreamState(input_tools=omit, text_format=omit)
        delta_logprobs = {}  # the SDK state keeps the text of output_text deltas, not their logprobs
        custom_input, custom_done = {}, {}
        for event in responses_events(case):
            state.handle_event(event)
            if event.type == "response.custom_tool_call_input.delta":  # nor the input of custom tool calls
                custom_input[event.item_id] = custom_input.get(event.item_id, "") + event.delta
            if event.type == "response.custom_tool_call_input.done":
                custom_done[event.item_id] = event.input
            if event.type == "response.output_text.delta":
                delta_logprobs.setdefault(event.item_id, []).extend(
                    (lp.token, lp.logprob, lp.bytes) for lp in event.logprobs)
        final = construct_type(type_=Response, value=json.loads(case["response"]))
        rebuilt = state._ResponseStreamState__current_snapshot  # the accumulated deltas, not the final object
        assert rebuilt is not None, case["name"]
        for got, want in zip(rebuilt.output, final.output):
            assert got.type == want.type, case["name"]
            if want.type == "message":
                got_lp = delta_logprobs.get(got.id, [])
                want_lp = [(lp.token, lp.logprob, lp.bytes) for part in want.content for lp in (part.logprobs or [])]
                assert got_lp == want_lp, case["name"]
                checked_logprobs += bool(want_lp)
            if want.type == "custom_tool_call":
                assert got.name == want.name, case["name"]
                assert custom_input.get(got.id, "") == custom_done[got.id] == want.input, case["name"]
                checked_custom += 1
    assert checked_logprobs >= 3
    assert checked_custom >= 10
