"""`deepinfer init-model --arch v3` presets: the checkpoint is in the released DeepSeek-V3 layout (config.json
with model_type deepseek_v3, transformers' tensor names, FP8 E4M3 in 128x128 blocks with fp32 weight_scale_inv
whose last blocks may be partial; read back here with the safetensors package), reproducible from the seed,
and `deepinfer inspect` and `deepinfer generate` run it; impossible MLA or routing shapes in its config.json are
one error line naming the key."""
import hashlib
import json
import math
import pathlib
import subprocess

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


def dtypes_and_shapes(out):
    index = json.loads((out / "model.safetensors.index.json").read_text())
    found = {}
    for shard in set(index["weight_map"].values()):
        with safe_open(str(out / shard), "np") as f:
            for name in f.keys():
                s = f.get_slice(name)
                found[name] = (s.get_dtype(), s.get_shape())
    assert set(found) == set(index["weight_map"])
    return found


@pytest.mark.parametrize("fmt", ["bf16", "fp8"])
def test_init_model_v3_writes_released_layout(deepinfer_bin, tmp_path, fmt):
    out = tmp_path / "model"
    run(deepinfer_bin, "init-model", "--arch", "v3", "--preset", "tiny", "--out", str(out), "--seed", "3",
        "--format", fmt)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "deepseek_v3"
    assert config["architectures"] == ["DeepseekV3ForCausalLM"]
    assert config["rope_scaling"]["type"] == "yarn" and config["first_k_dense_replace"] == 1
    found = dtypes_and_shapes(out)
    p = "model.layers.1."
    assert found[p + "mlp.gate.e_score_correction_bias"] == ("F32", [8])
    assert found[p + "mlp.experts.7.down_proj.weight"][1] == [64, 32]
    assert found[p + "mlp.shared_experts.gate_proj.weight"][1] == [32, 64]
    # kv_a_proj_with_mqa: kv_lora_rank 32 + qk_rope_head_dim 16 rows.
    kv_a = found[p + "self_attn.kv_a_proj_with_mqa.weight"]
    assert kv_a[1] == [48, 64]
    assert "model.layers.0.mlp.gate_proj.weight" in found and "model.layers.0.mlp.gate.weight" not in found
    if fmt == "fp8":
        assert config["quantization_config"]["weight_block_size"] == [128, 128]
        assert kv_a[0] == "F8_E4M3"
        # A partial block's scale: ceil(48 / 128) x ceil(64 / 128).
        assert found[p + "self_attn.kv_a_proj_with_mqa.weight_scale_inv"] == ("F32", [1, 1])
        assert found["model.embed_tokens.weight"][0] == "BF16"
    else:
        assert kv_a[0] == "BF16"
    # The MTP layer after the 3 main ones, an MoE layer with its own norms and eh_proj [hidden, 2 · hidden].
    assert config["num_nextn_predict_layers"] == 1
    m = "model.layers.3."
    assert found[m + "eh_proj.weight"][1] == [64, 128]
    assert found[m + "enorm.weight"] == ("F32", [64]) and found[m + "hnorm.weight"] == ("F32", [64])
    assert found[m + "shared_head.norm.weight"] == ("F32", [64])
    assert found[m + "mlp.experts.7.down_proj.weight"][1] == [64, 32]
    assert "model.layers.4.input_layernorm.weight" not in found
    # hidden 64, 3 layers (1 dense), 4 heads of 16 + 16 rope (v 16), q_lora 32, kv_lora 32, 8 experts of 32 plus
    # 1 shared, dense 128. Per layer, attention: q_a 32·64 + q_b 4·32·32 + kv_a 48·64 + kv_b 4·32·32 + o 64·64
    # + norms 32 + 32 + 2·64 = 17600; the dense MLP 3·64·128; an MoE layer gate 8·64 + bias 8 + 9 experts of
    # 3·64·32; embedding and head 2·129280·64, final norm 64; the MTP layer: attention, an MoE MLP, 3 norms of 64
    # and eh_proj 64·128.
    total = sum(math.prod(shape) for name, (_, shape) in found.items() if not name.endswith("_scale_inv"))
    assert total == (2 * 129280 * 64 + 64 + 4 * 17600 + 3 * 64 * 128 + 3 * (8 * 64 + 8 + 9 * 3 * 64 * 32) + 3 * 64
                     + 64 * 128) == 16818712
    info = run(deepinfer_bin, "inspect", str(out))
    assert "DeepseekV3ForCausalLM" in info
    result = json.loads(run(deepinfer_bin, "generate", "--model", str(out), "--prompt-ids", "0,5,77",
                            "--max-tokens", "4"))
    assert len(result["outputs"][0]["token_ids"]) == 4


def test_init_model_v3_is_reproducible(deepinfer_bin, tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for out, seed in ((a, 1), (b, 1), (c, 2)):
        run(deepinfer_bin, "init-model", "--arch", "v3", "--preset", "tiny", "--out", str(out), "--seed", str(seed))
    assert digest(a) == digest(b) != digest(c)


@pytest.fixture(scope="module")
def tiny_v3(deepinfer_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("v3") / "model"
    run(deepinfer_bin, "init-model", "--arch", "v3", "--preset", "tiny", "--out", str(out))
    return out


@pytest.mark.parametrize("key,value", [("qk_rope_head_dim", 15), ("topk_group", 9), ("n_group", 3),
                                       ("num_experts_per_tok", 9)])
def test_impossible_shapes_are_one_line_naming_the_key(deepinfer_bin, tiny_v3, tmp_path, key, value):
    # tiny: 8 experts in 4 groups of 2, keeping 2 groups (so at most 4 experts per token), rope dim 16.
    out = tmp_path / "model"
    out.mkdir()
    for f in tiny_v3.iterdir():
        if f.name != "config.json":
            (out / f.name).symlink_to(f)
    config = json.loads((tiny_v3 / "config.json").read_text())
    config[key] = value
    (out / "config.json").write_text(json.dumps(config))
    proc = subprocess.run([deepinfer_bin, "generate", "--model", str(out), "--prompt-ids", "1,2"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"key '{key}'" in lines[0], proc.stderr
