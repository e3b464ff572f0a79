"""Request generators for what real clients send beyond the basic corpora (the edge classes).

Imported by gen_requests.py (`--protocol chat_edge | responses_history | messages_edge`). Each generator
returns (request, tags): the request as a dict, or as a JSON text when it holds numbers a dict cannot
spell (`-0`, `1E2`, integers past 64 bits); tags name the classes the request exercises, and a tag in
DEVIATIONS marks a request where deepinfer deliberately differs from the oracle (listed with its reason in
tests/recipe/data/render/deviations.json, which the golden test reads).

Classes:
- Responses history as agent frameworks replay it: reasoning items of several parts, consecutive reasoning
  items, reasoning before a user/system/developer message or at the end of the input, items and tools the
  oracle skips (web_search_call, mcp_*, local_shell, ...), input_file parts, input_image by file_id.
- Strict tool schemas as SDKs write them (pydantic/zod output): minimum/maximum, pattern, format, default,
  "type": [T, "null"], anyOf with "default": null, nested objects, $ref/$defs, and the schemas strict mode
  rejects (required omitting properties, unknown formats, additionalProperties true, float bounds on
  integers); strict json_schema response formats.
- Acceptance edges: thinking "adaptive", temperature/top_p just past a bound in float64 but not in float32,
  assistant messages without content or tool calls, empty stop strings, json_schema without schema, two
  tool results for one call, bare-string image_url, duplicate tool names, a message's unrelated `task` key.
- Edge numbers in tool-call arguments and schemas (-0, -0.0, 1E2, 1e16, 5e-324, 2**63, 2**64).
"""
import json
import random

BAR = "\uff5c"
TEXT_WORDS = ["hello", "world", "Paris", "json", "\u4f60\u597d", "caf\u00e9", "\U0001F600", "x", "42", "\n", "\n\n", " ",
              "\"q\"", "\\", f"<{BAR}User{BAR}>", "</think>", "\t", "\u2028"]

# Tags whose requests deepinfer answers differently from deepseek-recipe 0.2.0 on purpose.
DEVIATIONS = {"chat-developer-role", "responses-duplicate-namespaced-name"}

# Number spellings that only a JSON text carries; written as "@@N:<text>@@" strings in the dict first.
EDGE_NUMBERS = ["-0", "-0.0", "0.0", "1E2", "1e16", "1e-5", "5e-324", "1.7976931348623157e308", "0.1", "100.0",
                "9223372036854775807", "9223372036854775808", "18446744073709551615", "-9223372036854775808",
                "1.5e300", "2.5", "-1e-7"]


def text(rng, lo=0, hi=6):
    return rng.choice(["", " "]).join(rng.choice(TEXT_WORDS) for _ in range(rng.randint(lo, hi)))


def edge_number(rng):
    return "@@N:%s@@" % rng.choice(EDGE_NUMBERS)


def to_body(request):
    """The request as JSON text, with "@@N:x@@" placeholders spliced in as bare number tokens."""
    out = json.dumps(request, ensure_ascii=False)
    if "@@N:" not in out:
        return request
    import re
    return re.sub(r'"@@N:([^@]*)@@"', lambda m: m.group(1), out)


# ---- argument values -------------------------------------------------------------------------------------

