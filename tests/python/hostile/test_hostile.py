"""The hostile-input harness: every case of the corpus (tools/hostile/gen_corpus.py) runs under a
wall-clock timeout and a memory cap, and must end the way a handled input ends: no signal, no timeout, no
more resident memory than the case's bound, an exit code the case allows (1 for an error, 2 for a usage
error, 0 where the input is valid but extreme), and on failure exactly one line on stderr in the CLI's
format ("deepinfer COMMAND: message"), with no library-internal names in it.

DEEPINFER_HOSTILE_FULL=1 adds the heavy cases (about 3 minutes more on 2 cores).

Runs against every built flavour of the CLI (Release, and the ASan+UBSan build when present; under ASan the
address-space cap is left off, since the sanitizer reserves terabytes of shadow memory, and the RSS bound is
doubled for its redzones and quarantine)."""
import concurrent.futures
import json
import os
import pathlib
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import ROOT, deepinfer_binaries, is_sanitizer_build

BINARIES = deepinfer_binaries()
# Names that must never reach a user: nlohmann's exception ids, Status code names, C++ exception types.
INTERNAL = ("json.exception", "INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_RANGE", "RESOURCE_EXHAUSTED", "DATA_LOSS",
            "std::", "terminate called", "basic_string", "what():")


@pytest.fixture(scope="session")
def corpus(tmp_path_factory, deepinfer_bin):
    """The corpus scripts/test.sh wrote (DEEPINFER_HOSTILE_DIR), else a fresh one."""
    ready = os.environ.get("DEEPINFER_HOSTILE_DIR")
    if ready and (pathlib.Path(ready) / "cases.json").exists():
        out = pathlib.Path(ready)
        return out, json.loads((out / "cases.json").read_text())
    out = tmp_path_factory.mktemp("hostile")
    subprocess.run([sys.executable, str(ROOT / "tools" / "hostile" / "gen_corpus.py"), "--deepinfer", deepinfer_bin,
                    "--out", str(out)], check=True, timeout=600)
    return out, json.loads((out / "cases.json").read_text())


def run_case(binary, out, case, asan):
    """Runs one case; returns its exit (negative: the signal), stderr, peak RSS and whether the timeout killed it.

    The peak RSS comes from GNU time, which forks the command from its own small process: a child forked from
    pytest itself would count pytest's resident pages (copied at fork, recorded at exec) in its ru_maxrss."""
    rss_file = tempfile.NamedTemporaryFile(prefix="rss-", delete=False)
    rss_file.close()
    args = ["/usr/bin/time", "-q", "-f", "%M", "-o", rss_file.name, binary] + [
        os.fsencode(a.replace("{D}", str(out))) for a in case["args"]]
    stdin = open(case["stdin"].replace("{D}", str(out)), "rb") if case["stdin"] else subprocess.DEVNULL
    cap = (case["rss_mib"] + 1024) << 20  # address space: the RSS bound plus room for mappings and stacks

    def limits():
        if not asan:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    env.pop("DEEPINFER_TOKENIZER", None)
    start = time.monotonic()
    proc = subprocess.Popen(args, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=limits,
                            cwd=out, env=env, start_new_session=True)
    timed_out = []
    timer = threading.Timer(case["timeout_s"] * (4 if asan else 1),
                            lambda: (timed_out.append(1), os.killpg(proc.pid, signal.SIGKILL)))
    timer.start()
    try:
        stderr = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        # GNU time exits 128 + N when its command died of signal N (deepinfer itself never exits above 3).
        if proc.returncode > 128:
            proc.returncode = -(proc.returncode - 128)
        lines = pathlib.Path(rss_file.name).read_text().split()
        rss_kib = int(lines[-1]) if lines and lines[-1].isdigit() else usage.ru_maxrss
    finally:
        os.unlink(rss_file.name)
        timer.cancel()
        proc.stderr.close()
        if stdin is not subprocess.DEVNULL:
            stdin.close()
    return {"timeout": bool(timed_out), "code": proc.returncode, "stderr": stderr.decode("utf-8", "replace"),
            "rss_mib": rss_kib / 1024, "seconds": time.monotonic() - start}


def check(result, case, rss_mib):
    problems = []
    if result["timeout"]:
        return [f"timed out after {result['seconds']:.0f} s"]
    code = result["code"]
    if code < 0:
        problems.append(f"killed by signal {-code}")
    elif code not in case["exit"]:
        problems.append(f"exit {code}, expected {case['exit']}")
    if result["rss_mib"] > rss_mib:
        problems.append(f"peak RSS {result['rss_mib']:.0f} MiB over the bound of {rss_mib} MiB")
    lines = [line for line in result["stderr"].splitlines() if line.strip()]
    if case.get("stderr_has") and case["stderr_has"] not in result["stderr"]:
        problems.append(f"stderr lacks {case['stderr_has']!r}: {result['stderr'][:300]!r}")
    if code != 0:
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr: {result['stderr'][:400]!r}")
        elif not lines[0].startswith(("deepinfer ", "deepinfer: ")):
            problems.append(f"stderr not in the CLI's format: {lines[0][:200]!r}")
    for word in INTERNAL:
        if word in result["stderr"]:
            problems.append(f"stderr names {word!r}: {result['stderr'][:300]!r}")
    return problems


@pytest.mark.parametrize("binary", BINARIES)
def test_hostile_corpus(binary, corpus):
    out, cases = corpus
    asan = is_sanitizer_build(binary)
    # Heavy cases (tens of megabytes, seconds each even when handled well) run with DEEPINFER_HOSTILE_FULL=1,
    # on the Release build only; CI runs the rest, where a smaller twin stands for each heavy case's class.
    if asan or os.environ.get("DEEPINFER_HOSTILE_FULL") != "1":
        cases = [c for c in cases if not c["heavy"]]

    def one(case):
        result = run_case(binary, out, case, asan)
        return case, check(result, case, case["rss_mib"] * (2 if asan else 1))

    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:  # the cases are processes
        for case, problems in pool.map(one, cases):
            if problems:
                failures.append(f"{case['name']}: " + "; ".join(problems))
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures)
