"""`deepinfer serve` as a parallel unit of 2 ranks with expert parallelism on one machine (oversubscribed), started as
`serve --data-parallel-size 2`, which runs a real `mpirun -n 2 deepinfer serve ...` itself. Rank 0 serves HTTP and
places the requests on both ranks (per-rank counters on /metrics, with the experts' load per rank); greedy chat
completions, streamed and not, equal a single-process server's on the same tiny checkpoint, logprobs bit for bit;
the load balancer swaps expert placements while it serves; the ranks read KV blocks another server wrote to a
shared store; a client that goes away aborts its request on its rank; SIGTERM ends every rank. Release build only (Open MPI's own
allocations read as leaks under ASan); about 9 s."""
import http.client
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading

import pytest

from conftest import ROOT, make_tiny_model

sys.path.insert(0, str(ROOT / "tests" / "python" / "server"))
from server_process import Server, wait_for  # noqa: E402

# tests/parallel/mpi_env.sh: root allowed, more ranks than cores, shared memory without the single-copy path.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_MCA_btl": "self,vader",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}
# Greedy: thinking mode would sample. Small pools: three processes load the model at once. A generous exchange deadline: a loaded machine must
# not end the unit (the drills test the deadline).
SERVE_ARGS = ["--served-model-name", "tiny", "--no-thinking", "--kv-cache-memory-bytes", str(64 << 20), "--max-model-len", "512",
              "--ep-timeout-s", "30"]
PROMPTS = ["Hello there", "What is two plus two?", "Name a colour.", "Tell me a story about a cat"]
LONG_PROMPT = " ".join(f"item {i}," for i in range(90))  # a few full KV blocks



@pytest.fixture(scope="module")
def needs_mpi(deepinfer_bin):
    """Open MPI's mpirun and the MPI module built beside the binary (both where Open MPI is installed)."""
    if shutil.which("mpirun") is None or not (pathlib.Path(deepinfer_bin).parent / "libdeepinfer_mpi.so").exists():
        pytest.skip("needs Open MPI (mpirun) and the MPI module libdeepinfer_mpi.so")


@pytest.fixture(scope="module")
def model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("unit") / "tiny", seed=3)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A KV store the single process writes and the unit reads."""
    return str(tmp_path_factory.mktemp("unit") / "store")


@pytest.fixture(scope="module")
def single(deepinfer_bin, model, store):
    """One process's answers to PROMPTS, and to LONG_PROMPT (whose KV blocks it writes to the store)."""
    s = Server(deepinfer_bin, model, *SERVE_ARGS, "--kv-store", store)
    try:
        out = answers(s, concurrent=False)
        long = chat(s, LONG_PROMPT, stream=False)
        written = s.metrics()["deepinfer:kvstore_writes_total"]
    finally:
        assert s.stop() == 0
    assert all(text and len(logprobs) == 8 for text, _, logprobs in out), out
    assert written > 0
    return {"answers": out, "long": long}


@pytest.fixture(scope="module")
def want(single):
    return single["answers"]


def chat(server, prompt, stream):
    """(text, finish_reason, logprobs): the logprobs as printed, so equal means bit-identical floats."""
    body = {"model": "tiny", "messages": [{"role": "user", "content": prompt}], "max_tokens": 8,
            "temperature": 0, "stream": stream, "ignore_eos": True, "logprobs": True, "top_logprobs": 2}
    status, _, payload = server.request("POST", "/v1/chat/completions", body)
    assert status == 200, payload
    if not stream:
        choice = json.loads(payload)["choices"][0]
        return choice["message"]["content"], choice["finish_reason"], choice["logprobs"]["content"]
    text, finish, logprobs = "", None, []
    for line in payload.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            choice = json.loads(line[6:])["choices"]
            if choice:
                text += choice[0]["delta"].get("content") or ""
                finish = choice[0].get("finish_reason") or finish
                logprobs += (choice[0].get("logprobs") or {}).get("content") or []
    return text, finish, logprobs


def answers(server, concurrent):
    """Each prompt's (content, finish_reason), non-streamed and streamed; with `concurrent`, all at once."""
    jobs = [(p, stream) for p in PROMPTS for stream in (False, True)]
    out = [None] * len(jobs)

    def run(i):
        out[i] = chat(server, *jobs[i])

    if concurrent:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    else:
        for i in range(len(jobs)):
            run(i)
    return out


def placed(server):
    m = server.metrics()
    return [m.get(f'deepinfer_unit_rank_requests_placed_total{{rank="{r}"}}', 0) for r in range(2)]


def check_unit(unit, want):
    # One at a time (an idle unit places requests in turn), then all at once (both ranks busy together).
    assert answers(unit, concurrent=False) == want
    assert placed(unit) == [4, 4]
    assert answers(unit, concurrent=True) == want
    ranks = placed(unit)
    assert sum(ranks) == 16 and min(ranks) > 4, ranks
    m = unit.metrics()
    assert m['deepinfer_unit_rank_requests{rank="1"}'] == 0
    assert m['deepinfer_unit_rank_requests_finished_total{rank="1"}'] == ranks[1]
    # Each rank's engine as it reports itself (the other ranks every tenth of a second): idle again.
    assert wait_for(lambda: unit.metrics()['deepinfer_unit_rank_engine_requests_running{rank="1"}'] == 0)
    for r in range(2):
        assert 0 <= m[f'deepinfer_unit_rank_engine_kv_cache_usage{{rank="{r}"}}'] <= 1


