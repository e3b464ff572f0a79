"""Fixtures of the package's tests (imported by each test module). The Python package under test: the build tree's (DEEPINFER_BUILD_DIR/python, made by -DDEEPINFER_PYTHON=ON),
imported in place; a `tiny` checkpoint and an LLM on it, one per test module."""
import os
import pathlib
import sys

import pytest

from conftest import ROOT, make_tiny_model

BUILD_DIR = pathlib.Path(os.environ.get("DEEPINFER_BUILD_DIR", ROOT / "build" / "release"))
PACKAGE_DIR = BUILD_DIR / "python"


@pytest.fixture(scope="session")
def deepinfer():
    if not (PACKAGE_DIR / "deepinfer").is_dir():
        pytest.fail(f"{PACKAGE_DIR}/deepinfer not built: configure with -DDEEPINFER_PYTHON=ON (scripts/test.sh does)")
    sys.path.insert(0, str(PACKAGE_DIR))
    import deepinfer as package
    return package


@pytest.fixture(scope="module")
def api_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("api-tiny"), seed=5)


@pytest.fixture(scope="module")
def llm(deepinfer, api_model):
    return deepinfer.LLM(api_model, kv_cache_bytes=64 << 20, max_num_seqs=16)
