"""Two fresh processes on the same model answer the same request with the same tokens: `temperature: 0`
(exactly greedy: every token its step's most likely one, lowest id among equals) and seeded sampling,
through `deepinfer serve` (chat completions with thinking disabled, legacy completions) and through
`deepinfer generate`. Each process starts cold, so nothing but the request decides the tokens.

Note: in thinking mode DeepSeek's API (and deepseek-recipe) forces temperature 1, so a thinking-mode request
with `temperature: 0` and no seed is sampled with a random seed: two processes answer it differently by design
(the response reports no seed; give one to repeat it)."""
import json
import pathlib
import subprocess
import sys

import pytest
from conftest import make_tiny_model

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "server"))

from server_process import Server  # noqa: E402

MODEL = "tiny-determinism"


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=3)


def chat(content, **extra):
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": 24,
            "logprobs": True, "top_logprobs": 2, **extra}


REQUESTS = [
    ("/v1/chat/completions", chat("Tell me about the sea.", temperature=0, thinking={"type": "disabled"})),
    ("/v1/chat/completions", chat("Tell me about the sea.", temperature=1, seed=7, thinking={"type": "disabled"})),
    ("/v1/chat/completions", chat("Tell me about the sea.", temperature=0, seed=9)),  # thinking: forced to 1
    ("/v1/completions", {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 24, "temperature": 0,
                         "logprobs": 2}),
    ("/v1/completions", {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 24, "temperature": 0.8,
                         "top_p": 0.9, "seed": 5, "n": 2, "logprobs": 1}),
]


def answers(deepinfer_bin, model):
    """The bodies' choices (tokens, logprobs, finish) of every request, run one after another on a fresh
    server (a second request may hit the first's cached prefix: that must not change its tokens either)."""
    s = Server(deepinfer_bin, model, "--served-model-name", MODEL, "--max-model-len", "4096",
               "--kv-cache-memory-bytes", str(256 << 20))
    try:
        out = []
        for path, body in REQUESTS:
            status, _, reply = s.json("POST", path, body)
            assert status == 200, reply
            out.append(reply["choices"])
        return out
    finally:
        assert s.stop() == 0, "\n".join(s.log[-50:])


def test_two_server_processes_give_identical_tokens(deepinfer_bin, tiny_model):
    first = answers(deepinfer_bin, tiny_model)
    second = answers(deepinfer_bin, tiny_model)
    for (path, body), a, b in zip(REQUESTS, first, second):
        assert a == b, f"{path} {json.dumps(body)}"
    # temperature 0 is exactly greedy: each sampled token is its step's most likely one.
    greedy_chat = first[0][0]["logprobs"]["content"]
    assert len(greedy_chat) > 0
    for entry in greedy_chat:
        assert entry["logprob"] == entry["top_logprobs"][0]["logprob"]
    greedy_text = first[3][0]["logprobs"]
    assert len(greedy_text["tokens"]) > 0
    for token, logprob, top in zip(greedy_text["tokens"], greedy_text["token_logprobs"], greedy_text["top_logprobs"]):
        assert logprob == max(top.values())
    # Seeded sampling still samples (n = 2 outputs differ) and the same seed repeats in a fresh process.
    assert first[4][0]["text"] != first[4][1]["text"]


def generate(binary, model, *args):
    proc = subprocess.run([binary, "generate", "--model", model, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_two_generate_processes_give_identical_tokens(deepinfer_bin, tiny_model):
    prompt = ["--prompt-ids", "5,6,7,8,9,10,11,12", "--prompt-ids", "5,6,7,8,40", "--max-tokens", "16",
              "--logprobs", "2"]
    greedy = [generate(deepinfer_bin, tiny_model, *prompt, "--temperature", "0") for _ in range(2)]
    assert greedy[0] == greedy[1]
    for line in greedy[0].strip().split("\n"):
        for lp in json.loads(line)["outputs"][0]["logprobs"]:
            assert lp["id"] == lp["top_logprobs"][0]["id"]
    sampled = [generate(deepinfer_bin, tiny_model, *prompt, "--temperature", "1", "--top-k", "20", "--seed", "4")
               for _ in range(2)]
    assert sampled[0] == sampled[1]
    assert sampled[0] != greedy[0]
    # A chat body through generate: greedy with thinking off, in two processes.
    body = json.dumps(chat("Tell me about the sea.", temperature=0, thinking={"type": "disabled"}))
    bodies = [subprocess.run([deepinfer_bin, "generate", "--model", tiny_model, "--request", "-"], input=body,
                             capture_output=True, text=True, timeout=300) for _ in range(2)]
    assert bodies[0].returncode == 0, bodies[0].stderr
    assert json.loads(bodies[0].stdout)["choices"] == json.loads(bodies[1].stdout)["choices"]
