"""tools/recipe/parity.py (the agreement counts) runs end to end on a tiny fresh corpus: every count
line is printed and nothing undocumented differs from the live deepseek-recipe."""
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
pytest.importorskip("deepseek_recipe", reason="deepseek_recipe is not installed")


def test_parity_tool_prints_every_count(deepinfer_bin):
    build = pathlib.Path(deepinfer_bin).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(ROOT / "tools/recipe/parity.py"), "--build", str(build), "--seed", "7",
                           "--requests", "3", "--outputs", "4", "--custom", "2", "--logprobs", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # 7 generators x 3 requests x 2 versions; 4 outputs x 3 chunkings per protocol, 2 x 3 apply_patch cases.
    assert re.search(r"total: 42 renders \(21 requests x V4, V4.1\): text \d+ equal, \d+ documented deviations, "
                     r"ids (\d+) of \1 equal; 0 undocumented differences", proc.stdout), proc.stdout
    for name, n in [("chat", 12), ("messages", 12), ("responses", 12), ("responses_custom", 6)]:
        assert re.search(rf"^  {name} +{n} of +{n} equal", proc.stdout, re.M), proc.stdout
    assert re.search(r"total: (\d+) of \1 parse comparisons equal; 0 differ", proc.stdout), proc.stdout
