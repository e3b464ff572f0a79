"""`deepinfer bench router`: the simulator's JSON on a hand-checked Mooncake-format trace and a synthetic one, and
malformed traces refused with one line and a non-zero exit."""
import json
import subprocess

import pytest

from conftest import deepinfer_binaries

BINARIES = deepinfer_binaries()

# Three requests far enough apart that each is done before the next arrives (a 1536-token prompt takes about
# 0.3 s on the default step cost): request 2 repeats request 1's two blocks, request 3 its first one.
TRACE = [
    {"timestamp": 0, "input_length": 1024, "output_length": 4, "hash_ids": [1, 2]},
    {"timestamp": 1000, "input_length": 1536, "output_length": 4, "hash_ids": [1, 2, 3]},
    {"timestamp": 2000, "input_length": 600, "output_length": 2, "hash_ids": [1, 9]},
]


def bench(binary, *args):
    return subprocess.run([binary, "bench", "router", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("binary", BINARIES)
def test_mooncake_trace(binary, tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps(line) for line in TRACE) + "\n")
    proc = bench(binary, "--trace", str(trace), "--units", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["trace"]["requests"] == 3
    # Oracle: request 2 hits 2 blocks (1024 tokens), request 3 one block (512) of 3160 prompt tokens.
    assert out["trace"]["oracle_hit_rate"] == pytest.approx(1536 / 3160)
    runs = {(r["policy"], r["store"]): r for r in out["runs"]}
    assert len(runs) == 10
    for (policy, store), run in runs.items():
        # With the store every unit reaches every earlier prompt: the oracle's hits, whatever the routing.
        if store:
            assert run["hit_rate"] == pytest.approx(1536 / 3160), policy
        assert run["slo_attainment"] == 1.0, policy
    # Round-robin without the store: request 2 lands on the other unit (no hit), request 3 back on unit 0,
    # which holds block 1.
    assert runs[("round-robin", False)]["hit_rate"] == pytest.approx(512 / 3160)
    assert out["planner"]["prefill_units"] + out["planner"]["decode_units"] == 2
    # The planned 1:1 split replayed: the prefill unit finds every earlier prompt in the store.
    assert out["planner"]["simulated"]["hit_rate"] == pytest.approx(1536 / 3160)
    assert 0 < out["planner"]["simulated"]["decode_busy"] <= 1
    text = bench(binary, "--trace", str(trace), "--units", "2", "--policy", "predicted-ttft", "--store", "on")
    assert text.returncode == 0, text.stderr
    assert "predicted-ttft  on" in text.stdout and "planner: P:D = " in text.stdout


@pytest.mark.parametrize("binary", BINARIES)
def test_synthetic_and_disaggregated(binary):
    proc = bench(binary, "--synthetic", "200", "--rate", "2", "--prefill-units", "1", "--decode-units", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["units"] == {"prefill": 1, "decode": 1}
    for run in out["runs"]:
        assert 0 < run["decode_busy"] <= 1 and run["ttft_p50_ms"] <= run["ttft_p99_ms"]


@pytest.mark.parametrize("binary", BINARIES)
def test_bad_input(binary, tmp_path):
    def one_line_failure(proc, needle, code=1):
        assert proc.returncode == code, proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("deepinfer bench router: "), proc.stderr
        assert needle in proc.stderr, proc.stderr

    trace = tmp_path / "bad.jsonl"
    for line, needle in ((json.dumps(TRACE[0]) + "\n{\"timestamp\": 1", "line 2: invalid JSON"),
                         (json.dumps(dict(TRACE[0], input_length=1 << 40)), "line 1: input_length out of range"),
                         (json.dumps(dict(TRACE[0], hash_ids=[1])), "line 1: hash_ids has 1 ids"),
                         (json.dumps(dict(TRACE[0], output_length="4")), "line 1: output_length is not a number"),
                         ("\n\n", "no requests")):
        trace.write_text(line)
        one_line_failure(bench(binary, "--trace", str(trace)), needle)
    one_line_failure(bench(binary, "--trace", str(tmp_path / "missing.jsonl")), "missing.jsonl")
    one_line_failure(bench(binary, "--synthetic", "5", "--trace", str(trace)), "--trace FILE or --synthetic N", 2)
    one_line_failure(bench(binary, "--synthetic", "5", "--prefill-units", "2"), "both --prefill-units", 2)
    one_line_failure(bench(binary, "--synthetic", "5", "--step-cost", "1,2,3"), "5 comma-separated", 2)
    one_line_failure(bench(binary, "--synthetic", "5", "--output-tokens", "9,3"), "MIN <= MAX", 2)


@pytest.mark.parametrize("binary", BINARIES)
def test_router_plan(binary, tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps(line) for line in TRACE) + "\n")
    proc = subprocess.run([binary, "router", "--plan", "--trace", str(trace), "--units", "4"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    # No unit directory: the default step cost; 4 units split, at least one in each pool.
    assert plan["calibrated_units"] == 0 and plan["units"] == 4 and plan["requests"] == 3
    assert plan["prefill_units"] >= 1 and plan["decode_units"] >= 1
    assert plan["prefill_units"] + plan["decode_units"] == 4
    missing = subprocess.run([binary, "router", "--plan"], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "--plan needs --trace FILE" in missing.stderr


def write_lease(directory, unit_id, step_cost, calibrated, heartbeat_ms):
    lease = {"format": "deepinfer-unit-lease/1", "unit_id": unit_id, "url": "http://127.0.0.1:9", "models": ["m"],
             "version": "0", "pid": 1, "heartbeat_unix_ms": heartbeat_ms, "ttl_ms": 600000,
             "load": {"running": 0, "waiting": 0, "queued_prefill_tokens": 0, "max_num_seqs": 64, "kv_usage": 0,
                      "step_cost": step_cost, "calibrated": calibrated}}
    path = directory / f"{unit_id}.lease"
    path.write_text(json.dumps(lease))
    return path


@pytest.mark.parametrize("binary", BINARIES)
def test_cost_model_from_leases(binary, tmp_path):
    import time
    now = int(time.time() * 1000)
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps(line) for line in TRACE) + "\n")
    units = tmp_path / "units"
    units.mkdir()
    fitted = write_lease(units, "a", [0.01, 0.001, 0, 0, 0], True, now)
    write_lease(units, "b", [1, 1, 1, 1, 1], False, now)  # uncalibrated: counted, its cost not used
    write_lease(units, "c", [0.01, 0.001, 0, 0, 0], True, 0)  # lapsed long ago: left out
    proc = bench(binary, "--trace", str(trace), "--lease", str(fitted), "--json", "--policy", "round-robin")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["step_cost"] == {"source": "lease a", "coefficients": [0.01, 0.001, 0, 0, 0]}
    # Each request alone on its unit, 10 ms a step and 1 ms a token: 1024 tokens in 2 chunks = 1044 ms, 1536 in 3
    # = 1566 ms, 600 in 2 = 620 ms; the median (nearest rank) is 1044 ms.
    assert out["runs"][0]["ttft_p50_ms"] == pytest.approx(1044)
    plan = subprocess.run([binary, "router", "--plan", "--trace", str(trace), "--unit-dir", str(units)],
                          capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    result = json.loads(plan.stdout)
    assert result["units"] == 2 and result["calibrated_units"] == 1
    assert result["step_cost"] == [0.01, 0.001, 0, 0, 0]
    assert result["prefill_units"] == 1 and result["decode_units"] == 1
    uncalibrated = bench(binary, "--trace", str(trace), "--lease", str(units / "b.lease"))
    assert uncalibrated.returncode == 1 and "not calibrated" in uncalibrated.stderr
