"""`deepinfer inspect` against checkpoints written by the reference `safetensors` package, and a dozen
malformed checkpoints that must each give a one-line error and exit code 1 (Release and ASan builds)."""
import json
import struct
import subprocess

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from conftest import deepinfer_binaries

BINARIES = deepinfer_binaries()


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)


def write_config(directory):
    config = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "hidden_size": 64,
              "num_hidden_layers": 2, "vocab_size": 128}
    (directory / "config.json").write_text(json.dumps(config))
    return config


@pytest.fixture
def sharded_checkpoint(tmp_path):
    rng = np.random.default_rng(0)
    shard1 = {"model.embed_tokens.weight": rng.standard_normal((128, 64)).astype(np.float16),
              "model.layers.0.attn.wq": rng.standard_normal((64, 64)).astype(np.float32)}
    shard2 = {"model.layers.1.ffn.experts.0.w1": rng.integers(0, 255, (32, 32), dtype=np.uint8),
              "model.layers.1.ffn.gate.tid2eid": rng.integers(0, 8, (128, 2), dtype=np.int32),
              "model.norm.weight": np.ones((64,), dtype=np.float32),
              "counter": np.array([7], dtype=np.int64)}
    save_file(shard1, str(tmp_path / "model-00001-of-00002.safetensors"), metadata={"format": "pt"})
    save_file(shard2, str(tmp_path / "model-00002-of-00002.safetensors"), metadata={"format": "pt"})
    weight_map = {name: "model-00001-of-00002.safetensors" for name in shard1}
    weight_map.update({name: "model-00002-of-00002.safetensors" for name in shard2})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    write_config(tmp_path)
    return tmp_path


@pytest.mark.parametrize("binary", BINARIES)
def test_inventory_matches_the_safetensors_package(binary, sharded_checkpoint):
    result = run(binary, "inspect", "--json", str(sharded_checkpoint))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    expected = {}
    for shard in sorted(sharded_checkpoint.glob("*.safetensors")):
        with safe_open(str(shard), framework="numpy") as f:
            for name in f.keys():
                array = f.get_tensor(name)
                expected[name] = (list(array.shape), array.nbytes, shard.name)
    got = {t["name"]: (t["shape"], t["bytes"], t["file"]) for t in report["tensors"]}
    assert got == expected
    assert report["total_tensors"] == len(expected)
    assert report["total_bytes"] == sum(v[1] for v in expected.values())
    assert report["total_params"] == sum(int(np.prod(v[0])) for v in expected.values())
    assert report["files"] == 2
    assert report["config"]["model_type"] == "deepseek_v4"
    dtypes = {t["name"]: t["dtype"] for t in report["tensors"]}
    assert dtypes["model.embed_tokens.weight"] == "F16"
    assert dtypes["model.layers.1.ffn.experts.0.w1"] == "U8"
    assert dtypes["counter"] == "I64"


@pytest.mark.parametrize("binary", BINARIES)
def test_human_table_lists_every_tensor(binary, sharded_checkpoint):
    result = run(binary, "inspect", str(sharded_checkpoint))
    assert result.returncode == 0, result.stderr
    assert "architecture: DeepseekV4ForCausalLM" in result.stdout
    for name in ("model.embed_tokens.weight", "model.norm.weight", "counter"):
        assert name in result.stdout
    assert "total: 6 tensors in 2 file(s)" in result.stdout


def raw_file(path, header, data=b"", declared_len=None):
    text = header.encode() if isinstance(header, str) else header
    length = len(text) if declared_len is None else declared_len
    path.write_bytes(struct.pack("<Q", length) + text + data)


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


MALFORMED = {
    "truncated": lambda p: p.write_bytes(b"\x10\x00\x00"),
    "header_past_end": lambda p: raw_file(p, "{}", declared_len=4096),
    "bad_json": lambda p: raw_file(p, '{"w": {"dtype": "F32",'),
    "not_an_object": lambda p: raw_file(p, "[]"),
    "unknown_dtype": lambda p: raw_file(p, json.dumps({"w": entry("Q4_K", [4], 0, 4)}), b"\0" * 4),
    "offsets_out_of_range": lambda p: raw_file(p, json.dumps({"w": entry("F32", [4], 0, 16)}), b"\0" * 8),
    "overlapping_offsets": lambda p: raw_file(
        p, json.dumps({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}), b"\0" * 12),
    "shape_size_mismatch": lambda p: raw_file(p, json.dumps({"w": entry("BF16", [3, 3], 0, 16)}), b"\0" * 16),
    "begin_after_end": lambda p: raw_file(p, json.dumps({"w": entry("F32", [0], 8, 4)}), b"\0" * 8),
    "negative_shape": lambda p: raw_file(p, json.dumps({"w": entry("F32", [-2], 0, 8)}), b"\0" * 8),
    "metadata_not_strings": lambda p: raw_file(p, json.dumps({"__metadata__": {"n": 3}})),
    "invalid_utf8_header": lambda p: raw_file(p, b'{"\xff": 1}'),
}


@pytest.mark.parametrize("binary", BINARIES)
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_file_gives_one_line_error(binary, case, tmp_path):
    path = tmp_path / "model.safetensors"
    MALFORMED[case](path)
    result = run(binary, "inspect", str(tmp_path))
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("deepinfer inspect: ")
    assert str(path) in lines[0]


@pytest.mark.parametrize("binary", BINARIES)
def test_missing_shard_is_named(binary, sharded_checkpoint):
    (sharded_checkpoint / "model-00002-of-00002.safetensors").unlink()
    result = run(binary, "inspect", str(sharded_checkpoint))
    assert result.returncode == 1
    assert "model-00002-of-00002.safetensors" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("binary", BINARIES)
def test_cli_basics(binary, tmp_path):
    assert run(binary, "--version").stdout.startswith("deepinfer ")
    assert "inspect" in run(binary, "--help").stdout
    assert run(binary, "inspect").returncode == 2
    assert run(binary, "no-such-command").returncode == 2
    missing = run(binary, "inspect", str(tmp_path / "nope"))
    assert missing.returncode == 1 and "no such file" in missing.stderr
    bad_config = tmp_path / "m"
    bad_config.mkdir()
    (bad_config / "config.json").write_text("{not json")
    result = run(binary, "inspect", str(bad_config))
    assert result.returncode == 1 and "config.json" in result.stderr
