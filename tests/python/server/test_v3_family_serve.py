"""`deepinfer serve` on DeepSeek-V3-family checkpoints end to end: random `tiny` models from `init-model --arch v3`
(MLA, grouped sigmoid routing) and `--arch v3.2` (V3 plus the lightning indexer, index_topk 64), both in the V3.2
prompt format that config.json's model_type selects, through the official `openai` SDK. For both: a chat
completion, a strict-schema response (valid only because of the grammar mask: the weights are random) and a
prefix-cache hit whose tokens and logprobs are bit-identical to the cold run's (on V3.2 past index_topk, so both
prefix groups, the MLA latents and the FP8 indexer keys, come from the cache). V3.2: `generate` takes the same
encoding from config.json. V3: the same hit from the persistent KV store after a restart (its one prefix group
of MLA latents needs nothing else to resume), and speculative verify steps with rollback, synthetic or drafted
by the MTP layer, giving speculation-off's tokens and logprobs."""
import json
import subprocess

import jsonschema
import openai
import pytest
from server_process import Server, wait_for

WEATHER = {"type": "object", "additionalProperties": False, "required": ["city", "sunny"],
           "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                          "sunny": {"type": "boolean"}}}
# arch: (init-model seed, served model name, the architecture config.json names)
FAMILY = {"v3": (9, "tiny-v3", "DeepseekV3ForCausalLM"), "v3.2": (11, "tiny-v32", "DeepseekV32ForCausalLM")}


class Checkpoints:
    """One random checkpoint and one plain server per architecture, made on first use and shared by the module."""

    def __init__(self, binary, tmp_path_factory):
        self.binary, self.tmp, self.models, self.servers = binary, tmp_path_factory, {}, {}

    def model(self, arch):
        if arch not in self.models:
            out = self.tmp.mktemp(arch) / "model"
            proc = subprocess.run([self.binary, "init-model", "--arch", arch, "--preset", "tiny", "--seed",
                                   str(FAMILY[arch][0]), "--out", str(out)], capture_output=True, text=True,
                                  timeout=300)
            assert proc.returncode == 0, proc.stderr
            assert "random weights" in proc.stdout
            self.models[arch] = str(out)
        return self.models[arch]

    def server(self, arch):
        if arch not in self.servers:
            self.servers[arch] = Server(self.binary, self.model(arch), "--served-model-name", FAMILY[arch][1],
                                        "--max-model-len", "2048", "--kv-cache-memory-bytes", str(64 << 20))
        return self.servers[arch]

    def stop(self):
        for s in self.servers.values():
            assert s.stop() == 0, "\n".join(s.log[-50:])


@pytest.fixture(scope="module")
def checkpoints(deepinfer_bin, tmp_path_factory):
    c = Checkpoints(deepinfer_bin, tmp_path_factory)
    yield c
    c.stop()


@pytest.fixture(scope="module", params=sorted(FAMILY))
def arch(request):
    return request.param


@pytest.fixture
def server(checkpoints, arch):
    return checkpoints.server(arch)


@pytest.fixture
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


def test_config_names_the_architecture_and_the_v32_encoding(checkpoints, arch, server):
    config = json.loads(open(checkpoints.model(arch) + "/config.json").read())
    assert config["model_type"] == {"v3": "deepseek_v3", "v3.2": "deepseek_v32"}[arch]
    if arch == "v3.2":
        assert config["index_topk"] == 64
    assert any(" model " in line and "encoding=v3.2" in line for line in server.log), server.log
    assert any(f"architecture={FAMILY[arch][2]}" in line for line in server.log), server.log


def test_chat_completion(oai, arch):
    r = oai.chat.completions.create(model=FAMILY[arch][1], messages=[{"role": "user", "content": "Hello there"}],
                                    max_tokens=8, temperature=0, extra_body={"thinking": {"type": "disabled"}})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 8
    assert r.usage.prompt_tokens > 3


def test_strict_schema_response_validates(oai, arch):
    r = oai.chat.completions.create(
        model=FAMILY[arch][1], messages=[{"role": "user", "content": "Weather in json?"}], max_tokens=200,
        temperature=1.0, seed=3,
        response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER, "strict": True}},
        extra_body={"thinking": {"type": "disabled"}})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), WEATHER)


