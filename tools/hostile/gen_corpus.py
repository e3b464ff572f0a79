#!/usr/bin/env python3
"""Writes the hostile-input corpus: adversarial inputs for every command and parser of deepinfer, each with
the command line that feeds it and the exit codes that count as handled.

    tools/hostile/gen_corpus.py --deepinfer BIN --out DIR

DIR/cases.json lists the cases: {"name", "args" (after the binary; "{D}" is DIR), "stdin" (a file in DIR or
null), "exit" (allowed codes), "rss_mib" (the resident-memory bound), "timeout_s", "stderr_has" (text the
stderr must contain, or null)}. DIR/files/ holds the
inputs, DIR/models/ a `tiny` checkpoint made with init-model and variants of it (their config.json, tensors
or tokenizer.json broken in one way each; the rest linked to the tiny model's files). DIR/fuzz/<target>/
holds the same inputs as seeds for the fuzzers (scripts/test.sh passes them on). The harness is
tests/python/hostile/test_hostile.py. Deterministic: the same binary gives the same corpus.
"""
import argparse
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys

# Exit codes: 1 = a handled error (one line on stderr), 2 = a usage error; 0 where the input is valid but
# extreme (a 20 MB run of one letter tokenizes fine, within the memory bound).
ERROR, USAGE, OK = [1], [2], [0]

DEEP = 100_000  # nesting beyond any parser's bound: a recursive parser overflows its stack here


def nested(depth, open_="[", close="]", inner="1"):
    return open_ * depth + inner + close * depth


class Corpus:
    def __init__(self, out):
        self.out = pathlib.Path(out)
        self.files = self.out / "files"
        self.files.mkdir(parents=True, exist_ok=True)
        self.cases = []
        self.names = set()

    def file(self, name, data):
        path = self.files / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
        return "{D}/files/" + name

    def seed(self, target, name, data):
        d = self.out / "fuzz" / target
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))

    def case(self, name, args, exit_codes, stdin=None, rss_mib=400, timeout_s=60, stderr_has=None, heavy=False):
        """heavy: tens of megabytes or seconds even when handled well; the harness runs it only with
        DEEPINFER_HOSTILE_FULL=1 and on the Release build (a smaller case of the same class runs in CI)."""
        assert name not in self.names, name
        self.names.add(name)
        self.cases.append({"name": name, "args": args, "stdin": stdin, "exit": exit_codes, "rss_mib": rss_mib,
                           "timeout_s": timeout_s, "stderr_has": stderr_has, "heavy": heavy})

    def write(self):
        (self.out / "cases.json").write_text(json.dumps(self.cases, indent=1) + "\n")  # \udcff stays escaped


