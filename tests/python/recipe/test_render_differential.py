"""Differential test of `deepinfer render` against the live deepseek-recipe package (and, when
DEEPINFER_DSV32_ENCODER points at DeepSeek's encoding_dsv32.py, against V3.2's reference encoder).

Unlike the committed golden corpus, the requests here come from a fresh seed each run of the generator
(DEEPINFER_RENDER_SEED, default 1004), so the live oracle is re-asked on requests the goldens never saw.
"""
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "recipe"))

gen = pytest.importorskip("gen_requests", reason="deepseek_recipe is not installed")


def _body(request):
    return request if isinstance(request, str) else json.dumps(request, ensure_ascii=False)


def _render_all(deepinfer_bin, requests, version, protocol="chat"):
    stdin = "".join(_body(r).replace("\n", " ") + "\n" for r in requests)
    protocol = gen.GENERATOR_PROTOCOLS[protocol]
    out = subprocess.run([deepinfer_bin, "render", "--jsonl", "--protocol", protocol, "--model-version", version],
                         input=stdin.encode(), capture_output=True, check=True).stdout.decode()
    return [json.loads(line) for line in out.split("\n") if line]


def _outcome(got):
    """Our result in the golden's terms: the prompt, or the status and the error object's message."""
    if "prompt" in got:
        return got["prompt"]
    error = json.loads(got["error"]["body"])["error"]
    return {"error": got["error"]["status"], "message": error.get("message")}


def _same(want, ours, compare_messages):
    if isinstance(want, str) or isinstance(ours, str):
        return want == ours
    if want["error"] != ours["error"]:
        return False
    if not compare_messages or want.get("message") is None:
        return True
    # The oracle names an arbitrary call when several lack an output (deviations.json).
    mask = lambda m: re.sub(r"No tool output found for tool call .*", "No tool output found for tool call X.", m)
    return mask(want["message"]) == mask(ours["message"])


def _compare(results, requests, oracle, compare_messages=True, skip=lambda request: False):
    mismatches = []
    for i, (got, request) in enumerate(zip(results, requests)):
        if skip(request):
            continue
        want = oracle(request)
        ours = _outcome(got)
        if not _same(want, ours, compare_messages):
            mismatches.append((i, request, want, ours))
    return mismatches


DEVIATION_TAGS = {d["tag"] for d in json.loads((ROOT / "tests/recipe/data/render/deviations.json").read_text())["deviations"]
                  if "tag" in d}


@pytest.mark.parametrize("protocol", ["chat", "anthropic", "responses", "responses_features", "chat_edge",
                                      "responses_history", "messages_edge"])
@pytest.mark.parametrize("version", ["v4", "v4.1"])
def test_render_matches_live_oracle(deepinfer_bin, protocol, version):
    import random
    rng = random.Random(int(os.environ.get("DEEPINFER_RENDER_SEED", "1004")))
    requests, deviating = [], set()
    for i in range(120):
        request = gen.REQUEST_GENERATORS[protocol](rng)
        if isinstance(request, tuple):
            request, tags = request
            if DEVIATION_TAGS & set(tags):
                deviating.add(i)
        requests.append(request)
    results = _render_all(deepinfer_bin, requests, version, protocol)
    assert len(results) == len(requests)
    # Messages errors are written in Anthropic's shape, where the message also names the parameter.
    mismatches = _compare(results, requests, lambda r: gen.render_oracle(protocol, r, version)[0],
                          compare_messages=gen.GENERATOR_PROTOCOLS[protocol] != "anthropic",
                          skip=lambda r: requests.index(r) in deviating)
    assert not mismatches, "first mismatch: %r" % (mismatches[0],)


@pytest.mark.optional("DeepSeek-V3.2's reference encoding_dsv32.py is not part of this repository")
@pytest.mark.parametrize("protocol", ["chat", "anthropic", "responses"])
def test_render_v32_matches_reference_encoder(deepinfer_bin, protocol):
    path = os.environ.get("DEEPINFER_DSV32_ENCODER")
    if not path:
        pytest.skip("set DEEPINFER_DSV32_ENCODER to DeepSeek-V3.2's encoding/encoding_dsv32.py")
    spec = importlib.util.spec_from_file_location("encoding_dsv32", path)
    dsv32 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dsv32)
    import random
    rng = random.Random(int(os.environ.get("DEEPINFER_RENDER_SEED", "1004")))
    requests = [gen.REQUEST_GENERATORS[protocol](rng) for _ in range(200)]
    requests = [r[0] if isinstance(r, tuple) else r for r in requests]  # V3.2's reference knows no tags
    results = _render_all(deepinfer_bin, requests, "v3.2", protocol)
    mismatches = _compare(results, requests, lambda r: gen.render_v32(dsv32, protocol, r), compare_messages=False)
    assert not mismatches, "first mismatch: %r" % (mismatches[0],)


def test_render_cli_errors(deepinfer_bin, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": "m", "messages": []}')
    proc = subprocess.run([deepinfer_bin, "render", str(bad)], capture_output=True)
    assert proc.returncode == 1
    assert b"Empty input messages" in proc.stderr
    proc = subprocess.run([deepinfer_bin, "render", "--model-version", "v9", str(bad)], capture_output=True)
    assert proc.returncode == 2
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                "thinking": {"type": "disabled"}}))
    proc = subprocess.run([deepinfer_bin, "render", str(good)], capture_output=True, check=True)
    # deepseek-recipe renders this request (as DeepSeek-V4-Pro) to exactly these bytes.
    assert proc.stdout.decode() == "<\uff5cbegin\u2581of\u2581sentence\uff5c><\uff5cUser\uff5c>hi<\uff5cAssistant\uff5c></think>"


@pytest.mark.parametrize("version", ["v4", "v4.1"])
def test_render_ids_find_the_tokenizer_like_other_commands(deepinfer_bin, tmp_path, version):
    """`render --ids` needs no --tokenizer: it loads the builtin vocabulary of the model version (as
    tokenize, init-model and bench do); the ids are the oracle's own encoder's with the upstream file."""
    sys.path.insert(0, str(ROOT / "tools" / "tokenizer"))
    import tokenizer_data
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "see <｜User｜> this"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]}
    request = tmp_path / "r.json"
    request.write_text(json.dumps(body))
    got = json.loads(subprocess.run([deepinfer_bin, "render", "--ids", "--model-version", version, str(request)],
                                    capture_output=True, check=True).stdout)
    name = "deepseek-v4.1" if version == "v4.1" else "deepseek-v4"
    tok = gen.dr.Tokenizer.from_file(tokenizer_data.tokenizer_path(name, str(tmp_path)))
    options = gen.dr.ConversionOptions()
    if version == "v4.1":  # V4.1's vocabulary spells the image placeholder <｜deepseek_image｜>
        options = options.with_special_tokens(gen.dr.SpecialTokens(image="<\uff5cdeepseek_image\uff5c>"))
    converted, _ = gen.convert("chat", body, version, options)
    encoder = gen.dr.DeepseekV41Encoding() if version == "v4.1" else gen.dr.DeepseekV4Encoding()
    assert got == encoder.with_tokenizer(tok).encode(converted.conversation)
    # The same with the vocabulary named, as a builtin or as a file.
    named = subprocess.run([deepinfer_bin, "render", "--ids", "--model-version", version, "--tokenizer", name, str(request)],
                           capture_output=True, check=True).stdout
    assert json.loads(named) == got
