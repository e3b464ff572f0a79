"""Speculative decoding through the CLI: a malformed --speculative-config is one error line and a non-zero exit
on generate, serve and bench engine; a method the model cannot run is refused at start; a server with the
synthetic drafter answers a repeated request with the same body as a server without it, and /metrics counts
its drafts as vLLM names them, and the steps and positions scheduled verification trims."""
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "server"))
from conftest import make_tiny_model  # noqa: E402
from server_process import Server  # noqa: E402

MODEL = "tiny-spec"


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=23)


@pytest.mark.parametrize("config,message", [
    ('{"method": "eagle", "num_speculative_tokens": 3}', 'unknown method "eagle"'),
    ('{"method": "ngram", "num_speculative_tokens": 0}', "must be in [1, 16], got 0"),
    ('{"method": "ngram", "num_speculative_tokens": "3"}', "must be an integer"),
    ('{"method": "ngram", "num_speculative_tokens": 3', "invalid JSON"),
])
@pytest.mark.parametrize("command", [["generate", "--prompt-ids", "5,6,7"], ["serve", "--port", "0"],
                                     ["bench", "engine", "--workloads", "none", "--skip-goals"]])
def test_malformed_config_is_one_line_and_a_non_zero_exit(deepinfer_bin, tiny_model, command, config, message):
    model = ["--model", tiny_model] if command[0] != "serve" else [tiny_model]
    proc = subprocess.run([deepinfer_bin, *command, *model, "--speculative-config", config], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "--speculative-config" in lines[0] and message in lines[0], lines[0]


def test_a_method_the_model_cannot_run_is_refused_at_start(deepinfer_bin, tiny_model):
    proc = subprocess.run([deepinfer_bin, "generate", "--model", tiny_model, "--prompt-ids", "5,6,7",
                           "--speculative-config", '{"method": "dspark", "num_speculative_tokens": 2}'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert 'method "dspark" needs a model loaded with DSpark draft layers' in proc.stderr, proc.stderr


def test_served_outputs_equal_speculation_off_and_metrics_count_drafts(deepinfer_bin, tiny_model):
    body = {"model": MODEL, "prompt": "one two three four five six seven", "max_tokens": 24, "temperature": 0,
            "logprobs": 2, "ignore_eos": True}
    plain = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL)
    try:
        status, _, expected = plain.json("POST", "/v1/completions", body)
        assert status == 200, expected
        assert "deepinfer:spec_decode_num_drafts_total" not in " ".join(plain.metrics())
    finally:
        assert plain.stop() == 0
    config = '{"method": "synthetic", "num_speculative_tokens": 3}'
    spec = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--speculative-config", config)
    try:
        # The first answer is recorded; the second is verified against drafts of that recording.
        for _ in range(2):
            status, _, got = spec.json("POST", "/v1/completions", body)
            assert status == 200, got
            assert got["choices"] == expected["choices"]
        m = spec.metrics()
        label = f'model_name="{MODEL}"'
        drafts = m[f"deepinfer:spec_decode_num_drafts_total{{{label}}}"]
        drafted = m[f"deepinfer:spec_decode_num_draft_tokens_total{{{label}}}"]
        accepted = m[f"deepinfer:spec_decode_num_accepted_tokens_total{{{label}}}"]
        # 23 tokens after the first, at most 4 per verify step: at least 6 drafts, all accepted.
        assert drafts >= 6 and drafted == accepted > 0
        per_pos = [m[f'deepinfer:spec_decode_num_accepted_tokens_per_pos_total{{{label},position="{i}"}}']
                   for i in range(3)]
        assert sum(per_pos) == accepted and per_pos[0] == drafts
    finally:
        assert spec.stop() == 0


def test_scheduled_verification_keeps_outputs_and_counts_its_trims(deepinfer_bin, tiny_model):
    body = {"model": MODEL, "prompt": "one two three four five six seven", "max_tokens": 24, "temperature": 0,
            "ignore_eos": True}
    config = '{"method": "synthetic", "num_speculative_tokens": 3, "scheduled_verification": true}'
    spec = Server(deepinfer_bin, tiny_model, "--served-model-name", MODEL, "--speculative-config", config)
    try:
        # The first answer has no drafts (it is recorded), so it is plain decoding's; the second verifies.
        status, _, first = spec.json("POST", "/v1/completions", body)
        assert status == 200, first
        status, _, second = spec.json("POST", "/v1/completions", body)
        assert status == 200, second
        assert second["choices"] == first["choices"]
        m = spec.metrics()
        label = f'model_name="{MODEL}"'
        # The budgets are measured in turn: the full block (3) twice, then plain decoding, whose step verifies
        # none of the 3 positions a whole draft would have (its draft is skipped); every such step trims one
        # position at least.
        steps = m[f"deepinfer:spec_decode_scheduled_steps_total{{{label}}}"]
        trimmed = m[f"deepinfer:spec_decode_trimmed_positions_total{{{label}}}"]
        assert steps >= 1 and trimmed >= 3 and trimmed >= steps
    finally:
        assert spec.stop() == 0


def test_mtp_without_the_layer_is_refused_in_one_line(deepinfer_bin):
    # The V4.1 fixture has no draft layers at all (num_nextn_predict_layers 0).
    fixture = pathlib.Path(__file__).resolve().parents[2] / "model" / "data" / "v41_tiny_a_bf16"
    proc = subprocess.run([deepinfer_bin, "generate", "--model", str(fixture), "--prompt-ids", "5,6,7",
                           "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 2}'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert 'method "mtp" needs the model\'s draft layers' in lines[0], lines[0]


def test_mtp_generates_what_speculation_off_generates(deepinfer_bin, tiny_model):
    def generate(*extra):
        proc = subprocess.run([deepinfer_bin, "generate", "--model", tiny_model, "--prompt-ids", "5,6,7,5,6,7",
                               "--max-tokens", "12", "--ignore-eos", *extra], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout
    assert generate("--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}') == generate()


@pytest.mark.parametrize("value", ["0", "1,x", "", "1,,4", "300"])
def test_bench_spec_concurrency_refuses_bad_lists_in_one_line(deepinfer_bin, tiny_model, value):
    proc = subprocess.run([deepinfer_bin, "bench", "engine", "--model", tiny_model, "--workloads", "none", "--skip-goals",
                           "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}',
                           "--spec-concurrency", value], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--spec-concurrency" in lines[0], proc.stderr
