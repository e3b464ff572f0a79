"""`deepinfer serve` on a DeepSeek-V3.2 checkpoint end to end: a random `tiny` V3.2 model from `init-model --arch
v3.2` (V3 plus the lightning indexer, index_topk 64; the V3.2 prompt format), through the official `openai` SDK:
a chat completion (and `generate`, which takes the same encoding from config.json), a strict-schema response (valid only because of the grammar mask: the weights are random),
and a prefix-cache hit past index_topk (both prefix groups, the MLA latents and the FP8 indexer keys, come from
the cache) whose tokens and logprobs are bit-identical to the cold run's."""
import json
import subprocess

import jsonschema
import openai
import pytest
from server_process import Server

MODEL = "tiny-v32"
WEATHER = {"type": "object", "additionalProperties": False, "required": ["city", "sunny"],
           "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                          "sunny": {"type": "boolean"}}}


@pytest.fixture(scope="module")
def v32_model(deepinfer_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("v32") / "model"
    proc = subprocess.run([deepinfer_bin, "init-model", "--arch", "v3.2", "--preset", "tiny", "--seed", "11",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "DeepSeek-V3.2" in proc.stdout and "random weights" in proc.stdout
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "deepseek_v32" and config["index_topk"] == 64
    return str(out)


@pytest.fixture(scope="module")
def server(deepinfer_bin, v32_model):
    s = Server(deepinfer_bin, v32_model, "--served-model-name", MODEL, "--max-model-len", "2048",
               "--kv-cache-memory-bytes", str(64 << 20))
    yield s
    assert s.stop() == 0, "\n".join(s.log[-50:])


@pytest.fixture
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


def test_server_runs_v32_with_its_encoding(server):
    assert any(" model " in line and "encoding=v3.2" in line for line in server.log), server.log
    assert any("architecture=DeepseekV32ForCausalLM" in line for line in server.log), server.log


def test_chat_completion(oai):
    r = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello there"}],
                                    max_tokens=8, temperature=0, extra_body={"thinking": {"type": "disabled"}})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 8
    assert r.usage.prompt_tokens > 3


def test_generate_renders_as_the_server_does(deepinfer_bin, v32_model, oai):
    # Without --model-version, `generate` takes the encoding from config.json's model_type as `serve` does: the
    # server's prompt length, and the run of an explicit --model-version v3.2.
    served = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello there"}],
                                         max_tokens=6, temperature=0, extra_body={"thinking": {"type": "disabled"}})

    def generate(*extra):
        proc = subprocess.run([deepinfer_bin, "generate", "--model", v32_model, "--prompt", "Hello there",
                               "--max-tokens", "6", "--temperature", "0", *extra],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    default, explicit = generate("--no-thinking"), generate("--no-thinking", "--model-version", "v3.2")
    assert default["usage"]["prompt_tokens"] == served.usage.prompt_tokens
    assert default["usage"] == explicit["usage"]
    assert default["choices"] == explicit["choices"]
    # In thinking mode V4's encoding adds its reasoning-effort preamble; V3.2's does not.
    assert generate()["usage"]["prompt_tokens"] == served.usage.prompt_tokens
    assert generate("--model-version", "v4")["usage"]["prompt_tokens"] > served.usage.prompt_tokens + 50


def test_strict_schema_response_validates(oai):
    r = oai.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Weather in json?"}], max_tokens=200, temperature=1.0,
        seed=3, response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER,
                                                                        "strict": True}},
        extra_body={"thinking": {"type": "disabled"}})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), WEATHER)


def test_prefix_cache_hit_past_index_topk_is_bit_identical(server):
    # 300 prompt ids: two full 128-position blocks come from the cache on the second run, and every position
    # from 64 on attends only the indexer's selection.
    ids = [(i * 7919 + 13) % 120000 + 100 for i in range(300)]
    body = {"model": MODEL, "prompt": ids, "max_tokens": 12, "temperature": 0, "logprobs": 3}
    status, _, cold = server.json("POST", "/v1/completions", body)
    assert status == 200, cold
    status, _, warm = server.json("POST", "/v1/completions", body)
    assert status == 200, warm
    assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] == 256
    assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
    assert warm["choices"][0]["logprobs"] == cold["choices"][0]["logprobs"]
