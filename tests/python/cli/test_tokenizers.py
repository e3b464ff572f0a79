"""The builtin tokenizers through the CLI: every command finds them without a file, a Python environment or
a developer tree (run from an empty directory with a scrubbed environment), and the bytes init-model writes
are the upstream files (sha256 from data/tokenizers/*/README.md, checked by tools/tokenizer/tokenizer_data.py)."""
import hashlib
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools" / "tokenizer"))
import tokenizer_data  # noqa: E402


def bare_env():
    """No DEEPINFER_* variables, no virtual environment on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPINFER_") and k != "VIRTUAL_ENV"}
    env["PATH"] = "/usr/bin:/bin"
    return env


def run(args, cwd, **kw):
    return subprocess.run(args, cwd=cwd, env=bare_env(), capture_output=True, timeout=120, **kw)


@pytest.mark.parametrize("name", tokenizer_data.NAMES)
def test_init_model_writes_the_upstream_tokenizer(deepinfer_bin, tmp_path, name):
    out = tmp_path / "model"
    proc = run([deepinfer_bin, "init-model", "--preset", "tiny", "--out", str(out), "--tokenizer", name], tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = (out / "tokenizer.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == tokenizer_data.SHA256[name]
    config = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert isinstance(config, dict) and config


def test_default_tokenizer_is_builtin_v4(deepinfer_bin, tmp_path):
    # "<｜User｜>" is added token 128803 in every builtin; with --special it becomes that id.
    proc = run([deepinfer_bin, "tokenize", "--special", "--json", "<｜User｜>hi"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0] == 128803
    # V4.1-only spelling: <｜System｜> is one id there and several ids in V4 (the default).
    v41 = run([deepinfer_bin, "tokenize", "--tokenizer", "deepseek-v4.1", "--special", "--json", "<｜System｜>"], tmp_path)
    v4 = run([deepinfer_bin, "tokenize", "--special", "--json", "<｜System｜>"], tmp_path)
    assert json.loads(v41.stdout) == [128799]
    assert len(json.loads(v4.stdout)) > 1


def test_unknown_tokenizer_is_one_line_error(deepinfer_bin, tmp_path):
    proc = run([deepinfer_bin, "tokenize", "--tokenizer", "deepseek-v9", "x"], tmp_path, text=True)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "deepseek-v3, deepseek-v4, deepseek-v4.1" in lines[0]
