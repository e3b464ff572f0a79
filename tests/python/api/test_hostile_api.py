"""The hostile corpus (tools/hostile/gen_corpus.py) through the Python API: every request body of its
`generate` cases, sent as is through the package's request path and, where it is a chat conversation,
through LLM.chat; every broken model directory given to LLM(). Each must end as a result or one Python
exception (ValueError, TypeError or RuntimeError) whose message names no library internals; the cases run in
a child interpreter, so a crash fails the test instead of ending the test run."""
import json
import os
import pathlib
import resource
import subprocess
import sys
import textwrap

import pytest
from api_fixtures import PACKAGE_DIR, deepinfer  # noqa: F401 (fixtures)

from conftest import ROOT

INTERNAL = ("json.exception", "INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_RANGE", "RESOURCE_EXHAUSTED", "DATA_LOSS",
            "std::", "terminate called", "basic_string", "what():")

RUNNER = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import deepinfer
    jobs = json.load(open(sys.argv[2]))
    engines = {}
    for job in jobs:
        outcome = "ok"
        try:
            if job["model"] not in engines:
                try:
                    engines[job["model"]] = deepinfer.LLM(job["model"], kv_cache_bytes=32 << 20, max_num_seqs=4)
                except Exception as e:
                    engines[job["model"]] = e
            llm = engines[job["model"]]
            if isinstance(llm, Exception):
                raise llm
            if job.get("body") is not None:
                body = open(job["body"], "rb").read().decode("utf-8", errors="surrogateescape")
                llm._session.run(job["api"], [body], [[]])
                try:
                    doc = json.loads(body)
                except ValueError:
                    doc = None
                if job["api"] == "chat" and isinstance(doc, dict) and "messages" in doc:
                    llm.chat(doc["messages"], deepinfer.SamplingParams(max_tokens=4, seed=0))
        except (ValueError, TypeError, RuntimeError) as e:
            outcome = type(e).__name__ + ": " + str(e)[:300]
        print(json.dumps({"name": job["name"], "outcome": outcome}), flush=True)
""")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, deepinfer_bin):
    """The corpus scripts/test.sh wrote (DEEPINFER_HOSTILE_DIR), else a fresh one."""
    ready = os.environ.get("DEEPINFER_HOSTILE_DIR")
    if ready and (pathlib.Path(ready) / "cases.json").exists():
        out = pathlib.Path(ready)
    else:
        out = tmp_path_factory.mktemp("hostile")
        subprocess.run([sys.executable, str(ROOT / "tools" / "hostile" / "gen_corpus.py"), "--deepinfer",
                        deepinfer_bin, "--out", str(out)], check=True, timeout=600)
    return out, json.loads((out / "cases.json").read_text())


def jobs_of(out, cases):
    """The corpus's generate cases that name a request file, and every model directory it holds."""
    jobs = []
    for case in cases:
        args = [a.replace("{D}", str(out)) for a in case["args"]]
        if args[:1] != ["generate"] or "--model" not in args or case.get("heavy"):
            continue
        model = args[args.index("--model") + 1]
        protocol = args[args.index("--protocol") + 1] if "--protocol" in args else "chat"
        api = {"chat": "chat", "responses": "responses", "messages": "messages", "anthropic": "messages"}.get(protocol)
        body = args[args.index("--request") + 1] if "--request" in args else None
        if api is None or (body is not None and not pathlib.Path(body).is_file()):
            continue
        jobs.append({"name": case["name"], "model": model, "api": api, "body": body})
    for model in sorted((out / "models").iterdir()):
        jobs.append({"name": "model " + model.name, "model": str(model), "api": "chat", "body": None})
    return jobs


def test_hostile_requests_and_models_raise_python_exceptions(deepinfer, corpus, tmp_path):
    out, cases = corpus
    jobs = jobs_of(out, cases)
    assert len(jobs) > 20, "the corpus lost its request and model cases"
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    # As the CLI's hostile cases run: an address-space cap, so that a size read from input that were not
    # bounded would fail here rather than take the machine's memory.
    cap = 6 << 30
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(PACKAGE_DIR), str(tmp_path / "jobs.json")],
                          capture_output=True, text=True, timeout=600,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)))
    assert proc.returncode == 0, f"the interpreter died (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["name"] for r in results] == [j["name"] for j in jobs]
    refused = [r for r in results if r["outcome"] != "ok"]
    for r in refused:
        assert not any(word in r["outcome"] for word in INTERNAL), r
    # The broken models are refused; a sound one (the corpus's tiny model) loads.
    models = {r["name"]: r["outcome"] for r in results if r["name"].startswith("model ")}
    assert models.get("model tiny") == "ok"
    assert sum(outcome != "ok" for outcome in models.values()) >= 3, models