def abandon_stream(unit):
    """A streamed request whose client goes away after the first event; returns the rank it ran on."""
    before = placed(unit)
    conn = http.client.HTTPConnection("127.0.0.1", unit.port, timeout=60)
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Go on and on"}], "max_tokens": 400,
            "temperature": 0, "stream": True, "ignore_eos": True}
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.read(6) == b"data: "
    rank = [a - b for a, b in zip(placed(unit), before)].index(1)
    # Its rank's engine reports it running.
    running = f'deepinfer_unit_rank_engine_requests_running{{rank="{rank}"}}'
    assert wait_for(lambda: unit.metrics()[running] == 1, timeout=10)
    conn.sock.shutdown(2)
    conn.close()
    return rank


def test_unit_serves_what_one_process_serves(needs_mpi, deepinfer_bin, model, want, single, store):
    # `serve --data-parallel-size 2` runs `mpirun -n 2 deepinfer serve ...` itself: exactly the unit that
    # mpirun starts by hand.
    # The expert load balancer places the experts anew every 4 steps (2 redundant copies): answers stay
    # identical to one process's across the swaps.
    # The ranks share the store the single process wrote.
    unit = Server(deepinfer_bin, model, *SERVE_ARGS, "--data-parallel-size", "2", "--enable-expert-parallel",
                  "--num-redundant-experts", "2", "--eplb-step-interval", "4", "--eplb-window-size", "8",
                  "--kv-store", store, env=MPI_ENV)
    try:
        assert placed(unit) == [0, 0]
        check_unit(unit, want)
        # Expert parallelism: the rows each rank's experts computed. The tiny preset routes every token to
        # num_experts_per_tok = 2 of its 8 experts at each MoE layer (hash-routed ones too), 4 experts a rank.
        m = unit.metrics()
        rows = [m[f'deepinfer_unit_rank_expert_rows_total{{rank="{r}"}}'] for r in range(2)]
        assert min(rows) > 0 and sum(rows) % 2 == 0, rows
        # Balance per MoE layer and step: max/mean over 2 ranks lies in [1, 2], for each of the preset's 4
        # layers (every one routed) and no other.
        for window in ("last_step", "window", "total"):
            for layer in range(4):
                assert 1 <= m[f'deepinfer_unit_expert_balance_{window}{{layer="{layer}"}}'] <= 2
            assert f'deepinfer_unit_expert_balance_{window}{{layer="4"}}' not in m
        assert m["deepinfer_unit_expert_rebalances_total"] >= 1
        assert m["deepinfer_unit_expert_rebalances_skipped_total"] >= 0  # (placements no better than the one in use)
        # Blocks one process wrote are read by the unit's ranks: an idle unit places requests in turn, so the
        # long prompt runs once on each rank (neither has it in RAM), rank 0's store figures on /metrics.
        # "In turn" means to the rank given fewest requests so far, and the concurrent answers above may have
        # left one rank ahead by several: short requests, one at a time, even the counts first.
        for _ in range(16):
            counts = placed(unit)
            if counts[0] == counts[1]:
                break
            chat(unit, PROMPTS[0], stream=False)
        assert placed(unit)[0] == placed(unit)[1]
        before, hits = placed(unit), unit.metrics()["deepinfer:kvstore_hit_blocks_total"]
        assert [chat(unit, LONG_PROMPT, stream=False) for _ in range(2)] == [single["long"]] * 2
        assert [a - b for a, b in zip(placed(unit), before)] == [1, 1]
        assert unit.metrics()["deepinfer:kvstore_hit_blocks_total"] > hits
        # A client that goes away aborts its request on the rank that runs it: it finishes there long before
        # its 400 tokens (the abort crosses to that rank at the next step agreement).
        for _ in range(3):
            generated = unit.metrics()
            rank = abandon_stream(unit)
            key = f'deepinfer_unit_rank_requests{{rank="{rank}"}}'
            assert wait_for(lambda: unit.metrics()[key] == 0, timeout=20)
            tokens = f'deepinfer_unit_rank_generation_tokens_total{{rank="{rank}"}}'
            assert unit.metrics()[tokens] - generated[tokens] < 200
            if rank == 1:
                break
        assert rank == 1
    finally:
        code = unit.stop(timeout=30)
    # SIGTERM, forwarded to mpirun, ends every rank (the exit status is mpirun's own); rank 0 stopped as a
    # server does, and no rank had to end the unit.
    assert code is not None
    assert any(" stopped " in line for line in unit.log), unit.log
    assert not [line for line in unit.log if re.search(r"rank \d+: .*ending the unit", line)], unit.log


def test_serve_without_mpirun_is_one_line(deepinfer_bin, model, tmp_path):
    proc = subprocess.run([deepinfer_bin, "serve", model, "--data-parallel-size", "2"], capture_output=True,
                          text=True, timeout=30, env={**os.environ, "PATH": str(tmp_path)})
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "mpirun" in proc.stderr, proc.stderr

