"""Structured output end to end: the official `openai` and `anthropic` SDKs against the real `deepinfer serve` on
a tiny random model. The random weights produce arbitrary tokens; only the grammar mask (src/grammar through
sampling::GrammarLogitsMask in the engine) makes the output valid, so every answer is parsed and validated with
the `jsonschema` package, streamed and not. Thinking is disabled: a random model need not ever close its
reasoning block (the start after `</think>` is covered by tests/sampling/grammar_mask_test.cpp). The schemas
describe finite languages, so every generation ends with the end-of-sentence token well within max_tokens."""
import json
import re
import subprocess

import anthropic
import jsonschema
import openai
import pytest
from conftest import make_tiny_model
from server_process import Server

MODEL = "tiny-structured"
NO_THINKING = {"thinking": {"type": "disabled"}}
# Strict (OpenAI rules: every property required, no other members).
WEATHER = {"type": "object", "additionalProperties": False, "required": ["city", "temp", "sunny", "wind"],
           "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                          "temp": {"type": "integer", "minimum": -40, "maximum": 45},
                          "sunny": {"type": "boolean"},
                          "wind": {"anyOf": [{"type": "null"}, {"type": "string", "enum": ["N", "S", "E", "W"]}]}}}
# Not strict: string bounds, a pattern, an array with bounds, an optional member (no other members, so the
# language stays finite).
CODES = {"type": "object", "required": ["code", "ids"], "additionalProperties": False,
         "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
                        "label": {"type": "string", "maxLength": 6},
                        "ids": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
                                "minItems": 1, "maxItems": 3}}}


@pytest.fixture(scope="module")
def model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=11)


@pytest.fixture(scope="module")
def server(deepinfer_bin, model):
    s = Server(deepinfer_bin, model, "--served-model-name", MODEL, "--max-model-len", "4096",
               "--kv-cache-memory-bytes", str(256 << 20))
    yield s
    assert s.stop() == 0, "\n".join(s.log[-50:])


@pytest.fixture
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


def ask(oai, seed, **kwargs):
    return oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather in json?"}],
                                       max_tokens=400, temperature=1.0, seed=seed, **kwargs)


def schema_format(schema, strict):
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": strict}}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chat_json_schema_output_validates(oai, seed):
    r = ask(oai, seed, response_format=schema_format(WEATHER, True), extra_body=NO_THINKING)
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content), WEATHER)


@pytest.mark.parametrize("seed", [4, 5])
def test_chat_json_schema_streamed_validates(oai, seed):
    stream = ask(oai, seed, response_format=schema_format(CODES, False), extra_body=NO_THINKING, stream=True)
    text, finish = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
    assert finish == "stop"
    value = json.loads(text)
    jsonschema.validate(value, CODES)
    assert re.fullmatch(r"[A-Z]{2}-[0-9]{3}", value["code"])


def test_json_object_and_extensions(oai):
    # vLLM's structured_outputs extension: choice and regex constrain the content alone.
    r = ask(oai, 6, extra_body={**NO_THINKING, "structured_outputs": {"choice": ["yes", "no", "maybe"]}})
    assert r.choices[0].message.content in ("yes", "no", "maybe")
    r = ask(oai, 7, extra_body={**NO_THINKING, "structured_outputs": {"regex": "[a-c]{2,4}-(x|y)"}})
    assert re.fullmatch(r"[a-c]{2,4}-(x|y)", r.choices[0].message.content)
    r = ask(oai, 8, extra_body={**NO_THINKING, "structured_outputs": {"json": CODES}})
    jsonschema.validate(json.loads(r.choices[0].message.content), CODES)


def test_responses_text_format(oai):
    r = oai.responses.create(model=MODEL, input="Weather in json?", max_output_tokens=400, temperature=1.0,
                             text={"format": {"type": "json_schema", "name": "answer", "schema": WEATHER,
                                              "strict": True}},
                             extra_body={"reasoning": {"effort": "none"}})
    jsonschema.validate(json.loads(r.output_text), WEATHER)


def test_messages_output_config_format(server):
    claude = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0)
    r = claude.messages.create(model=MODEL, max_tokens=400, messages=[{"role": "user", "content": "Weather?"}],
                               extra_body={"output_config": {"format": {"type": "json_schema", "schema": WEATHER}},
                                           "thinking": {"type": "disabled"}})
    text = "".join(b.text for b in r.content if b.type == "text")
    jsonschema.validate(json.loads(text), WEATHER)
    assert r.stop_reason == "end_turn"


