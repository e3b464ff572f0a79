"""The loading progress bar: drawn on stderr when stderr is a terminal (here a pseudo-terminal), absent
when it is a pipe, and never on stdout (which carries the response body either way)."""
import json
import os
import pty
import subprocess

import pytest
from conftest import make_tiny_model


@pytest.fixture(scope="module")
def tiny_model(deepinfer_bin, tmp_path_factory):
    return make_tiny_model(deepinfer_bin, tmp_path_factory.mktemp("tiny"), seed=5)


def command(binary, model):
    return [binary, "generate", "--model", model, "--prompt", "hello", "--max-tokens", "2"]


def test_bar_on_a_terminal(deepinfer_bin, tiny_model):
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(command(deepinfer_bin, tiny_model), stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)  # the child holds the only writer now
    drawn = b""
    while True:  # drain while the child runs, so that it never blocks on a full terminal
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the writer is gone and everything has been read
            break
        if not chunk:
            break
        drawn += chunk
    os.close(controller)
    stdout = proc.stdout.read()
    assert proc.wait(timeout=300) == 0
    text = drawn.decode(errors="replace")
    assert "loading " + tiny_model in text
    assert "100%" in text  # the bar reaches the end
    assert "\r" in text    # and redraws in place
    json.loads(stdout)     # stdout is still exactly the response body


def test_no_bar_on_a_pipe(deepinfer_bin, tiny_model):
    proc = subprocess.run(command(deepinfer_bin, tiny_model), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "loading " not in proc.stderr and "%" not in proc.stderr
    json.loads(proc.stdout)
