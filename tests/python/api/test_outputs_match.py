"""LLM.generate and LLM.chat give what `deepinfer generate` and `deepinfer serve` give for the same request
bodies and seeds: the package writes each call as the protocol body the server receives, and these tests
send exactly those bodies to the CLI and to a server on the same checkpoint."""
import json
import subprocess

import pytest
from api_fixtures import api_model, deepinfer, llm  # noqa: F401 (fixtures)
from server.server_process import Server

CHAT = [[{"role": "user", "content": "Name three prime numbers."}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why is the sky blue?"}]]


@pytest.fixture(scope="module")
def server(deepinfer_bin, api_model):
    s = Server(deepinfer_bin, api_model, "--kv-cache-memory-bytes", str(64 << 20))
    yield s
    s.stop()


def strip_ids(body):
    """A response without what differs between two runs of the same request: its id and time."""
    body = dict(body)
    body.pop("id", None)
    body.pop("created", None)
    body.pop("system_fingerprint", None)
    for choice in body.get("choices", []):
        for call in (choice.get("message") or {}).get("tool_calls") or []:
            call.pop("id", None)
    return body


def cli_bodies(deepinfer_bin, model, bodies, tmp_path):
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(b + "\n" for b in bodies))
    proc = subprocess.run([deepinfer_bin, "generate", "--model", model, "--kv-cache-memory-bytes", str(64 << 20),
                           "--requests", str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("temperature, seed", [(0.0, 0), (0.9, 1234)], ids=["greedy", "seeded"])
def test_chat_equals_the_cli_and_the_server(deepinfer, llm, deepinfer_bin, api_model, server, tmp_path,
                                            temperature, seed):
    params = deepinfer.SamplingParams(temperature=temperature, seed=seed, max_tokens=12)
    outs = llm.chat(CHAT, params)
    bodies = [llm._chat_body(c, params, None, None, False, None) for c in CHAT]
    for out, cli, body in zip(outs, cli_bodies(deepinfer_bin, api_model, bodies, tmp_path), bodies):
        status, _, served = server.json("POST", "/v1/chat/completions", body)
        assert status == 200, served
        assert strip_ids(out.response) == strip_ids(cli) == strip_ids(served)
        message = served["choices"][0]["message"]
        assert out.outputs[0].text == (message["content"] or "")
        assert out.outputs[0].reasoning_content == message.get("reasoning_content")
        assert out.outputs[0].finish_reason == served["choices"][0]["finish_reason"]
        assert len(out.outputs[0].token_ids) == served["usage"]["completion_tokens"]
        assert len(out.prompt_token_ids) == served["usage"]["prompt_tokens"]


@pytest.mark.parametrize("temperature, seed", [(0.0, 0), (0.8, 7)], ids=["greedy", "seeded"])
def test_token_id_prompts_equal_generate_prompt_ids(deepinfer, llm, deepinfer_bin, api_model, temperature, seed):
    prompts = [[5, 17, 300, 42], [9, 9, 9]]
    params = deepinfer.SamplingParams(temperature=temperature, seed=seed, max_tokens=10, logprobs=2)
    outs = llm.generate(prompts, params)
    args = [deepinfer_bin, "generate", "--model", api_model, "--max-tokens", "10", "--temperature", str(temperature),
            "--seed", str(seed), "--logprobs", "2", "--kv-cache-memory-bytes", str(64 << 20)]
    for p in prompts:
        args += ["--prompt-ids", ",".join(map(str, p))]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for out, line, prompt in zip(outs, proc.stdout.splitlines(), prompts):
        cli = json.loads(line)["outputs"][0]
        assert out.prompt_token_ids == prompt
        assert out.outputs[0].token_ids == cli["token_ids"]
        # The sampled token's logprob and the alternatives, to the float32 the engine computed.
        for mine, theirs in zip(out.outputs[0].logprobs, cli["logprobs"]):
            assert mine[theirs["id"]].logprob == pytest.approx(theirs["logprob"], abs=1e-6)
            for alternative in theirs["top_logprobs"]:
                assert mine[alternative["id"]].logprob == pytest.approx(alternative["logprob"], abs=1e-6)


def test_text_prompts_equal_the_servers_completions(deepinfer, llm, server):
    params = deepinfer.SamplingParams(temperature=0.7, seed=3, max_tokens=8, n=2, stop=["\n\n"])
    outs = llm.generate(["The capital of France is", "1, 2, 3,"], params)
    for out, prompt in zip(outs, ["The capital of France is", "1, 2, 3,"]):
        status, _, served = server.json("POST", "/v1/completions", llm._completions_body(prompt, params, False))
        assert status == 200, served
        assert strip_ids(out.response) == strip_ids(served)
        assert [o.text for o in out.outputs] == [c["text"] for c in served["choices"]]
        assert [o.finish_reason for o in out.outputs] == [c["finish_reason"] for c in served["choices"]]


def test_structured_generate_equals_the_servers_completions(deepinfer, llm, server):
    # The constraint applies from the first generated token of a raw prompt, as on the server.
    regex = deepinfer.StructuredOutputsParams(regex="[0-9]{3}-[a-z]{2}")
    params = deepinfer.SamplingParams(temperature=1.0, seed=5, max_tokens=20, structured_outputs=regex)
    out = llm.generate(["Code:"], params)[0]
    status, _, served = server.json("POST", "/v1/completions", llm._completions_body("Code:", params, False))
    assert status == 200, served
    assert served["choices"][0]["text"] == out.outputs[0].text
    assert strip_ids(out.response) == strip_ids(served)
    text = out.outputs[0].text
    assert len(text) == 6 and text[:3].isdigit() and text[3] == "-" and text[4:].isalpha(), text
