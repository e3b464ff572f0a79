"""`deepinfer bench ep --simulate`: its JSON figures against hand-derived values, a model's config.json and a
recorded routing trace as inputs, and bad input refused with one line and a non-zero exit."""
import json
import subprocess

import pytest

from conftest import ROOT, deepinfer_binaries

BINARIES = deepinfer_binaries()
# Small synthetic routing, so that a run takes well under a second.
QUICK = ["--balance-tokens-per-rank", "64", "--balance-layers", "2", "--window-steps", "2", "--eval-steps", "1"]


def bench(binary, *args):
    return subprocess.run([binary, "bench", "ep", "--simulate", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("binary", BINARIES)
def test_v4_flash_figures(binary):
    proc = bench(binary, "--preset", "v4-flash", "--ep", "1,4", "--json", *QUICK)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["model"] == "DeepSeek-V4-Flash" and out["moe_layers"] == 43 and out["experts"] == 256
    one, four = out["rows"]
    # EP1: everything local, no exchange.
    assert one["remote_bytes_per_token_per_layer"] == 0 and one["a2a_us_per_layer"] == 0
    # EP4 (tests/parallel/ep_simulator_test.cpp derives it): 3.3021 ranks a token, 13,996.0 B out and
    # 27,050.7 B back per token per layer.
    assert four["ranks_per_token"] == pytest.approx(3.3021, abs=1e-4)
    assert four["bytes_per_token_per_layer"] == pytest.approx(41046.7, abs=0.1)
    assert four["redundant_experts"] == 4 and four["eplb_policy"] == "hierarchical"
    assert four["balance_with_eplb"] < four["balance_without_eplb"]
    assert four["step_ms_with_eplb"] < four["step_ms_without_eplb"]


@pytest.mark.parametrize("binary", BINARIES)
def test_model_config_and_trace(binary, tmp_path):
    model = ROOT / "tests" / "model" / "data" / "v4_mixed"
    # A trace of 8 experts in 1 layer: two steps of the same skew; the balancer plans on the first.
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps({"loads": [[60, 20, 10, 10, 5, 5, 5, 5]]}) for _ in range(2)) + "\n")
    proc = bench(binary, "--model", str(model), "--ep", "2,4", "--trace", str(trace), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["experts"] == 8 and out["moe_layers"] == 5 and out["routing"] == {"trace_steps": 2}
    for row in out["rows"]:
        assert row["balance_with_eplb"] <= row["balance_without_eplb"]
    text = bench(binary, "--model", str(model), "--ep", "2", "--trace", str(trace))
    assert text.returncode == 0 and "EP" in text.stdout


@pytest.mark.parametrize("binary", BINARIES)
def test_bad_input(binary, tmp_path):
    def one_line_failure(proc, needle):
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("deepinfer bench ep: "), proc.stderr
        assert needle in proc.stderr

    one_line_failure(bench(binary, "--preset", "v4-flash", "--ep", "2", "--num-redundant-experts", "3", *QUICK),
                     "not a multiple of the ranks")
    one_line_failure(bench(binary, "--preset", "v4-flash", "--ep", "512", *QUICK), "ranks must be in")
    bad_trace = tmp_path / "bad.jsonl"
    bad_trace.write_text('{"loads": [[1, 2]]}\n{"loads": [[1, -2]]}\n')
    one_line_failure(bench(binary, "--preset", "v4-flash", "--trace", str(bad_trace)), "trace line 2")
    wrong_width = tmp_path / "wide.jsonl"
    wrong_width.write_text('{"loads": [[1, 2, 3]]}\n')
    one_line_failure(bench(binary, "--preset", "v4-flash", "--trace", str(wrong_width)), "3 experts per layer")
    one_line_failure(bench(binary, "--model", str(tmp_path / "absent")), "absent")
    usage = subprocess.run([binary, "bench", "ep"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "--simulate" in usage.stderr
