"""`deepinfer serve` on a DeepSeek-V4.1 checkpoint end to end: a random `tiny` V4.1 model from `init-model --arch
v4.1` (FP8 layout, the builtin V4.1 tokenizer), served with the encoding its config.json names. The prompt ids
the server computes are compared with deepseek-recipe's own V4.1 encoder over the same tokenizer file (the
oracle), scripted output goes back through the V4.1 detokenizer and the codec's parser, and a greedy completion
equals `deepinfer generate` on the same checkpoint."""
import json
import subprocess
import sys

import deepseek_recipe as dr
import openai
import pytest
from conftest import ROOT
from server_process import Server

sys.path.insert(0, str(ROOT / "tools" / "tokenizer"))
import tokenizer_data  # noqa: E402

MODEL = "tiny-v41"
SYSTEM = "<\uff5cSystem\uff5c>"


@pytest.fixture(scope="module")
def v41_model(deepinfer_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("v41") / "model"
    proc = subprocess.run([deepinfer_bin, "init-model", "--arch", "v4.1", "--preset", "tiny", "--format", "fp8",
                           "--seed", "5", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return str(out)


@pytest.fixture(scope="module")
def server(deepinfer_bin, v41_model):
    s = Server(deepinfer_bin, v41_model, "--served-model-name", MODEL, "--enable-test-hooks", "--max-model-len",
               "2048", "--kv-cache-memory-bytes", str(128 << 20))
    yield s
    assert s.stop() == 0, "\n".join(s.log[-50:])


@pytest.fixture(scope="module")
def oracle_encoder(tmp_path_factory):
    path = tokenizer_data.tokenizer_path("deepseek-v4.1", tmp_path_factory.mktemp("tok"))
    return dr.DeepseekV41Encoding().with_tokenizer(dr.Tokenizer.from_file(str(path)))


def test_server_reports_the_v41_encoding(server):
    # The start-up line names the encoding chosen from config.json (model_type deepseek_v41), and the engine
    # runs the V4.1 architecture.
    assert any(" model " in line and "encoding=v4.1" in line for line in server.log), server.log
    assert any("architecture=DeepseekV41ForCausalLM" in line for line in server.log), server.log


CONVERSATIONS = [
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}],
    [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
     {"role": "user", "content": "And 3+3? Answer in 日本語."}],
]


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_prompt_ids_equal_deepseek_recipe_v41(server, oracle_encoder, messages):
    status, _, body = server.json("POST", "/tokenize", {"model": MODEL, "messages": messages})
    assert status == 200, body
    conv = dr.ChatCompletionRequest({"model": "DeepSeek-V4.1-Flash", "messages": messages}).convert(
        dr.ConversionOptions()).conversation
    expected = oracle_encoder.encode(conv)
    assert body["tokens"] == expected
    if messages[0]["role"] == "system":
        assert 128799 in body["tokens"]  # V4.1's <｜System｜>


def test_scripted_reply_through_the_v41_detokenizer(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)
    reasoning, answer = "Think: 2 and 2.", "Vier — четыре, 四."
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "2+2?"}],
                                       extra_body={"deepinfer_test_output": reasoning + "</think>" + answer})
    choice = r.choices[0]
    assert choice.message.content == answer
    assert choice.message.model_extra["reasoning_content"] == reasoning
    assert choice.finish_reason == "stop"


def test_greedy_completion_equals_generate(server, deepinfer_bin, v41_model):
    ids = [0, 5, 77, 1023, 9]
    out = json.loads(subprocess.run([deepinfer_bin, "generate", "--model", v41_model, "--prompt-ids",
                                     ",".join(map(str, ids)), "--max-tokens", "6"],
                                    check=True, capture_output=True, text=True, timeout=300).stdout)
    expected = out["outputs"][0]
    status, _, body = server.json("POST", "/v1/completions", {"model": MODEL, "prompt": ids, "max_tokens": 6,
                                                              "temperature": 0})
    assert status == 200, body
    assert body["choices"][0]["text"] == expected["text"]
    assert body["usage"]["completion_tokens"] == len(expected["token_ids"]) == 6
