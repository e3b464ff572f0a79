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


def _sanitizer_build_dir():
    return pathlib.Path(os.environ.get("DEEPINFER_ASAN_BUILD_DIR", ROOT / "build" / "asan"))


def is_sanitizer_build(binary):
    """Whether `binary` is the ASan+UBSan flavour (scripts/test.sh names its directory; it need not say "asan")."""
    return pathlib.Path(binary).resolve().is_relative_to(_sanitizer_build_dir().resolve())


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


def pytest_configure(config):
    config.addinivalue_line("markers", "optional(reason): an opt-in check that needs something the repository may "
                                       "not carry (it may skip even in CI)")
    config.addinivalue_line("markers", "alone: measures a server's memory under its own load; scripts/test.sh runs "
                                       "these after the parallel workers, with nothing beside them")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (DEEPINFER_REQUIRE_DATA=1) a skipped test is a failure: everything the tests need is in the
    repository or installed by scripts/setup.sh, so a skip there means a test silently stopped testing.
    Tests marked `optional` are exempt."""
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and os.environ.get("DEEPINFER_REQUIRE_DATA") == "1"
            and item.get_closest_marker("optional") is None and not hasattr(report, "wasxfail")):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped with DEEPINFER_REQUIRE_DATA=1: {reason}"