def cli_flags(c):
    """Every subcommand's flags: values out of range, of the wrong type, missing, not UTF-8."""
    bad_utf8 = "\udcff"  # written as the raw byte 0xff by os.fsencode (surrogateescape)
    for args in (["tokenize", "--tokenizer"], ["tokenize", "--bogus"], ["render", "--protocol", "smtp"],
                 ["render", "--model-version", "v9"], ["parse", "--chunk-size", "0"],
                 ["parse", "--chunk-size", "-1"], ["parse", "--prompt-tokens", "1e3"],
                 ["parse", "--created", "99999999999999999999999"], ["parse", "--include-usage", "maybe"],
                 ["parse", "--cache-hit-tokens", "5", "--prompt-tokens", "4"],
                 ["init-model", "--preset", "tiny", "--out", "{D}/x", "--seed", "-1"],
                 ["init-model", "--preset", "huge", "--out", "{D}/x"], ["init-model", "--out", "{D}/x"],
                 ["generate", "--model", "{D}/models/tiny", "--max-tokens", "1000000000", "--prompt", "hi"],
                 ["generate", "--model", "{D}/models/tiny", "--prompt", "a" + bad_utf8],
                 ["generate", "--model", "{D}/models/tiny"], ["generate", "--model", "{D}/models/tiny", "--prompt",
                                                              "x", "--request", "-"],
                 ["generate", "--model", "{D}/models/tiny", "--prompt", "x", "--temperature", "nan"],
                 ["generate", "--model", "{D}/models/tiny", "--prompt", "x", "--logprobs", "21"],
                 ["generate", "--model", "{D}/models/tiny", "--prompt", "x", "--seed", "99999999999999999999"],
                 ["inspect"], ["inspect", "a", "b"], ["inspect", "--json=1", "{D}/models/tiny"],
                 ["tokenize", bad_utf8], ["bench", "machine", "--buffer-mib", "-5"], ["bench", "nosuch"],
                 ["bench", "model", "--model", "{D}/models/tiny", "--steps", "0"],
                 ["bench", "kernels", "--m", "1,,2"], ["no-such-command"],
                 ["serve", "--port", "70000"]):
        c.case("flags " + " ".join(a.replace("{D}/", "") for a in args).replace(bad_utf8, "\\xff"), args, USAGE)
    c.case("flags tokenize --decode 4294967297", ["tokenize", "--decode", "4294967297"], ERROR)
    jsonl = c.file("ids_wrap.jsonl", "[1, 2]\n[4294967297]\n")
    c.case("tokenize --jsonl --decode wrapping id", ["tokenize", "--jsonl", "--decode"], ERROR, stdin=jsonl)
    c.case("tokenize --jsonl deep line", ["tokenize", "--jsonl"], ERROR, stdin=c.file("deep.jsonl", nested(DEEP) + "\n"))
    c.case("tokenize --jsonl not json", ["tokenize", "--jsonl"], ERROR, stdin=c.file("bad.jsonl", "\"ok\"\n{\n"))


def input_files(c):
    """Files that are not what they claim: a directory, a device that never ends, nothing at all."""
    (c.out / "adir").mkdir(exist_ok=True)
    for args in (["tokenize", "--file", "{D}/adir"], ["parse", "{D}/adir"], ["render", "{D}/adir"],
                 ["generate", "--model", "{D}/models/tiny", "--request", "{D}/adir"],
                 ["tokenize", "--tokenizer", "{D}/adir", "x"], ["inspect", "{D}/files/bad.jsonl"],
                 ["tokenize", "--file", "{D}/no/such/file"], ["inspect", "{D}/no-such-dir"],
                 ["generate", "--model", "{D}/no-such-dir", "--prompt", "x"]):
        c.case("file " + " ".join(a.replace("{D}/", "") for a in args), args, ERROR)
    # An endless device must hit the read bound (1 GiB) without holding more than the bound: tokenize reads
    # /dev/zero up to the limit, so it may use about 1 GiB: the RSS bound says so.
    c.case("file tokenize --file /dev/zero", ["tokenize", "--count", "--file", "/dev/zero"], ERROR, rss_mib=1400,
           timeout_s=120, heavy=True)


def protocol_body(protocol, messages_text="hi", tools=None, deep_args=None, **extra):
    """A valid request of each protocol, with optional tools and one tool call whose arguments are deep."""
    if protocol == "chat":
        body = {"model": "m", "messages": [{"role": "user", "content": messages_text}]}
        if deep_args is not None:
            body["messages"] += [{"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": deep_args}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"}]
        if tools is not None:
            body["tools"] = [{"type": "function", "function": {"name": t, "parameters": {"type": "object"}}}
                             for t in tools]
    elif protocol == "responses":
        body = {"model": "m", "input": [{"role": "user", "content": messages_text}]}
        if deep_args is not None:
            body["input"] += [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": deep_args},
                              {"type": "function_call_output", "call_id": "c1", "output": "r"}]
        if tools is not None:
            body["tools"] = [{"type": "function", "name": t, "parameters": {"type": "object"}} for t in tools]
    else:
        body = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": messages_text}]}
        if deep_args is not None:  # Messages carries tool input as an object: the body itself is deep
            body["messages"] += [{"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f",
                                                                    "input": {"x": "DEEP"}}]},
                                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                                               "content": "r"}]}]
        if tools is not None:
            body["tools"] = [{"name": t, "input_schema": {"type": "object"}} for t in tools]
    body.update(extra)
    text = json.dumps(body)
    if protocol == "messages" and deep_args is not None:
        text = text.replace('"DEEP"', deep_args)
    return text


