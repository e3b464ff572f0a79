"""`deepinfer eplb` end to end: the example of deepseek-ai/EPLB's README reproduced exactly, a recorded
routing trace read back, and bad input refused with one line and a non-zero exit (Release and ASan builds)."""
import json
import subprocess

import pytest

from conftest import deepinfer_binaries

BINARIES = deepinfer_binaries()

# deepseek-ai/EPLB README: weight, num_replicas 16, num_groups 4, num_nodes 2, num_gpus 8, and the printed
# phy2log, copied as data.
README_WEIGHT = [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
                 [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]
README_PHY2LOG = [[5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1],
                  [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1]]
README_ARGS = ["--replicas", "16", "--groups", "4", "--nodes", "2", "--ranks", "8"]


def run(binary, *args):
    return subprocess.run([binary, "eplb", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("binary", BINARIES)
def test_readme_example(binary):
    proc = run(binary, "--weights", json.dumps(README_WEIGHT), *README_ARGS, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert list(out) == ["phy2log", "log2phy", "logcnt"]
    assert out["phy2log"] == README_PHY2LOG
    for layer, row in enumerate(README_PHY2LOG):
        # logcnt counts each expert's slots; log2phy lists them, -1 padded to the largest count.
        assert out["logcnt"][layer] == [row.count(e) for e in range(12)]
        for e in range(12):
            slots = [s for s in out["log2phy"][layer][e] if s != -1]
            assert sorted(slots) == [p for p, x in enumerate(row) if x == e]
            assert len(out["log2phy"][layer][e]) == 2


@pytest.mark.parametrize("binary", BINARIES)
def test_trace_file(binary, tmp_path):
    # Two recorded steps whose sum is the README's weight give the README's placement.
    half = [[w // 2 for w in row] for row in README_WEIGHT]
    rest = [[w - h for w, h in zip(row, hrow)] for row, hrow in zip(README_WEIGHT, half)]
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"loads": half}) + "\n" + json.dumps({"loads": rest}) + "\n")
    proc = run(binary, "--weights-file", str(trace), *README_ARGS, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["phy2log"] == README_PHY2LOG
    text = run(binary, "--weights-file", str(trace), *README_ARGS)
    assert text.returncode == 0 and text.stdout.startswith("policy: hierarchical")


@pytest.mark.parametrize("binary", BINARIES)
@pytest.mark.parametrize("weights,extra,needle", [
    ("[[1, 2, 3]]", ["--replicas", "4", "--ranks", "3"], "multiple of ranks"),
    ("[[1, 2, 3, 4]]", ["--replicas", "4", "--ranks", "2", "--groups", "3"], "divide the experts"),
    ("[[1, 2, 3, 4]]", ["--replicas", "4", "--ranks", "2", "--nodes", "3"], "nodes must be"),
    ("[[1, -2, 3, 4]]", ["--replicas", "4", "--ranks", "2"], "finite number"),
    ("[[1, NaN, 3, 4]]", ["--replicas", "4", "--ranks", "2"], "invalid JSON"),
    ("[[1, 2, 3, 4], [1]]", ["--replicas", "4", "--ranks", "2"], "layer 1 has 1 loads"),
    ("[[1, 2, 3, 4]", ["--replicas", "4", "--ranks", "2"], "invalid JSON"),
    ("[[1, 2, 3, 4]]", ["--replicas", "2", "--ranks", "2"], "at least the experts"),
    ("[" + ",".join(["[1]"] * 1025) + "]", ["--replicas", "1", "--ranks", "1"], "1025 layers"),
])
def test_bad_input(binary, weights, extra, needle):
    proc = run(binary, "--weights", weights, *extra, "--json")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("deepinfer eplb: "), proc.stderr
    assert needle in proc.stderr


@pytest.mark.parametrize("binary", BINARIES)
def test_usage_errors(binary, tmp_path):
    assert run(binary, "--replicas", "4", "--ranks", "2").returncode == 2  # no loads
    assert run(binary, "--weights", "[[1]]", "--replicas", "0", "--ranks", "1").returncode == 2
    missing = run(binary, "--weights-file", str(tmp_path / "absent.json"), "--replicas", "1", "--ranks", "1")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
