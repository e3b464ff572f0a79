"""`deepinfer serve` on a DeepSeek-V3 checkpoint end to end: a random `tiny` V3 model from `init-model --arch v3`
(MLA, grouped sigmoid routing; the V3.2 prompt format that config.json's model_type selects), through the
official `openai` SDK: a chat completion, a strict-schema response (valid only because of the grammar mask:
the weights are random), a prefix-cache hit whose tokens and logprobs are bit-identical to the cold run's, and
the same from the persistent KV store after a restart (V3's one prefix group of MLA latents needs nothing
else to resume), and speculative verify steps with rollback, synthetic or drafted by the MTP layer, giving
speculation-off's tokens and logprobs."""
import json
import subprocess

import jsonschema
import openai
import pytest
from server_process import Server, wait_for

MODEL = "tiny-v3"
WEATHER = {"type": "object", "additionalProperties": False, "required": ["city", "sunny"],
           "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                          "sunny": {"type": "boolean"}}}


@pytest.fixture(scope="module")
def v3_model(deepinfer_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("v3") / "model"
    proc = subprocess.run([deepinfer_bin, "init-model", "--arch", "v3", "--preset", "tiny", "--seed", "9",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "random weights" in proc.stdout
    return str(out)


@pytest.fixture(scope="module")
def server(deepinfer_bin, v3_model):
    s = Server(deepinfer_bin, v3_model, "--served-model-name", MODEL, "--max-model-len", "2048",
               "--kv-cache-memory-bytes", str(64 << 20))
    yield s
    assert s.stop() == 0, "\n".join(s.log[-50:])


@pytest.fixture
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


def test_server_runs_v3_with_the_v32_encoding(server):
    assert any(" model " in line and "encoding=v3.2" in line for line in server.log), server.log
    assert any("architecture=DeepseekV3ForCausalLM" in line for line in server.log), server.log


def test_chat_completion(oai):
    r = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello there"}],
                                    max_tokens=8, temperature=0, extra_body={"thinking": {"type": "disabled"}})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 8
    assert r.usage.prompt_tokens > 3


def test_strict_schema_response_validates(oai):
    r = oai.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Weather in json?"}], max_tokens=200, temperature=1.0,
        seed=3, response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER,
                                                                        "strict": True}},
        extra_body={"thinking": {"type": "disabled"}})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), WEATHER)


def test_prefix_cache_hit_is_bit_identical(server):
    # 300 prompt ids: two full 128-position blocks can come from the cache on the second run.
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


def test_kv_store_hit_after_restart_is_bit_identical(deepinfer_bin, v3_model, tmp_path):
    store = tmp_path / "kv"
    ids = [(i * 104729 + 7) % 120000 + 100 for i in range(300)]
    body = {"model": MODEL, "prompt": ids, "max_tokens": 8, "temperature": 0, "logprobs": 2}
    first = Server(deepinfer_bin, v3_model, "--served-model-name", MODEL, "--kv-store", str(store))
    try:
        status, _, cold = first.json("POST", "/v1/completions", body)
        assert status == 200, cold
        assert wait_for(lambda: first.metrics().get("deepinfer:kvstore_writes_total", 0) >= 2)
    finally:
        assert first.stop() == 0, "\n".join(first.log[-50:])
    again = Server(deepinfer_bin, v3_model, "--served-model-name", MODEL, "--kv-store", str(store))
    try:
        status, _, warm = again.json("POST", "/v1/completions", body)
        assert status == 200, warm
        assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] == 256
        assert again.metrics()["deepinfer:kvstore_hit_blocks_total"] == 2
        assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
        assert warm["choices"][0]["logprobs"] == cold["choices"][0]["logprobs"]
    finally:
        assert again.stop() == 0, "\n".join(again.log[-50:])


def test_speculative_verification_and_rollback_equal_speculation_off(deepinfer_bin, v3_model, server):
    # Drafts of the recorded answer, each slot kept with falling probability: verify steps accept some and
    # roll the rest back (Truncate), and every token and logprob equals the plain server's.
    body = {"model": MODEL, "prompt": [5, 77, 1023, 9, 42, 300, 17], "max_tokens": 24, "temperature": 0,
            "logprobs": 2, "ignore_eos": True}
    status, _, expected = server.json("POST", "/v1/completions", body)
    assert status == 200, expected
    config = ('{"method": "synthetic", "num_speculative_tokens": 3, '
              '"synthetic_acceptance_rates": [0.8, 0.5, 0.3]}')
    spec = Server(deepinfer_bin, v3_model, "--served-model-name", MODEL, "--speculative-config", config)
    try:
        for _ in range(2):
            status, _, got = spec.json("POST", "/v1/completions", body)
            assert status == 200, got
            assert got["choices"] == expected["choices"]
        m = spec.metrics()
        label = f'model_name="{MODEL}"'
        drafted = m[f"deepinfer:spec_decode_num_draft_tokens_total{{{label}}}"]
        accepted = m[f"deepinfer:spec_decode_num_accepted_tokens_total{{{label}}}"]
        assert drafted > accepted > 0
    finally:
        assert spec.stop() == 0, "\n".join(spec.log[-50:])


def test_mtp_speculation_equals_speculation_off(deepinfer_bin, v3_model, server):
    # The tiny preset carries one MTP layer: `--speculative-config` method mtp loads it and drafts with it
    # (random weights: few drafts are accepted), and every token and logprob equals the plain server's.
    body = {"model": MODEL, "prompt": [5, 77, 1023, 9, 42, 300, 17], "max_tokens": 24, "temperature": 0,
            "logprobs": 2, "ignore_eos": True}
    status, _, expected = server.json("POST", "/v1/completions", body)
    assert status == 200, expected
    spec = Server(deepinfer_bin, v3_model, "--served-model-name", MODEL, "--speculative-config",
                  '{"method": "mtp", "num_speculative_tokens": 3}')
    try:
        status, _, got = spec.json("POST", "/v1/completions", body)
        assert status == 200, got
        assert got["choices"] == expected["choices"]
        m = spec.metrics()
        assert m[f'deepinfer:spec_decode_num_draft_tokens_total{{model_name="{MODEL}"}}'] > 0
    finally:
        assert spec.stop() == 0, "\n".join(spec.log[-50:])