def requests(c):
    """API request bodies for render and generate, per protocol: deep, huge, wrong types, invalid UTF-8."""
    for protocol in ("chat", "responses", "messages"):
        chat = json.loads(protocol_body(protocol))
        max_key = "max_output_tokens" if protocol == "responses" else "max_tokens"  # each protocol's name
        bodies = {
            "deep body": nested(DEEP, '{"a":', "}", "1"),
            "deep extra field": protocol_body(protocol)[:-1] + ', "x": ' + nested(DEEP) + "}",
            "deep tool arguments": protocol_body(protocol, tools=["f"], deep_args=nested(DEEP)),
            "invalid utf-8 body": protocol_body(protocol, "\udcff\udcfe").encode("utf-8", "surrogateescape"),
            "truncated body": protocol_body(protocol)[:30],
            "wrong types": json.dumps(dict(chat, model=5, **{max_key: "x"})),
            "negative max_tokens": json.dumps(dict(chat, **{max_key: -1})),
            "huge max_tokens": json.dumps(dict(chat, **{max_key: 10 ** 30})),
            "nan temperature": protocol_body(protocol)[:-1] + ', "temperature": NaN}',
            "empty": "",
            "100k tools": protocol_body(protocol, tools=[f"t{i}" for i in range(100_000)]),
            "50k duplicate tool names": protocol_body(protocol, tools=["t"] * 50_000),
        }
        for name, body in bodies.items():
            label = f"{protocol} {name}"
            path = c.file("request_" + label.replace(" ", "_") + ".json", body)
            c.seed("recipe_request", label.replace(" ", "_"), body if isinstance(body, bytes) else body.encode())
            # Valid but large requests render fine (exit 0); the hostile ones must be one clean error.
            codes = OK + ERROR if name == "100k tools" else ERROR
            c.case("render " + label, ["render", "--protocol", protocol, path], codes, rss_mib=600,
                   heavy=name == "100k tools" and protocol != "chat")  # one protocol's 100k in CI
            if name in ("deep body", "deep tool arguments", "invalid utf-8 body", "truncated body", "wrong types",
                        "50k duplicate tool names"):
                c.case("generate " + label, ["generate", "--model", "{D}/models/tiny", "--protocol", protocol,
                                             "--request", path], ERROR)
    # A message far longer than the tiny model's context: rejected before anything is allocated for it.
    big = json.dumps({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "word " * 10_000_000}]})
    c.case("generate 50 MB message", ["generate", "--model", "{D}/models/tiny_context",
                                      "--request", c.file("request_50mb.json", big)], ERROR, rss_mib=600,
           timeout_s=180, heavy=True)
    small = json.dumps({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "word " * 20_000}]})
    c.case("generate 100 KB message", ["generate", "--model", "{D}/models/tiny_context",
                                       "--request", c.file("request_100kb.json", small)], ERROR)


def model_outputs(c):
    """Completions for `parse`: deep JSON in tool parameters, invalid UTF-8, a huge run."""
    v4_call = ("<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"false\">"
               + nested(DEEP) + "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>")
    outputs = {"deep tool parameter": v4_call, "invalid utf-8": b"answer \xff\xfe\xfd </think> \xc3",
               "1 MB of one letter": "a" * (1 << 20), "20 MB of one letter": "a" * (20 << 20)}
    for name, text in outputs.items():
        path = c.file("output_" + name.replace(" ", "_") + ".txt", text)
        if len(text) < (1 << 20):
            c.seed("recipe_parse", name.replace(" ", "_"), text if isinstance(text, bytes) else text.encode())
        for protocol in ("chat", "responses", "messages"):
            c.case(f"parse --protocol {protocol} {name}", ["parse", "--protocol", protocol, path], OK + ERROR,
                   rss_mib=900, timeout_s=120, heavy=len(text) > (1 << 20))