@pytest.mark.parametrize("body, cause", [
    ({"structured_outputs": {"regex": "(?<=a)b"}}, "structured_outputs.regex"),
    ({"structured_outputs": {"json": {"type": "object", "$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}}},
     "structured_outputs.json"),
    ({"structured_outputs": {"choice": []}}, "structured_outputs.choice"),
    ({"structured_outputs": {"regex": "a", "choice": ["a"]}}, "only one"),
])
def test_invalid_constraints_are_400_naming_the_cause(oai, body, cause):
    with pytest.raises(openai.BadRequestError) as e:
        ask(oai, 9, extra_body={**NO_THINKING, **body})
    assert cause in str(e.value)


def test_schema_keyword_the_grammar_refuses_is_400_naming_keyword_and_pointer(oai):
    # uniqueItems beside `contains` is neither in the grammar nor in the matcher's run-time check: refused,
    # never ignored.
    tags = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                      "contains": {"const": "a"}, "uniqueItems": True}}}
    with pytest.raises(openai.BadRequestError) as e:
        ask(oai, 9, response_format=schema_format(tags, False), extra_body=NO_THINKING)
    assert e.value.status_code == 400
    assert "'uniqueItems" in str(e.value) and "#/properties/tags" in str(e.value), str(e.value)


def test_generate_cli_json_schema(deepinfer_bin, model, tmp_path):
    """`deepinfer generate` runs the same constraint without a server (one response body per JSONL line)."""
    lines = [{"model": "m", "messages": [{"role": "user", "content": "json?"}], "max_tokens": 400, "seed": s,
              "temperature": 1.0, **NO_THINKING, "response_format": schema_format(WEATHER, True)} for s in (21, 22)]
    lines.append({"model": "m", "messages": [{"role": "user", "content": "json?"}], **NO_THINKING,
                  "structured_outputs": {"regex": "(?<=a)b"}})
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    proc = subprocess.run([deepinfer_bin, "generate", "--model", model, "--requests", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr  # one line failed (it says so on its line)
    out = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
    assert len(out) == 3
    for body in out[:2]:
        assert body["choices"][0]["finish_reason"] == "stop"
        jsonschema.validate(json.loads(body["choices"][0]["message"]["content"]), WEATHER)
    assert out[2]["error"]["param"] == "structured_outputs.regex"


# Strict function tools: the DSML tool-call block is constrained (src/grammar/tool_calls.h). With tool_choice
# "required" or a named tool the prompt opens the block, so every answer must be calls of listed tools whose
# arguments validate against the tool's schema; the random weights alone would write anything. The schemas
# keep only keywords the strict rewrite keeps (deepseek-recipe drops string lengths and array counts), so
# the grammar's schema and the one validated here are the same. Arrays are unbounded, but each step closes
# one with a fair chance, so answers end well within max_tokens.
SEARCH = {"type": "object", "additionalProperties": False, "required": ["query", "limit", "tags"],
          "properties": {"query": {"type": "string", "pattern": "^[a-z]{1,8}$"},
                         "limit": {"type": "integer", "minimum": 1, "maximum": 20},
                         "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}}}}
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": WEATHER}},
              {"type": "function", "function": {"name": "search", "strict": True, "parameters": SEARCH}}]
SCHEMAS = {"get_weather": WEATHER, "search": SEARCH}


def check_calls(calls, names):
    assert calls, "no tool call"
    for call in calls:
        assert call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


@pytest.mark.parametrize("seed, parallel", [(31, True), (32, True), (33, True), (34, False), (42, False)])
def test_chat_strict_tools_required_calls_validate(oai, seed, parallel):
    r = ask(oai, seed, tools=CHAT_TOOLS, tool_choice="required", parallel_tool_calls=parallel, extra_body=NO_THINKING)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    check_calls(choice.message.tool_calls, SCHEMAS)
    if not parallel:  # the grammar allows one call only
        assert len(choice.message.tool_calls) == 1


@pytest.mark.parametrize("seed", [35, 36])
def test_chat_strict_named_tool_streamed(oai, seed):
    stream = ask(oai, seed, tools=CHAT_TOOLS, tool_choice={"type": "function", "function": {"name": "search"}},
                 extra_body=NO_THINKING, stream=True)
    calls, finish = {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        finish = chunk.choices[0].finish_reason or finish
        for d in chunk.choices[0].delta.tool_calls or []:
            entry = calls.setdefault(d.index, {"name": "", "arguments": ""})
            entry["name"] += (d.function.name or "") if d.function else ""
            entry["arguments"] += (d.function.arguments or "") if d.function else ""
    assert finish == "tool_calls"
    assert calls
    for entry in calls.values():
        assert entry["name"] == "search"
        jsonschema.validate(json.loads(entry["arguments"]), SEARCH)


@pytest.mark.parametrize("seed, parallel", [(37, True), (38, True), (40, False), (41, False)])
def test_responses_strict_tools_required(oai, seed, parallel):
    tools = [{"type": "function", "name": n, "strict": True, "parameters": s} for n, s in SCHEMAS.items()]
    r = oai.responses.create(model=MODEL, input="Weather?", max_output_tokens=400, temperature=1.0, tools=tools,
                             tool_choice="required", parallel_tool_calls=parallel,
                             extra_body={"reasoning": {"effort": "none"}, "seed": seed})
    calls = [item for item in r.output if item.type == "function_call"]
    assert calls
    if not parallel:  # the grammar allows one call only
        assert len(calls) == 1
    for call in calls:
        jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])


# Anthropic tools[].strict: the same grammar on /v1/messages, the schema as written. tool_choice "any" renders as
# "auto" (deepseek-recipe), so the grammar itself starts the output with the block; a named tool opens it in
# the prompt. Every response must be tool_use blocks whose input validates; disable_parallel_tool_use: one call.
# max_tokens leaves room for several calls: the random weights may keep a call list or an array going.
@pytest.mark.parametrize("seed, choice", [(51, {"type": "any", "disable_parallel_tool_use": True}), (52, {"type": "any"}),
                                          (53, {"type": "any", "disable_parallel_tool_use": True}),
                                          (54, {"type": "tool", "name": "search"}),
                                          (55, {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True})])
def test_messages_strict_tools_calls_validate(server, seed, choice):
    claude = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0)
    tools = [{"name": n, "strict": True, "input_schema": s} for n, s in SCHEMAS.items()]
    r = claude.messages.create(model=MODEL, max_tokens=1500, messages=[{"role": "user", "content": "Weather?"}],
                               tools=tools, tool_choice=choice,
                               extra_body={"thinking": {"type": "disabled"}, "seed": seed, "temperature": 1.0})
    assert r.stop_reason == "tool_use"
    uses = [b for b in r.content if b.type == "tool_use"]
    assert uses
    assert all(b.type == "tool_use" or (b.type == "text" and not b.text.strip()) for b in r.content), r.content
    names = [choice["name"]] if choice["type"] == "tool" else SCHEMAS
    for b in uses:
        assert b.name in names
        jsonschema.validate(b.input, SCHEMAS[b.name])
    if choice.get("disable_parallel_tool_use"):
        assert len(uses) == 1


def test_strict_tool_schema_the_grammar_cannot_take_is_400(oai):
    bad = {"type": "object", "additionalProperties": False, "required": ["q"],
           "properties": {"q": {"type": "string", "pattern": "(?<=a)b"}}}
    tools = [{"type": "function", "function": {"name": "lookbehind", "strict": True, "parameters": bad}}]
    with pytest.raises(openai.BadRequestError) as e:
        ask(oai, 39, tools=tools, tool_choice="required", extra_body=NO_THINKING)
    assert 'tool "lookbehind": parameters.properties.q' in str(e.value)
    assert e.value.body["param"] == "tools"


# `seed` on Responses and Messages (an extension there, read by the server as on Chat Completions): equal
# seeded requests at temperature 1 give equal text, and another seed another text (32 tokens drawn from a
# random-weight model's 129K-token vocabulary: equal texts by chance are out of reach).
def test_seed_makes_responses_and_messages_repeatable(server, oai):
    def responses(seed):
        r = oai.responses.create(model=MODEL, input="Say anything.", max_output_tokens=32, temperature=1.0,
                                 extra_body={"reasoning": {"effort": "none"}, "seed": seed})
        return r.output_text

    claude = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0)

    def messages(seed):
        r = claude.messages.create(model=MODEL, max_tokens=32, messages=[{"role": "user", "content": "Say anything."}],
                                   extra_body={"thinking": {"type": "disabled"}, "seed": seed, "temperature": 1.0})
        return "".join(b.text for b in r.content if b.type == "text")

    for generate in (responses, messages):
        first = generate(7)
        assert first == generate(7)
        assert first != generate(8)