def test_prefix_cache_hit_is_bit_identical(server, arch):
    # 300 prompt ids: two full 128-position blocks come from the cache on the second run (on V3.2 every
    # position from 64 on attends only the indexer's selection).
    ids = [(i * 7919 + 13) % 120000 + 100 for i in range(300)]
    body = {"model": FAMILY[arch][1], "prompt": ids, "max_tokens": 12, "temperature": 0, "logprobs": 3}
    status, _, cold = server.json("POST", "/v1/completions", body)
    assert status == 200, cold
    status, _, warm = server.json("POST", "/v1/completions", body)
    assert status == 200, warm
    assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] == 299  # the blocks, then the prompt's snapshot
    assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
    assert warm["choices"][0]["logprobs"] == cold["choices"][0]["logprobs"]


def test_v32_generate_renders_as_the_server_does(deepinfer_bin, checkpoints):
    # Without --model-version, `generate` takes the encoding from config.json's model_type as `serve` does: the
    # server's prompt length, and the run of an explicit --model-version v3.2.
    model = checkpoints.model("v3.2")
    oai = openai.OpenAI(base_url=checkpoints.server("v3.2").url + "/v1", api_key="none", max_retries=0)
    served = oai.chat.completions.create(model=FAMILY["v3.2"][1], messages=[{"role": "user", "content": "Hello there"}],
                                         max_tokens=6, temperature=0, extra_body={"thinking": {"type": "disabled"}})

    def generate(*extra):
        proc = subprocess.run([deepinfer_bin, "generate", "--model", model, "--prompt", "Hello there",
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


def test_v3_kv_store_hit_after_restart_is_bit_identical(deepinfer_bin, checkpoints, tmp_path):
    model, name = checkpoints.model("v3"), FAMILY["v3"][1]
    store = tmp_path / "kv"
    ids = [(i * 104729 + 7) % 120000 + 100 for i in range(300)]
    body = {"model": name, "prompt": ids, "max_tokens": 8, "temperature": 0, "logprobs": 2}
    first = Server(deepinfer_bin, model, "--served-model-name", name, "--kv-store", str(store))
    try:
        status, _, cold = first.json("POST", "/v1/completions", body)
        assert status == 200, cold
        assert wait_for(lambda: first.metrics().get("deepinfer:kvstore_writes_total", 0) >= 2)
    finally:
        assert first.stop() == 0, "\n".join(first.log[-50:])
    again = Server(deepinfer_bin, model, "--served-model-name", name, "--kv-store", str(store))
    try:
        status, _, warm = again.json("POST", "/v1/completions", body)
        assert status == 200, warm
        assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] == 299  # and the stored prompt snapshot
        assert again.metrics()["deepinfer:kvstore_hit_blocks_total"] == 2
        assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
        assert warm["choices"][0]["logprobs"] == cold["choices"][0]["logprobs"]
    finally:
        assert again.stop() == 0, "\n".join(again.log[-50:])


@pytest.mark.parametrize("config", [
    # Drafts of the recorded answer, each slot kept with falling probability: verify steps accept some and
    # roll the rest back (Truncate).
    '{"method": "synthetic", "num_speculative_tokens": 3, "synthetic_acceptance_rates": [0.8, 0.5, 0.3]}',
    # The tiny preset carries one MTP layer: method mtp loads it and drafts with it (random weights: few
    # drafts are accepted).
    '{"method": "mtp", "num_speculative_tokens": 3}',
], ids=["synthetic", "mtp"])
def test_v3_speculation_equals_speculation_off(deepinfer_bin, checkpoints, config):
    name = FAMILY["v3"][1]
    body = {"model": name, "prompt": [5, 77, 1023, 9, 42, 300, 17], "max_tokens": 24, "temperature": 0,
            "logprobs": 2, "ignore_eos": True}
    status, _, expected = checkpoints.server("v3").json("POST", "/v1/completions", body)
    assert status == 200, expected
    spec = Server(deepinfer_bin, checkpoints.model("v3"), "--served-model-name", name, "--speculative-config", config)
    try:
        for _ in range(2):
            status, _, got = spec.json("POST", "/v1/completions", body)
            assert status == 200, got
            assert got["choices"] == expected["choices"]
        m = spec.metrics()
        label = f'model_name="{name}"'
        drafted = m[f"deepinfer:spec_decode_num_draft_tokens_total{{{label}}}"]
        assert drafted > 0
        if "synthetic" in config:
            assert drafted > m[f"deepinfer:spec_decode_num_accepted_tokens_total{{{label}}}"] > 0
    finally:
        assert spec.stop() == 0, "\n".join(spec.log[-50:])