def tokenizer_inputs(c):
    # One pre-token piece as long as the input: about 20 bytes of memory per byte of it, and O(n log n).
    c.case("tokenize 20 MB of one letter", ["tokenize", "--count", "--file",
                                            c.file("a20m.txt", "a" * (20 << 20))], OK, rss_mib=750, timeout_s=180,
           heavy=True)
    c.case("tokenize 1 MB of one letter", ["tokenize", "--count", "--file", c.file("a1m.txt", "a" * (1 << 20))], OK,
           rss_mib=120)
    c.case("tokenize 4 MB of spaces", ["tokenize", "--count", "--file", c.file("s4m.txt", " " * (4 << 20))], OK,
           rss_mib=300, timeout_s=120, heavy=True)
    c.case("tokenize 256 KB of spaces", ["tokenize", "--count", "--file", c.file("s256k.txt", " " * (256 << 10))],
           OK, rss_mib=120)
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tokenizer"))
    import tokenizer_data  # noqa: PLC0415
    real = json.loads(tokenizer_data.tokenizer_json("deepseek-v3"))
    model = real["model"]

    def variant(**changes):
        spec = dict(real)
        spec.update(changes)
        return json.dumps(spec, ensure_ascii=False)

    first = next(iter(model["vocab"]))
    docs = {
        "deep": nested(DEEP, '{"x":', "}", "1"),
        "garbage": b"\x00\xff" * 1000,
        "truncated": variant()[:5000],
        "unknown merge": variant(model=dict(model, merges=model["merges"][:10] + ["zzzz qqqq"])),
        "huge id": variant(model=dict(model, vocab=dict(model["vocab"], **{first: 2 ** 40}))),
        "negative added id": variant(added_tokens=real["added_tokens"] + [{"id": -1, "content": "x", "special": True}]),
        "wrong types": variant(model=dict(model, vocab=[1, 2], merges={"a": 1})),
        "no pre_tokenizer": variant(pre_tokenizer=None),
        "empty": "",
    }
    for name, doc in docs.items():
        d = c.out / "tokenizers" / name.replace(" ", "_")
        d.mkdir(parents=True, exist_ok=True)
        (d / "tokenizer.json").write_bytes(doc if isinstance(doc, bytes) else doc.encode())
        if len(doc) < (1 << 20):  # a real vocabulary (7 MB) makes every fuzzer run slow: harness only
            c.seed("tokenizer_json", name.replace(" ", "_"), doc if isinstance(doc, bytes) else doc.encode())
        c.case("tokenizer.json " + name, ["tokenize", "--tokenizer", "{D}/tokenizers/" + d.name, "hello"], ERROR)


def safetensors_bytes(header, data=b""):
    h = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(h)) + h + data