# Tools that are not strict, forced (a named tool or "required"), with a response format beside them: the prompt
# opened the tool-call block, so the answer is the call (the format does not apply inside the block), its
# arguments follow the tool's schema as written (best effort, as vLLM and SGLang constrain a forced call).
# Streamed on Chat Completions, and on Responses with text.format.
LOOSE_WEATHER = {"type": "object", "properties": WEATHER["properties"], "required": ["city"]}


def test_chat_forced_loose_tool_beside_response_format_streams_the_call(oai):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": LOOSE_WEATHER}}]
    stream = ask(oai, 61, tools=tools, tool_choice={"type": "function", "function": {"name": "get_weather"}},
                 parallel_tool_calls=False, response_format=schema_format(CODES, False), extra_body=NO_THINKING,
                 stream=True)
    calls, finish, content = {}, None, ""
    for chunk in stream:
        if not chunk.choices:
            continue
        finish = chunk.choices[0].finish_reason or finish
        content += chunk.choices[0].delta.content or ""
        for d in chunk.choices[0].delta.tool_calls or []:
            entry = calls.setdefault(d.index, {"name": "", "arguments": ""})
            entry["name"] += (d.function.name or "") if d.function else ""
            entry["arguments"] += (d.function.arguments or "") if d.function else ""
    assert finish == "tool_calls" and content == ""
    assert [c["name"] for c in calls.values()] == ["get_weather"]
    jsonschema.validate(json.loads(calls[0]["arguments"]), LOOSE_WEATHER)


