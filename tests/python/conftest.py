"""Shared pytest fixtures: where the built deepinfer binaries are, and generated checkpoints."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _binary(build_dir):
    path = pathlib.Path(build_dir) / "bin" / "deepinfer"
    return path if path.exists() else None


@pytest.fixture(scope="session")
def deepinfer_bin():
    """The Release build's deepinfer (DEEPINFER_BUILD_DIR, default build/release)."""
    path = _binary(os.environ.get("DEEPINFER_BUILD_DIR", ROOT / "build" / "release"))
    if path is None:
        pytest.fail("deepinfer binary not built; run scripts/test.sh or set DEEPINFER_BUILD_DIR")
    return str(path)


def deepinfer_binaries():
    """Every built flavour of the CLI: Release, plus the ASan+UBSan build when it exists."""
    found = []
    for name, env, default in (("release", "DEEPINFER_BUILD_DIR", ROOT / "build" / "release"),
                               ("asan", "DEEPINFER_ASAN_BUILD_DIR", ROOT / "build" / "asan")):
        path = _binary(os.environ.get(env, default))
        if path is not None:
            found.append(pytest.param(str(path), id=name))
    return found


def make_tiny_model(binary, out, seed):
    """A random `tiny` DeepSeek-V4 checkpoint written by `deepinfer init-model` into `out`."""
    proc = subprocess.run([binary, "init-model", "--preset", "tiny", "--out", str(out), "--seed", str(seed)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return str(out)