def checkpoints(c, deepinfer):
    """The tiny model, and variants with one thing broken each (config.json, tensors, the index)."""
    models = c.out / "models"
    tiny = models / "tiny"
    if not (tiny / "config.json").exists():
        subprocess.run([deepinfer, "init-model", "--preset", "tiny", "--out", str(tiny)], check=True,
                       stdout=subprocess.DEVNULL)
    config = json.loads((tiny / "config.json").read_text())

    def variant(name, config_value=None, files=None):
        d = models / name
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        for f in tiny.iterdir():
            if f.name != "config.json" and not (files and f.name in files):
                os.symlink(f.resolve(), d / f.name)
        (d / "config.json").write_text(json.dumps(config_value if config_value is not None else config))
        for fname, data in (files or {}).items():
            (d / fname).write_bytes(data)
        return "{D}/models/" + name

    # A small context, for the over-long prompt case.
    variant("tiny_context", dict(config, max_position_embeddings=4096))
    # max_tokens far past the context: generation stops at the context, and KV grows as it is needed (it
    # used to be allocated for prompt + max_tokens up front: 16M tokens of KV).
    variant("tiny_context_256", dict(config, max_position_embeddings=256))
    c.case("generate --max-tokens 2^24 on a 256-token context", ["generate", "--model", "{D}/models/tiny_context_256",
                                                                 "--max-tokens", "16777216", "--prompt", "hi"], OK,
           rss_mib=200)
    bad_configs = {
        "num_hidden_layers -1": dict(config, num_hidden_layers=-1),
        "sliding_window 2^40": dict(config, sliding_window=2 ** 40),
        "sliding_window 2^21": dict(config, sliding_window=2 ** 21),
        "hc_sinkhorn_iters 1e12": dict(config, hc_sinkhorn_iters=10 ** 12),
        "rms_norm_eps negative": dict(config, rms_norm_eps=-1e-6),
        "rope_theta negative": dict(config, rope_theta=-10000.0),
        "eos past vocab": dict(config, eos_token_id=config["vocab_size"]),
        "vocab_size 2^40": dict(config, vocab_size=2 ** 40),
        "hidden_size string": dict(config, hidden_size="64"),
        "nested value": dict(config, rope_scaling=json.loads(nested(500, '{"a":', "}", "1"))),
        "not an object": [1, 2, 3],
    }
    for name, value in bad_configs.items():
        path = variant("config_" + name.replace(" ", "_").replace("^", ""), value)
        c.seed("model_config", name.replace(" ", "_").replace("^", ""), json.dumps(value))
        c.case("config " + name, ["generate", "--model", path, "--prompt", "hi", "--max-tokens", "1"], ERROR)
        c.case("inspect config " + name, ["inspect", "--json", path], OK + ERROR)
    # Raw config text that no JSON builder can hold: 100,000 levels.
    d = models / "config_deep_text"
    variant("config_deep_text")
    (d / "config.json").write_text(nested(DEEP, '{"a":', "}", "1"))
    c.case("config 100k deep", ["generate", "--model", "{D}/models/config_deep_text", "--prompt", "hi"], ERROR)
    c.case("inspect config 100k deep", ["inspect", "{D}/models/config_deep_text"], ERROR)

    shard = sorted(p.name for p in tiny.glob("model-*.safetensors"))[-1]
    real = (tiny / shard).read_bytes()
    (header_len,) = struct.unpack("<Q", real[:8])
    header = json.loads(real[8:8 + header_len])
    name0 = next(k for k in header if k != "__metadata__")
    broken = {
        "truncated file": real[: len(real) // 2],
        "header length huge": struct.pack("<Q", 2 ** 62) + real[8:],
        "header garbage": struct.pack("<Q", 16) + b"\xff" * 16 + real[8 + 16:],
        "header deep": safetensors_bytes(nested(DEEP, '{"a":', "}", "1").encode()),
        "offsets past end": safetensors_bytes(dict(header, **{name0: dict(header[name0], data_offsets=[0, 2 ** 40])}),
                                              real[8 + header_len:]),
        "shape overflow": safetensors_bytes(dict(header, **{name0: dict(header[name0], shape=[2 ** 40, 2 ** 40])}),
                                            real[8 + header_len:]),
        "unknown dtype": safetensors_bytes(dict(header, **{name0: dict(header[name0], dtype="Q7")}),
                                           real[8 + header_len:]),
        "empty file": b"",
    }
    for name, data in broken.items():
        path = variant("tensors_" + name.replace(" ", "_"), files={shard: data})
        if len(data) < (1 << 20):
            c.seed("safetensors_header", name.replace(" ", "_"), data)
        c.case("tensors " + name, ["generate", "--model", path, "--prompt", "hi", "--max-tokens", "1"], ERROR)
        c.case("inspect tensors " + name, ["inspect", path], ERROR)
    index = json.loads((tiny / "model.safetensors.index.json").read_text())
    for name, value in {"index deep": nested(DEEP, '{"a":', "}", "1"),
                        "index missing shard": json.dumps(dict(index, weight_map=dict(index["weight_map"],
                                                                                     extra="nope.safetensors"))),
                        "index not object": "[]"}.items():
        path = variant(name.replace(" ", "_"), files={"model.safetensors.index.json": value.encode()})
        c.case("checkpoint " + name, ["inspect", path], ERROR)
        c.case("generate checkpoint " + name, ["generate", "--model", path, "--prompt", "hi"], ERROR)
    # NaN weights load and run (the forward pass stays faithful) with a loud warning at load.
    nan = bytearray(real)
    begin, end = header[name0]["data_offsets"]
    dtype = header[name0]["dtype"]
    pattern = {"BF16": b"\xc0\x7f", "F32": b"\x00\x00\xc0\x7f"}.get(dtype)
    if pattern:
        off = 8 + header_len + begin
        for i in range(off, min(off + end - begin, off + 4096), len(pattern)):
            nan[i:i + len(pattern)] = pattern
        path = variant("tensors_nan", files={shard: bytes(nan)})
        c.case("tensors NaN weights", ["generate", "--model", path, "--prompt", "hi", "--max-tokens", "2"], OK,
               stderr_has="NaN or Inf weights")


def shrink_vocab(tiny, out, vocab=512):
    """A copy of the tiny model with a 512-token vocabulary (every tensor with a first dimension of the
    vocabulary size cut to its first rows), about 1.3 MB instead of 37: small enough to fuzz."""
    config = json.loads((tiny / "config.json").read_text())
    old = config["vocab_size"]
    config.update(vocab_size=vocab, eos_token_id=1, bos_token_id=0)
    files = {"config.json": json.dumps(config).encode(),
             "model.safetensors.index.json": (tiny / "model.safetensors.index.json").read_bytes()}
    for shard in sorted(tiny.glob("model-*.safetensors")):
        raw = shard.read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + n])
        data, new_header, at = [], {}, 0
        for name, t in header.items():
            if name == "__metadata__":
                new_header[name] = t
                continue
            begin, end = t["data_offsets"]
            chunk = raw[8 + n + begin:8 + n + end]
            if t["shape"] and t["shape"][0] == old:
                chunk = chunk[:len(chunk) // old * vocab]
                t = dict(t, shape=[vocab] + t["shape"][1:])
            new_header[name] = dict(t, data_offsets=[at, at + len(chunk)])
            data.append(chunk)
            at += len(chunk)
        files[shard.name] = safetensors_bytes(new_header, b"".join(data))
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
    return files


def pack_checkpoint(files):
    out = bytearray(b"DICKPT1\n")
    for name, data in files.items():
        out += name.encode() + b"\n" + str(len(data)).encode() + b"\n" + data
    return bytes(out)


def checkpoint_seeds(c):
    """Seeds for fuzz_model_checkpoint: the micro model packed, and one broken variant per kind."""
    files = shrink_vocab(c.out / "models" / "tiny", c.out / "models" / "micro")
    c.seed("model_checkpoint", "micro", pack_checkpoint(files))
    config = json.loads(files["config.json"])
    c.seed("model_checkpoint", "micro_bad_layers", pack_checkpoint(dict(files, **{
        "config.json": json.dumps(dict(config, num_hidden_layers=-1)).encode()})))
    shard = sorted(k for k in files if k.endswith(".safetensors"))[0]
    c.seed("model_checkpoint", "micro_truncated", pack_checkpoint(dict(files, **{shard: files[shard][:1000]})))
    c.seed("model_checkpoint", "micro_no_index", pack_checkpoint(
        {k: v for k, v in files.items() if k != "model.safetensors.index.json"}))
    c.case("generate micro model", ["generate", "--model", "{D}/models/micro", "--prompt-ids", "1,2,3",
                                    "--max-tokens", "2"], OK)


def router_inputs(c):
    """What `router` reads from other processes and files: lease files in --unit-dir (deep, huge, invalid
    UTF-8, wrong types, hostile URLs, thousands of files) and Mooncake traces for --plan. Every broken lease
    is skipped with a warning (the live ones still count); a broken trace is one clean error."""
    good = {"format": "deepinfer-unit-lease/1", "unit_id": "unit-1-8001", "url": "http://127.0.0.1:8001",
            "models": ["tiny"], "version": "0.1.0", "pid": 1, "heartbeat_unix_ms": 2 ** 49, "ttl_ms": 3000,  # far ahead: live
            "load": {"running": 1, "waiting": 0, "queued_prefill_tokens": 0, "max_num_seqs": 8, "kv_usage": 0.1,
                     "step_cost": [0.002, 0.0002, 0.0001, 1e-09, 0.0001], "calibrated": True}}
    leases = {
        "deep": nested(DEEP, '{"a":', "}", "1"),
        "deep within the size bound": nested(10_000, '{"a":', "}", "1"),
        "deep load": json.dumps(dict(good, load=None))[:-1].replace('"load": null', '"load": ' + nested(DEEP)) + "}",
        "huge": '{"format": "deepinfer-unit-lease/1", "unit_id": "' + "u" * (8 << 20) + '"}',
        "invalid utf-8": json.dumps(good).encode().replace(b"unit-1", b"unit-\xff\xfe"),
        "wrong types": json.dumps(dict(good, pid="x", ttl_ms=-5, models="tiny")),
        "hostile url": json.dumps(dict(good, url="http://" + "a" * 300 + ":99999/../../x")),
        "nan step cost": json.dumps(good).replace("0.002", "NaN"),
        "huge counts": json.dumps(dict(good, load=dict(good["load"], running=10 ** 30, kv_usage=1e308))),
        "truncated": json.dumps(good)[:40],
    }
    trace = "\n".join(json.dumps({"timestamp": i * 100, "input_length": 600, "output_length": 50,
                                  "hash_ids": [i % 3, 7 + i]}) for i in range(20)) + "\n"
    trace_path = c.file("trace_ok.jsonl", trace)
    for name, body in leases.items():
        d = c.out / "files" / ("leases_" + name.replace(" ", "_"))
        d.mkdir(parents=True, exist_ok=True)
        (d / "unit-1-8001.lease").write_bytes(body if isinstance(body, bytes) else body.encode("utf-8"))
        if len(body) < (1 << 20):
            c.seed("router_lease", "lease_" + name.replace(" ", "_"), body if isinstance(body, bytes) else body.encode())
        c.case(f"router --plan lease {name}", ["router", "--plan", "--trace", trace_path, "--unit-dir",
                                               "{D}/files/" + d.name], OK + ERROR)
    many = c.out / "files" / "leases_20k_files"
    many.mkdir(parents=True, exist_ok=True)
    for i in range(20_000):
        (many / f"unit-{i}.lease").write_text(json.dumps(dict(good, unit_id=f"unit-{i}", url=f"http://127.0.0.1:{1024 + i}")))
    c.case("router --plan 20k lease files", ["router", "--plan", "--trace", trace_path, "--unit-dir",
                                             "{D}/files/" + many.name], OK + ERROR, rss_mib=600)
    traces = {
        "deep line": nested(DEEP, '{"a":', "}", "1") + "\n",
        "50 MB line": '{"timestamp": 0, "hash_ids": [' + "1," * (25 << 20) + '1]}\n',
        "wrong types": json.dumps({"timestamp": "x", "input_length": -1, "output_length": 1e300, "hash_ids": "no"}) + "\n",
        "invalid utf-8": b'{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "\xff": 1}\n',
        "huge lengths": json.dumps({"timestamp": 0, "input_length": 10 ** 15, "output_length": 10 ** 15,
                                    "hash_ids": [1]}) + "\n",
        "empty": "",
    }
    for name, body in traces.items():
        path = c.file("trace_" + name.replace(" ", "_") + ".jsonl", body)
        c.case(f"router --plan trace {name}", ["router", "--plan", "--trace", path, "--units", "4"], ERROR,
               rss_mib=600, heavy=name == "50 MB line")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deepinfer", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    c = Corpus(args.out)
    checkpoints(c, args.deepinfer)
    checkpoint_seeds(c)
    cli_flags(c)
    input_files(c)
    requests(c)
    model_outputs(c)
    tokenizer_inputs(c)
    router_inputs(c)
    c.write()
    print(f"{len(c.cases)} cases in {args.out}")


if __name__ == "__main__":
    main()
