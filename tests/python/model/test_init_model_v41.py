"""`deepinfer init-model --arch v4.1` presets: the checkpoint is in the released DeepSeek-V4.1 layout (composite
config, FP8 32x32 blocks with E8M0 scales, I8-packed FP4 experts, FP8 Engram tables with a scale per 32 values;
read back here with the safetensors package), reproducible from the seed, ships the V4.1 tokenizer, and
`deepinfer inspect` and `deepinfer generate` run it. (The bench preset, ~3 GB, is left to `bench model` runs.)"""
import hashlib
import json
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


@pytest.mark.parametrize("preset,layers,fmt", [("tiny", 6, "bf16"), ("tiny", 6, "fp8"), ("small", 10, "bf16")])
def test_init_model_v41_writes_released_layout(deepinfer_bin, tmp_path, preset, layers, fmt):
    out = tmp_path / "model"
    run(deepinfer_bin, "init-model", "--arch", "v4.1", "--preset", preset, "--out", str(out), "--seed", "3",
        "--format", fmt)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "deepseek_v41"
    assert config["architectures"] == ["DeepseekV41ForCausalLM"]
    assert config["vision_config"]["model_type"] == "deepseek_v41_vision"
    text = config["text_config"]
    assert text["model_type"] == "deepseek_v41_text"
    assert text["num_hidden_layers"] == layers
    assert text["engram_compressed_vocab_size"] == 99092
    assert len(text["engram_num_embeddings"]) == len(text["engram_layer_ids"])
    kv = text["kv_source_layer_ids"]
    tensors = dtypes_and_shapes(out)
    first = kv[0]
    for required in ["embed.weight", "head.weight", "norm.weight", "layers.0.hc_attn_fn",
                     f"layers.{first}.attn.compressor.wkv.weight", f"layers.{first}.attn.compressor.wgate.weight",
                     f"layers.{first}.attn.indexer.wk.weight", f"layers.{first}.attn.indexer.k_norm.weight",
                     f"layers.{layers - 1}.ffn.gate.bias_vl"]:
        assert required in tensors, required
    # DSpark draft layers (mtp.*) in the tiny and small presets.
    assert "mtp.main_proj.weight" in tensors and "mtp.layers.0.attn.wq_a.weight" in tensors
    assert tensors["mtp.markov_head.embed.weight"][1] == [129280, text["dspark_markov_rank"]]
    # Only KV sources own a compressor; the ratio-1 source has no pooling gate.
    assert f"layers.{first + 1}.attn.compressor.wkv.weight" not in tensors
    assert f"layers.{kv[-1]}.attn.compressor.wgate.weight" not in tensors
    engram = text["engram_layer_ids"][0]
    rows = text["engram_num_embeddings"][0]
    dim = text["engram_head_dim"]
    if fmt == "fp8":
        assert config["quantization_config"]["weight_block_size"] == [32, 32]
        dtype, shape = tensors[f"layers.{first}.attn.wq_b.weight"]
        assert dtype == "F8_E4M3"
        assert tensors[f"layers.{first}.attn.wq_b.scale"] == ("F8_E8M0", [shape[0] // 32, shape[1] // 32])
        dtype, shape = tensors["layers.0.ffn.experts.0.w1.weight"]
        assert dtype == "I8" and shape == [text["moe_intermediate_size"], text["hidden_size"] // 2]
        assert tensors["layers.0.ffn.experts.0.w1.scale"] == ("F8_E8M0", [text["moe_intermediate_size"], text["hidden_size"] // 32])
        assert tensors[f"layers.{engram}.engram.embed.weight"] == ("F8_E4M3", [rows, dim])
        assert tensors[f"layers.{engram}.engram.embed.scale"] == ("F8_E8M0", [rows, dim // 32])
    else:
        assert tensors[f"layers.{first}.attn.wq_b.weight"][0] == "BF16"
        assert tensors[f"layers.{engram}.engram.embed.weight"] == ("BF16", [rows, dim])

    # The V4.1 tokenizer: <｜System｜> at 128799, no <｜image｜>, <｜deepseek_image｜> at 129264.
    added = {t["content"]: t["id"] for t in json.loads((out / "tokenizer.json").read_text())["added_tokens"]}
    assert added["<｜System｜>"] == 128799
    assert added["<｜deepseek_image｜>"] == 129264
    assert "<｜image｜>" not in added

    summary = json.loads(run(deepinfer_bin, "inspect", "--json", str(out)))
    assert summary["total_tensors"] == len(tensors)


def test_v41_preset_generates_reproducibly(deepinfer_bin, tmp_path):
    out = tmp_path / "model"
    run(deepinfer_bin, "init-model", "--arch", "v4.1", "--preset", "tiny", "--out", str(out), "--format", "fp8")
    results = [json.loads(run(deepinfer_bin, "generate", "--model", str(out), "--prompt-ids", "0,5,77,1023,9",
                              "--max-tokens", "6")) for _ in range(2)]
    tokens = results[0]["outputs"][0]["token_ids"]
    assert len(tokens) == 6 and all(0 <= t < 129280 for t in tokens)
    assert results[1]["outputs"][0]["token_ids"] == tokens
    chat = json.loads(run(deepinfer_bin, "generate", "--model", str(out), "--prompt", "Hello", "--max-tokens", "4",
                          "--model-version", "v4.1"))
    assert chat["usage"]["completion_tokens"] == 4


def test_same_seed_same_v41_checkpoint(deepinfer_bin, tmp_path):
    for name, seed in (("a", "9"), ("b", "9"), ("c", "10")):
        run(deepinfer_bin, "init-model", "--arch", "v4.1", "--preset", "tiny", "--out", str(tmp_path / name),
            "--seed", seed)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert digest(tmp_path / "a") != digest(tmp_path / "c")


def test_v41_bad_arguments(deepinfer_bin, tmp_path):
    for args in (["--arch", "v5", "--preset", "tiny", "--out", str(tmp_path / "x")],
                 ["--arch", "v4.1", "--preset", "tiny", "--out", str(tmp_path / "y"), "--format", "f32"]):
        result = subprocess.run([deepinfer_bin, "init-model", *args], capture_output=True, text=True)
        assert result.returncode == 2, args
        assert "init-model" in result.stderr


def test_v41_tokenizer_lacking_a_control_token_is_a_clear_error(deepinfer_bin, tmp_path):
    # Every V4.1 prompt starts a user turn with <｜User｜> (128803): a vocabulary without it cannot encode one.
    out = tmp_path / "model"
    run(deepinfer_bin, "init-model", "--arch", "v4.1", "--preset", "tiny", "--out", str(out), "--format", "fp8")
    spec = json.loads((out / "tokenizer.json").read_text())
    user = "<\uff5cUser\uff5c>"
    assert any(t["content"] == user for t in spec["added_tokens"])
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] != user]
    spec["model"]["vocab"].pop(user, None)
    stripped = tmp_path / "stripped.json"
    stripped.write_text(json.dumps(spec, ensure_ascii=False))
    request = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    for cmd, args, stdin in (
            ("generate", ["--model", str(out), "--tokenizer", str(stripped), "--prompt", "hi", "--max-tokens", "2",
                          "--model-version", "v4.1"], None),
            ("render", ["--ids", "--model-version", "v4.1", "--tokenizer", str(stripped)], request)):
        result = subprocess.run([deepinfer_bin, cmd, *args], input=stdin, capture_output=True, text=True, timeout=120)
        assert result.returncode == 1, (cmd, result.stderr)
        errors = [line for line in result.stderr.splitlines() if line.startswith("deepinfer ")]
        # generate says what the server answers (500) for such a prompt; render names the token alone.
        cause = ("the prompt cannot be encoded with this model's tokenizer: " if cmd == "generate" else "")
        assert errors == [f"deepinfer {cmd}: {cause}the tokenizer has no id for the control token {user}"], \
            result.stderr
