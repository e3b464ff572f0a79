"""`deepinfer generate` on the engine: a JSONL batch under continuous batching (one body per line, in input
order, equal to each request run alone), raw token ids with sampling options, logprobs in protocol bodies,
and seeds that make sampled runs repeatable."""
import json
import subprocess

import pytest
from conftest import make_tiny_model


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=5)


def run(binary, model, *args, stdin=None):
    return subprocess.run([binary, "generate", "--model", model, *args], input=stdin, capture_output=True,
                          text=True, timeout=300)


def chat(content, **extra):
    return {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 12, **extra}


def test_jsonl_batch_answers_each_line_as_if_alone(deepinfer_bin, tiny_model, tmp_path):
    requests = [chat("one", seed=1), chat("two two", seed=2, temperature=0.7),
                {"model": "m", "messages": []},  # invalid: its line carries the error body
                chat("three three three", seed=3, thinking={"type": "disabled"})]
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in requests) + "\n\n")
    proc = run(deepinfer_bin, tiny_model, "--requests", str(path), "--max-num-batched-tokens", "37")
    assert proc.returncode == 1, proc.stderr  # one line failed
    lines = proc.stdout.strip().split("\n")
    assert len(lines) == 4
    bodies = [json.loads(line) for line in lines]
    assert "error" in bodies[2]
    for i in (0, 1, 3):
        alone = run(deepinfer_bin, tiny_model, "--request", "-", stdin=json.dumps(requests[i]))
        assert alone.returncode == 0, alone.stderr
        expected = json.loads(alone.stdout)
        assert bodies[i]["choices"] == expected["choices"], f"line {i}"
        assert bodies[i]["usage"] == expected["usage"]


def test_logprobs_in_a_chat_body(deepinfer_bin, tiny_model):
    proc = run(deepinfer_bin, tiny_model, "--request", "-",
               stdin=json.dumps(chat("hi", logprobs=True, top_logprobs=3, thinking={"type": "disabled"})))
    assert proc.returncode == 0, proc.stderr
    content = json.loads(proc.stdout)["choices"][0]["logprobs"]["content"]
    assert content, "logprobs: true must not come back null"
    for entry in content:
        assert entry["logprob"] <= 0
        assert len(entry["top_logprobs"]) == 3
        assert entry["top_logprobs"][0]["logprob"] >= entry["top_logprobs"][-1]["logprob"]


def ids(*values):
    return ",".join(str(v) for v in values)


def test_prompt_ids_greedy_sampled_and_n(deepinfer_bin, tiny_model):
    greedy = run(deepinfer_bin, tiny_model, "--prompt-ids", ids(5, 6, 7, 8), "--prompt-ids", ids(9, 10),
                 "--max-tokens", "6", "--logprobs", "2")
    assert greedy.returncode == 0, greedy.stderr
    rows = [json.loads(line) for line in greedy.stdout.strip().split("\n")]
    assert [r["prompt_tokens"] for r in rows] == [4, 2]
    out = rows[0]["outputs"][0]
    assert len(out["token_ids"]) == 6 and out["finish_reason"] == "length"
    # Greedy: each token is its step's most likely one.
    assert all(lp["id"] == lp["top_logprobs"][0]["id"] for lp in out["logprobs"])

    sampled = ["--prompt-ids", ids(5, 6, 7, 8), "--max-tokens", "6", "--temperature", "1", "--n", "3"]
    a = run(deepinfer_bin, tiny_model, *sampled, "--seed", "11")
    b = run(deepinfer_bin, tiny_model, *sampled, "--seed", "11")
    c = run(deepinfer_bin, tiny_model, *sampled, "--seed", "12")
    assert a.returncode == b.returncode == c.returncode == 0
    assert a.stdout == b.stdout
    outputs = json.loads(a.stdout)["outputs"]
    assert len(outputs) == 3 and len({tuple(o["token_ids"]) for o in outputs}) > 1
    assert json.loads(c.stdout)["outputs"] != outputs

    # A stop id ends the output before it.
    first = out["token_ids"]
    stopped = run(deepinfer_bin, tiny_model, "--prompt-ids", ids(5, 6, 7, 8), "--max-tokens", "6",
                  "--stop-id", str(first[2]))
    stop_out = json.loads(stopped.stdout)["outputs"][0]
    assert stop_out["finish_reason"] == "stop"
    assert stop_out["token_ids"] == first[:first.index(first[2])]


def test_bad_generate_arguments(deepinfer_bin, tiny_model):
    assert run(deepinfer_bin, tiny_model, "--prompt-ids", "1,x").returncode == 2
    assert run(deepinfer_bin, tiny_model, "--prompt", "x", "--prompt-ids", "1").returncode == 2
    assert run(deepinfer_bin, tiny_model, "--prompt", "x", "--n", "2").returncode == 2
    huge = run(deepinfer_bin, tiny_model, "--prompt-ids", "999999999")
    assert huge.returncode == 1 and "vocabulary" in huge.stderr
    assert len(huge.stderr.strip().splitlines()) <= 3