# Responses: a function tool without `strict` is strict by default where its schema can be made strict (the
# rewrite requires every property, though the schema requires only `city`); with text.format and tool_choice
# "required" the output is one call under that rewrite. Strict tools beside
# text.format without a forced call: the output is the formatted answer or calls, each valid.
@pytest.mark.parametrize("seed", [62, 63, 64])
def test_responses_tools_beside_text_format(oai, seed):
    fmt = {"format": {"type": "json_schema", "name": "answer", "schema": WEATHER, "strict": True}}
    forced = oai.responses.create(model=MODEL, input="Weather?", max_output_tokens=400, temperature=1.0,
                                  tools=[{"type": "function", "name": "get_weather", "parameters": LOOSE_WEATHER}],
                                  tool_choice="required", parallel_tool_calls=False, text=fmt,
                                  extra_body={"reasoning": {"effort": "none"}, "seed": seed}, stream=True)
    done = [e.response for e in forced if e.type == "response.completed"]
    calls = [item for item in done[0].output if item.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather"]
    assert set(json.loads(calls[0].arguments)) == set(WEATHER["properties"])  # strict: every property written
    jsonschema.validate(json.loads(calls[0].arguments), WEATHER)

    either = oai.responses.create(model=MODEL, input="Weather?", max_output_tokens=400, temperature=1.0,
                                  tools=[{"type": "function", "name": n, "strict": True, "parameters": s}
                                         for n, s in SCHEMAS.items()],
                                  parallel_tool_calls=False, text=fmt,
                                  extra_body={"reasoning": {"effort": "none"}, "seed": seed})
    calls = [item for item in either.output if item.type == "function_call"]
    if calls:
        assert len(calls) == 1
        jsonschema.validate(json.loads(calls[0].arguments), SCHEMAS[calls[0].name])
    else:
        jsonschema.validate(json.loads(either.output_text), WEATHER)


def complete(oai, seed, **extra):
    return oai.completions.create(model=MODEL, prompt="Weather in json:", max_tokens=400, temperature=1.0, seed=seed,
                                  extra_body=extra)


def test_completions_constraints_apply_from_the_first_token(oai):
    # A raw prompt has no reasoning block: the whole completion is the constrained text.
    r = complete(oai, 21, response_format=schema_format(WEATHER, True))
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].text), WEATHER)
    r = complete(oai, 22, structured_outputs={"regex": "[a-c]{2,4}-(x|y)"})
    assert re.fullmatch(r"[a-c]{2,4}-(x|y)", r.choices[0].text)
    r = complete(oai, 23, guided_json=CODES)
    jsonschema.validate(json.loads(r.choices[0].text), CODES)
    # The chat path's compile and message: the same 400 for the same invalid schema.
    bad = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                     "contains": {"const": "a"}, "uniqueItems": True}}}
    with pytest.raises(openai.BadRequestError) as chat_error:
        ask(oai, 9, extra_body={**NO_THINKING, "structured_outputs": {"json": bad}})
    with pytest.raises(openai.BadRequestError) as completion_error:
        complete(oai, 9, structured_outputs={"json": bad})
    assert completion_error.value.status_code == 400
    assert completion_error.value.body == chat_error.value.body
    assert "structured_outputs.json" in str(completion_error.value)
