"""`deepinfer bench serve` against the real `deepinfer serve`, given as both systems: every phase counts
every token, completions rounds count inter-token latency by token, the table has the peer's column and
ratios, and the warm round's re-sent prompts resume from cached window state (the server's window-hit
counter), whose misses the server reports by cause; the same with the two systems' workloads interleaved."""
import json
import subprocess

import pytest

from conftest import make_tiny_model
from server_process import Server


@pytest.mark.parametrize("interleave", [[], ["--interleave"]], ids=["in_turn", "interleaved"])
def test_bench_serve_cold_warm_and_agent_rounds_beside_a_peer(deepinfer_bin, tmp_path, interleave):
    model = make_tiny_model(deepinfer_bin, tmp_path / "tiny", seed=5)
    server = Server(deepinfer_bin, model, "--served-model-name", "tiny-serve")
    out = tmp_path / "serve.json"
    try:
        before = server.metrics()
        proc = subprocess.run(
            [deepinfer_bin, "bench", "serve", "--url", server.url, "--peer-url", server.url, "--peer-name", "again",
             "--concurrency", "1,2", "--prompt-tokens", "300", "--output-tokens", "4", "--agent",
             "--agent-sessions", "2", "--agent-turns", "2", "--system-tokens", "300", "--message-tokens", "5",
             "--think-s", "0,0", "--json", str(out)] + interleave,
            capture_output=True, text=True, timeout=120)
        after = server.metrics()
    finally:
        assert server.stop() == 0
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(out.read_text())
    for system in ("deepinfer", "again"):
        phases = figures[system]["phases"]
        # Two requests per client per round; ignore_eos: exactly 4 tokens each.
        for label, requests in (("cold x1", 2), ("warm x1", 2), ("cold x2", 4), ("warm x2", 4),
                                ("agent turn 1", 2), ("agent turns 2+", 2)):
            assert phases[label]["requests"] == requests and phases[label]["errors"] == 0, (system, label, phases)
            assert phases[label]["short_outputs"] == 0, (system, label, phases)
            assert 0 < phases[label]["ttft_p50_ms"] <= phases[label]["ttft_p99_ms"], (system, label, phases)
            assert phases[label]["output_tokens_per_s"] > 0, (system, label, phases)
            # Completions streams report each event's token ids: ITL by token; chat streams do not: by event.
            counted_by = "event" if label.startswith("agent") else "token"
            assert phases[label]["itl_counted_by"] == counted_by, (system, label, phases)
    header = next(line for line in proc.stdout.splitlines() if line.startswith("phase"))
    assert header.split() == ["phase", "figure", "deepinfer", "again", "ratio"]
    assert any(line.rstrip().endswith("x") for line in proc.stdout.splitlines() if "TTFT p50" in line)
    # Prompts of 300 words are at least two full blocks: the first pass's warm prompts (2 + 4) and second
    # agent turns (2) resume from the cache, and so does every request of the second pass, which re-sends the
    # first pass's prompts (2 + 2 + 4 + 4 + 2 + 2); interleaved, the second system's requests of each phase
    # come right after the first's, re-sending them. A re-sent prompt resumes from its own snapshot (one hit, to
    # its last token); a longer one from a finished sequence's snapshot or from the cached window blocks.
    def resumed(m):
        return sum(m.get(f'deepinfer:{name}{{model_name="tiny-serve"}}', 0)
                   for name in ("snapshot_hits_total", "window_block_hits_total"))
    assert resumed(after) - resumed(before) >= 8 + 16
    for cause in ("evicted", "expired", "never_cached"):
        assert f'deepinfer:window_misses_total{{model_name="tiny-serve",cause="{cause}"}}' in after