def arg_value(rng, depth=0):
    r = rng.random()
    if r < 0.25:
        return text(rng, 0, 3)
    if r < 0.45:
        return edge_number(rng)
    if r < 0.55:
        return rng.choice([True, False, None])
    if r < 0.7 and depth < 2:
        return [arg_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 2:
        return {rng.choice(["a", "b", "n", "\u540d", "x y"]): arg_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return rng.randint(-5, 5)


def arguments_text(rng):
    args = {rng.choice(["city", "n", "q", "opts", "v"]): arg_value(rng) for _ in range(rng.randint(0, 3))}
    body = to_body(args)
    return body if isinstance(body, str) else json.dumps(body, ensure_ascii=rng.random() < 0.3)


# ---- schemas -----------------------------------------------------------------------------------------------

FORMATS_OK = ["email", "hostname", "ipv4", "ipv6", "uuid"]
FORMATS_BAD = ["date-time", "date", "uri"]


def scalar_schema(rng, strict_ok=True):
    """A property schema with the keywords SDKs write; strict_ok=False may add what strict mode rejects."""
    t = rng.choice(["string", "integer", "number", "boolean", "null", "list", "anyof", "ref"])
    s = {}
    if t == "string":
        s["type"] = "string"
        for key, value in [("pattern", "^[a-z]+$"), ("format", rng.choice(FORMATS_OK)), ("minLength", 1),
                           ("maxLength", 9), ("enum", ["a", "b"]), ("default", "a"), ("title", "T"),
                           ("examples", ["a"]), ("const", "a")]:
            if rng.random() < 0.2:
                s[key] = value
        if not strict_ok and rng.random() < 0.3:
            s["format"] = rng.choice(FORMATS_BAD)
    elif t in ("integer", "number"):
        s["type"] = t
        for key in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "default", "const"]:
            if rng.random() < 0.25:
                s[key] = rng.choice([0, 1, 10, -3]) if t == "integer" else rng.choice([0, 0.5, 1, 2.5, -1.25])
        if rng.random() < 0.2:
            s["multipleOf"] = rng.choice([1, 2, 5]) if t == "integer" else rng.choice([0.5, 2, 0.25])
        if not strict_ok and rng.random() < 0.05:
            s["multipleOf"] = rng.choice([0, -2])  # the meta-schema wants multipleOf > 0
        if not strict_ok and rng.random() < 0.04:
            s[rng.choice(["minLength", "minItems"])] = -1
        if rng.random() < 0.1:
            s["default"] = None
        if not strict_ok and t == "integer" and rng.random() < 0.3:
            s["minimum"] = 1.5
    elif t in ("boolean", "null"):
        s["type"] = t
        if rng.random() < 0.3:
            s["default"] = True if t == "boolean" else None
    elif t == "list":
        s["type"] = rng.choice([["string", "null"], ["integer", "null"], ["number", "string"], ["boolean", "null"]])
        if not strict_ok and rng.random() < 0.3:
            s["type"] = ["array", "null"]
        if rng.random() < 0.3:
            s["default"] = None
    elif t == "anyof":
        member = scalar_schema(rng, True)
        while not isinstance(member.get("type"), str):  # strict mode wants typed members
            member = scalar_schema(rng, True)
        s["anyOf"] = [member, {"type": "null"}]
        if not strict_ok and rng.random() < 0.15:
            s["anyOf"][0] = rng.choice([{"$ref": "#/$defs/Item"}, {"type": ["string", "null"]}])
        if rng.random() < 0.6:
            s["default"] = None
    else:
        s["$ref"] = "#/$defs/Item"
    if rng.random() < 0.4:
        s["description"] = text(rng, 1, 4)
    return s


def object_schema(rng, strict_ok, depth=0):
    props = {}
    for _ in range(rng.randint(1, 4)):
        name = rng.choice(["a", "b", "city", "n", "opts", "\u540d", "x_y", "items"])
        r = rng.random()
        if depth < 2 and r < 0.15:
            props[name] = object_schema(rng, strict_ok, depth + 1)
        elif depth < 2 and r < 0.3:
            props[name] = {"type": "array", "items": scalar_schema(rng, strict_ok) if rng.random() < 0.7
                           else object_schema(rng, strict_ok, depth + 1)}
            if rng.random() < 0.3:
                props[name]["minItems"] = 1
            if rng.random() < 0.3:
                props[name]["description"] = text(rng, 1, 3)
        else:
            props[name] = scalar_schema(rng, strict_ok)
    s = {"type": "object", "properties": props}
    r = rng.random()
    if r < 0.6 or strict_ok:
        s["required"] = list(props)
    elif r < 0.8:
        s["required"] = list(props)[:-1]  # strict mode rejects a required list that omits properties
    if rng.random() < 0.5:
        s["additionalProperties"] = False if strict_ok or rng.random() < 0.7 else True
    if rng.random() < 0.2:
        s["description"] = text(rng, 1, 3)
    if rng.random() < 0.1:
        s["title"] = "Model"
    if depth == 0 and any("$ref" in json.dumps(p) for p in props.values()):
        s["$defs"] = {"Item": {"type": "string", "enum": ["x", "y"]}}
    return s


def parameters(rng, strict_ok=True):
    if rng.random() < 0.08:
        return {"type": "object", "properties": {}}
    return object_schema(rng, strict_ok)


# ---- Chat Completions ------------------------------------------------------------------------------------

def chat_tool(rng, name, strict):
    fn = {"name": name}
    if rng.random() < 0.7:
        fn["description"] = text(rng, 1, 5)
    if strict is not None:
        fn["strict"] = strict
    fn["parameters"] = parameters(rng, strict_ok=rng.random() < 0.85) if strict else parameters(rng, False)
    return {"type": "function", "function": fn}


def chat_edge_request(rng):
    tags = []
    req = {"model": "DeepSeek-V4-Pro", "messages": []}
    tools = []
    r = rng.random()
    if r < 0.4:
        tags.append("strict-tools")
        names = rng.sample(["get_weather", "search", "calc", "lookup"], rng.randint(1, 3))
        tools = [chat_tool(rng, n, True) for n in names]
    elif r < 0.6:
        tags.append("schema-keywords")
        names = rng.sample(["get_weather", "search", "calc"], rng.randint(1, 2))
        tools = [chat_tool(rng, n, rng.choice([None, False])) for n in names]
    if tools and rng.random() < 0.04:
        tags.append("duplicate-tool-name")
        tools.append(json.loads(json.dumps(tools[0])))
    msgs = req["messages"]
    if rng.random() < 0.4:
        msgs.append({"role": "system", "content": text(rng, 0, 5)})
    if rng.random() < 0.03:
        tags.append("chat-developer-role")
        msgs.append({"role": "developer", "content": text(rng, 1, 4)})
    counter = 0
    turns = rng.randint(1, 3)
    for t in range(turns):
        user = {"role": "user", "content": text(rng, 1, 6)}
        if rng.random() < 0.02:
            tags.append("image-url-string")
            user["content"] = [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": "https://example.com/a.png"}]
        if rng.random() < 0.06:
            tags.append("task-key")
            user["task"] = rng.choice(["query", "action", "translate", 3])
        msgs.append(user)
        if t == turns - 1 and rng.random() < 0.7:
            break
        if tools and rng.random() < 0.6:
            calls = []
            for _ in range(rng.randint(1, 2)):
                counter += 1
                calls.append({"id": "call_%d" % counter, "type": "function",
                              "function": {"name": rng.choice(tools)["function"]["name"], "arguments": arguments_text(rng)}})
            a = {"role": "assistant", "content": rng.choice([None, "", text(rng, 1, 3)]), "tool_calls": calls}
            if rng.random() < 0.5:
                a["reasoning_content"] = text(rng, 0, 4)
            msgs.append(a)
            results = [{"role": "tool", "tool_call_id": c["id"], "content": text(rng, 0, 4)} for c in calls]
            if rng.random() < 0.05:
                tags.append("duplicate-tool-result")
                results.append(dict(results[0]))
            msgs.extend(results)
        r = rng.random()
        if r < 0.06:
            tags.append("assistant-without-content")
            msgs.append(rng.choice([{"role": "assistant"}, {"role": "assistant", "content": None},
                                    {"role": "assistant", "content": None, "tool_calls": []}]))
        else:
            a = {"role": "assistant", "content": text(rng, 0, 5)}
            if rng.random() < 0.4:
                a["reasoning_content"] = text(rng, 0, 4)
            if rng.random() < 0.05:
                tags.append("task-key")
                a["task"] = "query"
            msgs.append(a)
    if tools:
        req["tools"] = tools
        if rng.random() < 0.2:
            req["tool_choice"] = rng.choice(["auto", "none"])
    r = rng.random()
    if r < 0.1:
        tags.append("thinking-adaptive")
        req["thinking"] = {"type": "adaptive"}
    elif r < 0.3:
        req["thinking"] = {"type": rng.choice(["enabled", "disabled"])}
    r = rng.random()
    if r < 0.1:
        tags.append("float-bounds")
        req["temperature"] = rng.choice([2.0000001, 2.0000001, 2.00000012, 2.0000002, 1.9999999, 0.0, -1e-46, 2.0])
    elif r < 0.16:
        tags.append("float-bounds")
        req["top_p"] = rng.choice([1.00000001, 1.00000001, 1.0000001, 1e-46, 5e-324, 1.0, 0.0])
    r = rng.random()
    if r < 0.06:
        tags.append("empty-stop")
        req["stop"] = rng.choice(["", ["a", ""], ["", "b"], []])
    r = rng.random()
    if r < 0.15 and not tools:
        tags.append("response-format-schema")
        js = {"name": "answer"}
        if rng.random() < 0.15:
            tags.append("json-schema-without-schema")
        else:
            js["schema"] = parameters(rng, strict_ok=rng.random() < 0.8)
        if rng.random() < 0.6:
            js["strict"] = True
        req["response_format"] = {"type": "json_schema", "json_schema": js}
        msgs[-1 if msgs[-1]["role"] == "user" else 0]["content"] = "json " + text(rng, 0, 3)
    return to_body(req), tags


# ---- Responses history -------------------------------------------------------------------------------------

SKIPPED_ITEMS = ["item_reference", "web_search_call", "file_search_call", "computer_call", "computer_call_output",
                 "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output", "apply_patch_call",
                 "apply_patch_call_output", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response",
                 "mcp_call", "image_generation_call", "code_interpreter_call", "compaction"]
SKIPPED_TOOLS = [{"type": "local_shell"}, {"type": "mcp", "server_label": "deepwiki", "server_url": "https://x/mcp"},
                 {"type": "file_search", "vector_store_ids": ["vs_1"]}, {"type": "computer_use_preview"},
                 {"type": "image_generation"}, {"type": "code_interpreter", "container": {"type": "auto"}},
                 {"type": "shell"}, {"type": "web_search"}, {"type": "apply_patch"}]


def skipped_item(rng):
    t = rng.choice(SKIPPED_ITEMS)
    item = {"type": t, "id": "%s_%d" % (t[:3], rng.randint(1, 99))}
    if t.endswith("_output") or t.startswith("mcp_approval_response"):
        item["call_id"] = "x_%d" % rng.randint(1, 9)
        item["output"] = "ok"
    if t == "web_search_call":
        item.update({"status": "completed", "action": {"type": "search", "query": "q"}})
    if t == "compaction":
        item["encrypted_content"] = "gAAAA"
    return item


def reasoning_item(rng):
    item = {"type": "reasoning", "summary": []}
    if rng.random() < 0.3:
        item["summary"] = [{"type": "summary_text", "text": text(rng, 1, 3)}]
    r = rng.random()
    if r < 0.75:
        item["content"] = [{"type": "reasoning_text", "text": text(rng, 0, 4)} for _ in range(rng.randint(0, 3))]
    elif r < 0.85:
        item["encrypted_content"] = "gAAAA"
    return item


def user_content(rng, tags):
    if rng.random() < 0.6:
        return text(rng, 1, 6)
    parts = []
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        if r < 0.15:
            tags.append("input-file")
            parts.append(rng.choice([{"type": "input_file", "file_id": "file-1"},
                                     {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,AA"},
                                     {"type": "input_file", "file_url": "https://example.com/a.pdf"}]))
        elif r < 0.25:
            tags.append("input-image-file-id")
            parts.append({"type": "input_image", "file_id": "file-2"})
        elif r < 0.32:
            parts.append({"type": "input_image", "image_url": "https://example.com/cat.png"})
        else:
            parts.append({"type": "input_text", "text": text(rng, 0, 4)})
    return parts


def responses_tools(rng, tags):
    tools = []
    strict = rng.random() < 0.3
    if strict:
        tags.append("strict-tools")
    for n in rng.sample(["get_weather", "search", "calc"], rng.randint(0, 2)):
        t = {"type": "function", "name": n, "parameters": parameters(rng, strict_ok=not strict or rng.random() < 0.9)}
        if strict:
            t["strict"] = True
        if rng.random() < 0.6:
            t["description"] = text(rng, 1, 4)
        tools.append(t)
    if rng.random() < 0.3:
        ns = {"type": "namespace", "name": "docs", "tools": []}
        for n in ["lookup", "fetch"][:rng.randint(1, 2)]:
            m = {"type": "function", "name": n, "parameters": parameters(rng)}
            if strict:
                m["strict"] = True
            ns["tools"].append(m)
        if rng.random() < 0.5:
            ns["description"] = text(rng, 1, 3)
        tools.append(ns)
        if rng.random() < 0.1:
            tags.append("responses-duplicate-namespaced-name")
            dup = {"type": "function", "name": "docs__lookup", "parameters": {"type": "object", "properties": {}}}
            if strict:
                dup["strict"] = True
            tools.append(dup)
    for _ in range(rng.choice([0, 0, 1, 2])):
        tags.append("skipped-tool")
        tools.insert(rng.randint(0, len(tools)), dict(rng.choice(SKIPPED_TOOLS)))
    return tools


def responses_history_request(rng):
    tags = []
    req = {"model": "DeepSeek-V4-Pro"}
    tools = responses_tools(rng, tags)
    names = [t["name"] for t in tools if t["type"] == "function"]
    names += ["docs__lookup"] if any(t["type"] == "namespace" for t in tools) else []
    items = []
    if rng.random() < 0.3:
        items.append({"role": rng.choice(["system", "developer"]), "content": text(rng, 1, 4)})
    counter = 0
    for _ in range(rng.randint(1, 4)):
        items.append({"type": "message", "role": "user", "content": user_content(rng, tags)} if rng.random() < 0.5
                     else {"role": "user", "content": user_content(rng, tags)})
        for _ in range(rng.randint(0, 3)):
            r = rng.random()
            if r < 0.35:
                tags.append("reasoning-item")
                items.append(reasoning_item(rng))
            elif r < 0.5:
                tags.append("skipped-item")
                items.append(skipped_item(rng))
            elif r < 0.75 and names:
                calls = []
                for _ in range(rng.randint(1, 2)):
                    counter += 1
                    name = rng.choice(names)
                    call = {"type": "function_call", "call_id": "call_%d" % counter, "name": name,
                            "arguments": arguments_text(rng)}
                    if name == "docs__lookup" and rng.random() < 0.5:
                        call.update({"name": "lookup", "namespace": "docs"})
                    calls.append(call)
                items.extend(calls)
                if rng.random() < 0.04:  # anything between calls and their outputs breaks the pairing
                    tags.append("reasoning-item")
                    items.append(reasoning_item(rng))
                for c in calls:
                    out = {"type": "function_call_output", "call_id": c["call_id"], "output": text(rng, 0, 3)}
                    if rng.random() < 0.2:
                        out["output"] = user_content(rng, tags) if rng.random() < 0.7 else [{"type": "input_text", "text": "t"}]
                    items.append(out)
            else:
                items.append({"type": "message", "role": "assistant",
                              "content": rng.choice([text(rng, 0, 4), [{"type": "output_text", "text": text(rng, 0, 3)}]])})
        if rng.random() < 0.15:
            tags.append("reasoning-item")
            items.append(reasoning_item(rng))
        if rng.random() < 0.1:
            items.append({"role": rng.choice(["system", "developer"]), "content": text(rng, 1, 3)})
    req["input"] = items
    if tools:
        req["tools"] = tools
    r = rng.random()
    if r < 0.3:
        req["reasoning"] = {"effort": rng.choice(["none", "low", "high", "max"])}
    if rng.random() < 0.1:
        tags.append("float-bounds")
        req["temperature"] = rng.choice([2.0000001, 2.0000002, 0.0])
    if rng.random() < 0.1 and not any(t.get("strict") for t in tools):
        tags.append("response-format-schema")
        fmt = {"type": "json_schema", "name": "answer", "schema": parameters(rng, strict_ok=rng.random() < 0.8)}
        if rng.random() < 0.6:
            fmt["strict"] = True
        if rng.random() < 0.1:
            fmt.pop("schema")
            tags.append("json-schema-without-schema")
        req["text"] = {"format": fmt}
    return to_body(req), tags


# ---- Anthropic Messages ------------------------------------------------------------------------------------

def messages_edge_request(rng):
    tags = []
    req = {"model": "DeepSeek-V4-Pro", "max_tokens": rng.choice([64, 1024]), "messages": []}
    tools = []
    if rng.random() < 0.5:
        tags.append("schema-keywords")
        for n in rng.sample(["get_weather", "search", "calc"], rng.randint(1, 2)):
            t = {"name": n, "input_schema": parameters(rng, False)}
            if rng.random() < 0.2:
                t["strict"] = True
            if rng.random() < 0.6:
                t["description"] = text(rng, 1, 4)
            tools.append(t)
    counter = 0
    pending = []
    for t in range(rng.randint(1, 3)):
        blocks = list(pending) + [{"type": "text", "text": text(rng, 1, 5)}]
        pending = []
        req["messages"].append({"role": "user", "content": blocks if len(blocks) > 1 or rng.random() < 0.5
                                else blocks[0]["text"]})
        if rng.random() < 0.5:
            break
        content = []
        if rng.random() < 0.5:
            content.append({"type": "thinking", "thinking": text(rng, 0, 4), "signature": "sig"})
        if rng.random() < 0.7:
            content.append({"type": "text", "text": text(rng, 0, 4)})
        if tools and rng.random() < 0.7:
            for _ in range(rng.randint(1, 2)):
                counter += 1
                cid = "toolu_%d" % counter
                tags.append("edge-numbers")
                args = json.loads(json.dumps({rng.choice(["a", "n", "q"]): arg_value(rng) for _ in range(rng.randint(0, 3))}))
                content.append({"type": "tool_use", "id": cid, "name": rng.choice(tools)["name"], "input": args})
                pending.append({"type": "tool_result", "tool_use_id": cid, "content": text(rng, 0, 3)})
        if not content:
            content.append({"type": "text", "text": "ok"})
        req["messages"].append({"role": "assistant", "content": content})
    if pending:
        req["messages"].append({"role": "user", "content": pending})
    if tools:
        req["tools"] = tools
    r = rng.random()
    if r < 0.2:
        tags.append("thinking-adaptive")
        req["thinking"] = {"type": "adaptive"}
    elif r < 0.4:
        req["thinking"] = rng.choice([{"type": "enabled", "budget_tokens": 1024}, {"type": "disabled"}])
    if rng.random() < 0.15:
        tags.append("float-bounds")
        req["temperature"] = rng.choice([1.0000001, 1.00000012, 1.0000002, 0.0, 2.0])
    if rng.random() < 0.05:
        tags.append("empty-stop")
        req["stop_sequences"] = rng.choice([[""], ["a", ""]])
    return to_body(req), tags


GENERATORS = {"chat_edge": (chat_edge_request, "chat"), "responses_history": (responses_history_request, "responses"),
              "messages_edge": (messages_edge_request, "anthropic")}


if __name__ == "__main__":
    rng = random.Random(1)
    for name, (gen, _) in GENERATORS.items():
        for _ in range(3):
            print(name, gen(rng))
