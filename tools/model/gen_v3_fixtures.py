#!/usr/bin/env python3
"""Builds the DeepSeek-V3 and V3.2 reference fixtures in tests/model/data/ with Hugging Face transformers.

Each fixture is a tiny random V3 checkpoint in the released layout (config.json with the released keys,
model.safetensors with the released tensor names, e.g. `model.layers.1.self_attn.kv_a_proj_with_mqa.weight`,
`model.layers.1.mlp.experts.3.gate_proj.weight`, `model.layers.1.mlp.gate.e_score_correction_bias`) plus
reference.safetensors holding what transformers' `deepseek_v3` model (loaded from that directory with
from_pretrained, eager attention, float32; for the FP8 fixture from the weights dequantized here) computes
from it:

  seq{i}.tokens   I32 [T]        fixed random token ids
  seq{i}.logits   F32 [T, V]     logits at every position of one full-prefill forward pass
  greedy.prompt   I32 [P]        a prompt
  greedy.output   I32 [32]       32 greedy tokens after it (argmax of a full forward at each step; checked
                                 against transformers' cached decode)
  mtp.tokens      I32 [T]        with an MTP layer: tokens for the MTP check (= the last seq{i}.tokens)
  mtp.logits      F32 [T-1, V]   the MTP layer's logits at positions 0..T-2 (inputs: the main model's last
                                 hidden state at t and the embedding of token t+1, RoPE at position t).
                                 transformers has no V3 MTP; this follows DeepSeek's reference MTP
                                 (enorm/hnorm, eh_proj on [enorm(embedding); hnorm(hidden)], one decoder
                                 layer, shared_head.norm, the main lm_head) built from transformers' V3 (or
                                 V3.2) modules

V3.2 fixtures (v32_*) come from transformers' `deepseek_v32` with its indexer given the rounding of DeepSeek's
released inference, which transformers leaves out: after RoPE, the Hadamard transform of the indexer's queries
and keys (scale dim^-0.5), then FP8 E4M3 with one scale per block of min(128, dim) values, s = max(amax, 1e-4)
· fl(1/448) (a power of two, rounded up, with scale_fmt "ue8m0"), codes round to nearest even, saturated at ±448;
the scores use the dequantized values (see `fake_quantized_indexer_forward`). index_topk is smaller than the
sequences, so the selection matters (the generator prints at how many (layer, position) pairs it drops keys,
and at how many the rounding changes the selection against transformers' unrounded scores).

Ties and FP8 boundary flips: an implementation computing in fp32 differs from this reference by rounding
noise; that noise could move a value across an E4M3 rounding midpoint (its code then differs by one quantum)
or reorder two nearly equal scores, and either could change a selection, after which the logits differ for
real. For every forward without a cache and every (layer, query), the generator bounds how far each score can
move when every value before rounding moves by up to NOISE of its block's amax (a value within that distance
of a midpoint may take the neighbouring code: one quantum × its scale, times the largest partner value it
multiplies; plus NOISE on every product and head weight), and lists the selections where the lowest selected
score minus its bound does not exceed the highest dropped score plus its bound (an exact tie always does).
NOISE = 1e-6, about the largest relative deviation of our fp32 logits from transformers on the V3 fixtures.
A test failing only at a listed (layer, position) is a boundary flip, not a mistake.

Usage: /path/to/venv-with-torch/bin/python tools/model/gen_v3_fixtures.py [--out tests/model/data]
Needs torch and transformers with deepseek_v3 and deepseek_v32 (5.x). Deterministic: seeded, single-threaded.
"""
import argparse
import copy
import json
import os
import shutil

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM
from transformers.models.deepseek_v32 import modeling_deepseek_v32 as v32_modeling

GREEDY_NEW_TOKENS = 32

BASE = dict(
    architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", vocab_size=256, hidden_size=64,
    intermediate_size=96, moe_intermediate_size=24, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=4, n_shared_experts=1, n_routed_experts=16, num_experts_per_tok=3, routed_scaling_factor=2.5,
    kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, topk_method="noaux_tc",
    scoring_func="sigmoid", norm_topk_prob=True, first_k_dense_replace=1, moe_layer_freq=1, hidden_act="silu",
    max_position_embeddings=4096, rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=1, tie_word_embeddings=False,
    rope_theta=10000.0, attention_bias=False, attention_dropout=0.0, initializer_range=0.02,
    num_nextn_predict_layers=0,
)

# a: the released shape in miniature: low-rank query, YaRN with mscale = mscale_all_dim (cos and sin
#    unscaled, softmax scale × mscale²), 4 groups of 4 experts keeping 2, BF16 weights.
# c: a's shape with heads of 32 + 8 (v 32) and FP8 E4M3 weights in 32×32 blocks with fp32 `weight_scale_inv`,
#    many of them partial (kv_a_proj_with_mqa's 40 rows are 1.25 blocks, q_b_proj's 24 inputs 0.75, the
#    experts' 24 rows 0.75) while kv_b_proj's heads start on blocks (as released: 128 + 128 rows per head):
#    the reference runs on the weights dequantized here over the ceil-div grid (value × its block's scale).
# b: a direct q_proj (q_lora_rank null), YaRN with mscale ≠ mscale_all_dim (an attention factor ≠ 1 on cos
#    and sin), 2 groups keeping 1, no norm_topk_prob, fp32 weights, and an MTP layer (an MoE one, as released).
V32 = dict(architectures=["DeepseekV32ForCausalLM"], model_type="deepseek_v32", index_n_heads=16, index_head_dim=32)

# V3.2 (the indexer in every layer, index_topk below the sequences' lengths):
# v32_a: a's shape with 8 experts (4 groups keeping 2), BF16 weights, index_topk 24, fp32 indexer scales.
# v32_b: fp32 weights, 12 index heads of 16, index_topk 40, power-of-two indexer scales (scale_fmt ue8m0
#        in a quantization_config without FP8 weights), no YaRN, routing as b over 8 experts.
# v32_c: c's FP8 E4M3 weights in 32×32 blocks with fp32 scales, partial last blocks included (the indexer's
#        wq_b takes 24 inputs: 0.75 blocks), 2 layers, 8 index heads of 32, index_topk 40, and an MTP layer with
#        its own indexer (the reference's MTP layer is a V3.2 decoder layer).
FIXTURES = {
    "v3_tiny_a_bf16": dict(
        seed=3301, bf16=True,
        config=dict(q_lora_rank=24, n_group=4, topk_group=2, max_position_embeddings=2560,
                    rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                                  "original_max_position_embeddings": 64, "type": "yarn"}),
        seq_lens=[5, 40, 150], greedy_prompt_len=20,
    ),
    "v3_tiny_c_fp8": dict(
        seed=3303, bf16=False, fp8_block=32,
        config=dict(q_lora_rank=24, n_group=4, topk_group=2, max_position_embeddings=2560, qk_nope_head_dim=32,
                    v_head_dim=32,
                    rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                                  "original_max_position_embeddings": 64, "type": "yarn"}),
        seq_lens=[40, 150], greedy_prompt_len=16,
    ),
    "v3_tiny_b_f32": dict(
        seed=3302, bf16=False,
        config=dict(q_lora_rank=None, n_group=2, topk_group=1, norm_topk_prob=False, routed_scaling_factor=1.0,
                    num_hidden_layers=2, max_position_embeddings=256, num_nextn_predict_layers=1,
                    rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 8, "mscale": 1.0, "mscale_all_dim": 0.5,
                                  "original_max_position_embeddings": 32, "type": "yarn"}),
        seq_lens=[7, 150], greedy_prompt_len=12,
    ),
    "v32_tiny_a_bf16": dict(
        seed=3321, bf16=True,
        config=dict(V32, q_lora_rank=24, n_routed_experts=8, n_group=4, topk_group=2, max_position_embeddings=2560, index_topk=24,
                    rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                                  "original_max_position_embeddings": 64, "type": "yarn"}),
        seq_lens=[5, 40, 150], greedy_prompt_len=30,
    ),
    "v32_tiny_b_f32": dict(
        seed=3322, bf16=False,
        config=dict(V32, q_lora_rank=32, n_routed_experts=8, n_group=2, topk_group=1, norm_topk_prob=False, routed_scaling_factor=1.0,
                    num_hidden_layers=2, max_position_embeddings=512, index_topk=40, index_n_heads=12,
                    index_head_dim=16, quantization_config={"scale_fmt": "ue8m0"}),
        seq_lens=[7, 150], greedy_prompt_len=36,
    ),
    "v32_tiny_c_fp8": dict(
        seed=3324, bf16=False, fp8_block=32,
        config=dict(V32, q_lora_rank=24, n_routed_experts=8, n_group=4, topk_group=2, num_hidden_layers=2,
                    qk_nope_head_dim=32, v_head_dim=32, max_position_embeddings=512, index_topk=40, index_n_heads=8,
                    num_nextn_predict_layers=1),
        seq_lens=[40, 150], greedy_prompt_len=24,
    ),
}

NOISE = 1e-6
E4M3_MAX = 448.0


class Init:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def randn(self, *shape, scale=1.0):
        return torch.randn(*shape, generator=self.g, dtype=torch.float32) * scale

    def linear(self, out_f, in_f, gain=1.0):
        return self.randn(out_f, in_f, scale=gain / np.sqrt(in_f))

    def norm(self, n):
        return 1.0 + self.randn(n, scale=0.1)


def checkpoint_tensors(c, seed):
    init = Init(seed)
    d, h = c["hidden_size"], c["num_attention_heads"]
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    t = {"model.embed_tokens.weight": init.randn(c["vocab_size"], d), "model.norm.weight": init.norm(d),
         "lm_head.weight": init.linear(c["vocab_size"], d)}

    def mlp(prefix, inter):
        t[prefix + "gate_proj.weight"] = init.linear(inter, d)
        t[prefix + "up_proj.weight"] = init.linear(inter, d)
        t[prefix + "down_proj.weight"] = init.linear(d, inter)

    def decoder_layer(layer):
        p = f"model.layers.{layer}."
        t[p + "input_layernorm.weight"] = init.norm(d)
        t[p + "post_attention_layernorm.weight"] = init.norm(d)
        a = p + "self_attn."
        if c["q_lora_rank"]:
            t[a + "q_a_proj.weight"] = init.linear(c["q_lora_rank"], d)
            t[a + "q_a_layernorm.weight"] = init.norm(c["q_lora_rank"])
            t[a + "q_b_proj.weight"] = init.linear(h * qk, c["q_lora_rank"])
        else:
            t[a + "q_proj.weight"] = init.linear(h * qk, d)
        t[a + "kv_a_proj_with_mqa.weight"] = init.linear(c["kv_lora_rank"] + c["qk_rope_head_dim"], d)
        t[a + "kv_a_layernorm.weight"] = init.norm(c["kv_lora_rank"])
        t[a + "kv_b_proj.weight"] = init.linear(h * (c["qk_nope_head_dim"] + c["v_head_dim"]), c["kv_lora_rank"])
        t[a + "o_proj.weight"] = init.linear(d, h * c["v_head_dim"])
        if c.get("index_topk"):
            ih, idim = c["index_n_heads"], c["index_head_dim"]
            t[a + "indexer.wq_b.weight"] = init.linear(ih * idim, c["q_lora_rank"])
            t[a + "indexer.wk.weight"] = init.linear(idim, d)
            t[a + "indexer.k_norm.weight"] = init.norm(idim)
            t[a + "indexer.k_norm.bias"] = init.randn(idim, scale=0.1)
            t[a + "indexer.weights_proj.weight"] = init.linear(ih, d)
        m = p + "mlp."
        if layer < c["first_k_dense_replace"]:
            mlp(m, c["intermediate_size"])
            return
        t[m + "gate.weight"] = init.linear(c["n_routed_experts"], d, gain=2.0)
        # A bias of the size of the score spread, so that it changes which groups and experts win.
        t[m + "gate.e_score_correction_bias"] = init.randn(c["n_routed_experts"], scale=0.1)
        for e in range(c["n_routed_experts"]):
            mlp(m + f"experts.{e}.", c["moe_intermediate_size"])
        mlp(m + "shared_experts.", c["moe_intermediate_size"] * c["n_shared_experts"])

    for layer in range(c["num_hidden_layers"]):
        decoder_layer(layer)
    if c["num_nextn_predict_layers"]:
        # The MTP layer as released: index num_hidden_layers, its decoder layer plus enorm, hnorm, eh_proj
        # and shared_head.norm (the released copies of the embedding and head are left out: they are the
        # main model's).
        layer = c["num_hidden_layers"]
        decoder_layer(layer)
        p = f"model.layers.{layer}."
        t[p + "enorm.weight"] = init.norm(d)
        t[p + "hnorm.weight"] = init.norm(d)
        t[p + "eh_proj.weight"] = init.linear(d, 2 * d)
        t[p + "shared_head.norm.weight"] = init.norm(d)
    return t


def quantize_fp8(w, block):
    """FP8 E4M3 blocks of block × block (the last ones partial) with fp32 scales amax / 448, and the
    dequantized weight (each value times its block's scale) the reference runs on."""
    rows, cols = w.shape
    grid = ((rows + block - 1) // block, (cols + block - 1) // block)
    scales = torch.ones(grid, dtype=torch.float32)
    for r in range(grid[0]):
        for c in range(grid[1]):
            amax = w[r * block:(r + 1) * block, c * block:(c + 1) * block].abs().max()
            if amax > 0:
                scales[r, c] = amax / 448.0
    expanded = scales.repeat_interleave(block, 0)[:rows].repeat_interleave(block, 1)[:, :cols]
    q = (w / expanded).to(torch.float8_e4m3fn)
    return q, scales, q.float() * expanded


def is_fp8_matrix(name, tensor):
    # As released: the embedding, lm_head, the router and the indexer's head weights stay in full precision.
    return tensor.dim() == 2 and not name.startswith(("model.embed_tokens", "lm_head")) and not name.endswith(
        ("mlp.gate.weight", "indexer.weights_proj.weight"))


def write_fixture(name, spec, out_root):
    torch.manual_seed(spec["seed"])
    c = dict(BASE)
    c.update(spec["config"])
    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    tensors = checkpoint_tensors(c, spec["seed"])
    stored, reference_weights = {}, None
    if spec.get("fp8_block"):
        block = spec["fp8_block"]
        c["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                    "weight_block_size": [block, block]}
        reference_weights = {}
        for k, v in tensors.items():
            if is_fp8_matrix(k, v):
                q, scales, dequantized = quantize_fp8(v, block)
                stored[k] = q.contiguous()
                stored[k.removesuffix(".weight") + ".weight_scale_inv"] = scales.contiguous()
                reference_weights[k] = dequantized.contiguous()
            else:
                stored[k] = v.contiguous()
                reference_weights[k] = v.contiguous()
        tensors = {}
    for k, v in tensors.items():
        # BF16 fixtures: matrices and the embedding in BF16 (as released); norms, the router bias in fp32.
        keep_f32 = k.endswith(("layernorm.weight", "norm.weight", "norm.bias", "correction_bias"))
        stored[k] = v.to(torch.bfloat16) if spec["bf16"] and not keep_f32 else v
        stored[k] = stored[k].contiguous()
    save_file(stored, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")

    reference_dir = out
    if reference_weights is None and "quantization_config" in c:
        reference_weights = stored  # only the indexer's scale format: the weights are as stored
    if reference_weights is not None:
        # transformers' own CPU FP8 path is not the reference: it runs on weights dequantized above.
        reference_dir = os.path.join(out_root, name + ".dequantized")
        shutil.rmtree(reference_dir, ignore_errors=True)
        os.makedirs(reference_dir)
        save_file(reference_weights, os.path.join(reference_dir, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(reference_dir, "config.json"), "w") as f:
            json.dump({k: v for k, v in c.items() if k != "quantization_config"}, f, indent=2)
    model, info = AutoModelForCausalLM.from_pretrained(reference_dir, dtype=torch.float32,
                                                       attn_implementation="eager", output_loading_info=True)
    mtp_prefix = f"model.layers.{c['num_hidden_layers']}."
    assert not info["missing_keys"], info
    assert all(k.startswith(mtp_prefix) for k in info["unexpected_keys"]), info["unexpected_keys"]
    model.eval()
    # The loaded parameters are exactly the stored (or dequantized) values, BF16 widened to fp32.
    sd = model.state_dict()
    expected = reference_weights if reference_weights is not None else stored
    for k in ("model.layers.1.self_attn.kv_b_proj.weight", "model.layers.1.self_attn.kv_a_proj_with_mqa.weight",
              "model.layers.1.mlp.gate.e_score_correction_bias"):
        assert torch.equal(sd[k], expected[k].float()), k
    if reference_dir != out:
        shutil.rmtree(reference_dir)

    INDEXER.reset(c)
    rng = np.random.default_rng(spec["seed"])
    ref = {}
    with torch.no_grad():
        for i, n in enumerate(spec["seq_lens"]):
            tokens = rng.integers(0, c["vocab_size"], size=n).astype(np.int32)
            logits = model(torch.from_numpy(tokens).long()[None]).logits[0]
            ref[f"seq{i}.tokens"] = tokens
            ref[f"seq{i}.logits"] = logits.float().numpy()
        prompt = rng.integers(0, c["vocab_size"], size=spec["greedy_prompt_len"]).astype(np.int32)
        ids = torch.from_numpy(prompt).long()[None]
        margins = []
        for _ in range(GREEDY_NEW_TOKENS):
            last = model(ids).logits[0, -1]
            top2 = torch.topk(last, 2).values
            margins.append(float(top2[0] - top2[1]))
            ids = torch.cat([ids, last.argmax().view(1, 1)], dim=1)
        generated = ids[0, len(prompt):].numpy().astype(np.int32)
        cached = model.generate(torch.from_numpy(prompt).long()[None], max_new_tokens=GREEDY_NEW_TOKENS,
                                do_sample=False, min_new_tokens=GREEDY_NEW_TOKENS, eos_token_id=None, pad_token_id=0)
        assert np.array_equal(cached[0, len(prompt):].numpy(), generated), "cached decode disagrees"
    ref["greedy.prompt"] = prompt
    ref["greedy.output"] = generated
    if c["num_nextn_predict_layers"]:
        mtp_tokens = ref[f"seq{len(spec['seq_lens']) - 1}.tokens"]
        ref["mtp.tokens"] = mtp_tokens.copy()
        ref["mtp.logits"] = mtp_reference(model, {k: v.float() for k, v in expected.items()}, mtp_prefix, mtp_tokens)
    save_file({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in ref.items()},
              os.path.join(out, "reference.safetensors"))
    print(f"{name}: {len(stored)} tensors, sequences {spec['seq_lens']}, greedy {len(prompt)}+{len(generated)}, "
          f"smallest greedy top-2 margin {min(margins):.4f}")
    if c.get("index_topk"):
        print(INDEXER.summary())
        fragile = sorted(set(INDEXER.unsafe))
        print(f"  indexer: {len(fragile)} selections within reach of rounding noise{': ' if fragile else ''}" +
              "; ".join(fragile[:12]))


def e4m3_grid():
    """The non-negative finite E4M3 values, ascending."""
    codes = torch.arange(0, 256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()
    values = codes[torch.isfinite(codes) & (codes >= 0)].unique()
    return values.double().numpy()


GRID = e4m3_grid()


def fp8_blocks(x, block, pow2):
    """DeepSeek's act_quant over the last dim in blocks: (scaled values x / s before rounding, scales, the
    dequantized values)."""
    shape = x.shape
    xb = x.reshape(*shape[:-1], shape[-1] // block, block)
    amax = xb.abs().amax(-1, keepdim=True).clamp(min=1e-4)
    s = amax * torch.tensor(1.0 / E4M3_MAX, dtype=torch.float32)
    if pow2:
        mantissa, exponent = torch.frexp(s)
        s = torch.ldexp(torch.ones_like(s), exponent - (mantissa == 0.5).to(exponent.dtype))
    y = xb / s
    q = y.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).float() * s
    return y.reshape(shape), s.expand_as(xb).reshape(shape), q.reshape(shape)


def hadamard(x):
    n = x.shape[-1]
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (x @ h.T) * n ** -0.5


def flip_quantum(y, scale, pow2):
    """Per value: how far its dequantized value may move when the value before rounding moves by NOISE of its
    block's amax (448 · NOISE in scaled units): the neighbouring code's distance where a rounding midpoint is
    that close, else 0."""
    a = np.abs(y.astype(np.float64))
    reach = E4M3_MAX * NOISE * 2  # the value itself and the scale both move
    i = np.clip(np.searchsorted(GRID, a), 1, len(GRID) - 1)
    lo, hi = GRID[i - 1], GRID[i]
    mid = (lo + hi) / 2
    near = (np.abs(a - mid) < reach) & (a < E4M3_MAX)
    return np.where(near, (hi - lo) * scale, 0.0)


class IndexerRecorder:
    """Checks every cache-free indexer call's selections against the flip bound and counts what selection and
    rounding change."""

    def reset(self, config):
        self.pow2 = (config.get("quantization_config") or {}).get("scale_fmt") == "ue8m0"
        self.block = min(128, config.get("index_head_dim", 128))
        self.rows = self.sparse_rows = self.rounding_changed = 0
        self.worst = float("inf")
        self.unsafe = []

    def check(self, layer, qy, qs, q, ky, ks, k, weights, scores, valid, topk_idx, plain_scores):
        # qy/qs/q: [S, H, D] scaled values, scales, dequantized; ky/ks/k: [T, D]; weights [S, H] (× softmax
        # scale); scores [S, T]; valid [S, T] causal; topk_idx [S, k].
        qy, qs, q, ky, ks, k = (v.double().numpy() for v in (qy, qs, q, ky, ks, k))
        w = np.abs(weights.double().numpy())
        scores, valid = scores.double().numpy(), valid.numpy()
        dq, dk = flip_quantum(qy, qs, self.pow2), flip_quantum(ky, ks, self.pow2)
        # |Δ(q_h · k_t)| ≤ Σ_i dq·(|k| + dk) + Σ_i dk·|q| + NOISE · Σ_i |q||k|; relu is 1-Lipschitz.
        ak, aq = np.abs(k) + dk, np.abs(q)
        dot_bound = (np.einsum("shi,ti->sht", dq, ak) + np.einsum("shi,ti->sht", aq, dk) +
                     NOISE * np.einsum("shi,ti->sht", aq, np.abs(k)))
        relu_dot = np.maximum(np.einsum("shi,ti->sht", q, k), 0)
        bound = np.einsum("sh,sht->st", w, dot_bound + NOISE * relu_dot) + NOISE * np.abs(scores)
        S = scores.shape[0]
        for s_ in range(S):
            n = int(valid[s_].sum())
            self.rows += 1
            if n <= topk_idx.shape[1]:
                continue
            self.sparse_rows += 1
            chosen = np.zeros(scores.shape[1], bool)
            chosen[topk_idx[s_].numpy()] = True
            chosen &= valid[s_]
            dropped = valid[s_] & ~chosen
            low = (scores[s_] - bound[s_])[chosen].min()
            high = (scores[s_] + bound[s_])[dropped].max()
            gap = scores[s_][chosen].min() - scores[s_][dropped].max()
            self.worst = min(self.worst, gap / max(gap - (low - high), 1e-30))
            if low <= high:
                self.unsafe.append(f"layer {layer} position {s_} (gap {gap:.3e}, bound {gap - (low - high):.3e})")
            plain = plain_scores[s_].double().numpy().copy()
            plain[~valid[s_]] = -np.inf
            plain_top = set(np.argsort(-plain, kind="stable")[:topk_idx.shape[1]].tolist())
            self.rounding_changed += plain_top != set(np.nonzero(chosen)[0].tolist())

    def summary(self):
        return (f"  indexer: {self.sparse_rows} of {self.rows} checked (layer, query) rows drop keys; "
                f"the FP8 rounding changes the selection in {self.rounding_changed} of them against unrounded "
                f"scores; smallest selection gap / flip bound {self.worst:.1f}")


INDEXER = IndexerRecorder()


def fake_quantized_indexer_forward(self, hidden_states, q_resid, position_embeddings, attention_mask, position_ids,
                                   cache=None):
    """transformers' DeepseekV32Indexer.forward plus the released rounding (module docstring)."""
    batch_size, seq_len, _ = hidden_states.shape
    cos, sin = position_embeddings
    q = self.wq_b(q_resid).view(batch_size, seq_len, self.n_heads, self.head_dim)
    q_rot, q_pass = torch.split(q, [self.qk_rope_head_dim, self.head_dim - self.qk_rope_head_dim], dim=-1)
    k = self.k_norm(self.wk(hidden_states)).unsqueeze(2)
    k_rot, k_pass = torch.split(k, [self.qk_rope_head_dim, self.head_dim - self.qk_rope_head_dim], dim=-1)
    q_rot, k_rot = v32_modeling.apply_rotary_pos_emb(q_rot, k_rot, cos, sin, unsqueeze_dim=2)
    q_plain = torch.cat([q_rot, q_pass], dim=-1)
    k_plain = torch.cat([k_rot, k_pass], dim=-1).squeeze(2)
    qy, qs, q = fp8_blocks(hadamard(q_plain), INDEXER.block, INDEXER.pow2)
    ky, ks, k = fp8_blocks(hadamard(k_plain), INDEXER.block, INDEXER.pow2)
    if cache is not None:
        k = cache.update_indexer(k, self.layer_idx)
    fresh = k.shape[-2] == seq_len
    scores = F.relu(torch.matmul(q.float(), k.transpose(-1, -2).float().unsqueeze(1)) * self.softmax_scale)
    weights = self.weights_proj(hidden_states.to(self.weights_proj.weight.dtype)).float() * (self.n_heads ** -0.5)
    index_scores = torch.matmul(weights.unsqueeze(-2), scores).squeeze(-2)
    valid = attention_mask == 0 if attention_mask.dtype != torch.bool else attention_mask
    masked = index_scores.masked_fill(~valid, float("-inf"))
    topk = min(self.index_topk, masked.shape[-1])
    topk_indices = masked.topk(topk, dim=-1).indices
    if fresh and batch_size == 1:
        plain = F.relu(torch.matmul(q_plain.float(), k_plain.transpose(-1, -2).float().unsqueeze(1)) * self.softmax_scale)
        plain_scores = torch.matmul(weights.unsqueeze(-2), plain).squeeze(-2)
        INDEXER.check(self.layer_idx, qy[0], qs[0], q[0], ky[0], ks[0], k[0], weights[0] * self.softmax_scale,
                      index_scores[0], valid[0], topk_indices[0], plain_scores[0])
    return topk_indices.to(torch.int32)


v32_modeling.DeepseekV32Indexer.forward = fake_quantized_indexer_forward


def mtp_reference(model, weights, prefix, tokens):
    """MTP logits per DeepSeek's reference MTP, composed from transformers' modules of the model's own family
    (a V3.2 MTP layer has its own indexer, over the MTP layer's positions)."""
    config = model.config
    if getattr(config, "mlp_layer_types", None) is not None:  # V3.2's per-layer list: the MTP layer is an MoE one
        config = copy.deepcopy(config)
        config.mlp_layer_types = list(config.mlp_layer_types) + ["sparse"]
    layer = type(model.model.layers[0])(config, config.num_hidden_layers).eval()
    sd = {k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)}
    extra = {k: sd.pop(k) for k in ("enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight")}
    e = config.n_routed_experts
    for i in range(e):
        sd[f"mlp.experts.{i}.gate_up_proj"] = torch.cat([sd.pop(f"mlp.experts.{i}.gate_proj.weight"),
                                                         sd.pop(f"mlp.experts.{i}.up_proj.weight")])
        sd[f"mlp.experts.{i}.down_proj"] = sd.pop(f"mlp.experts.{i}.down_proj.weight")
    sd["mlp.experts.gate_up_proj"] = torch.stack([sd.pop(f"mlp.experts.{i}.gate_up_proj") for i in range(e)])
    sd["mlp.experts.down_proj"] = torch.stack([sd.pop(f"mlp.experts.{i}.down_proj") for i in range(e)])
    layer.load_state_dict(sd, strict=True)

    def rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + config.rms_norm_eps))

    ids = torch.from_numpy(tokens).long()[None]
    with torch.no_grad():
        captured = {}
        hook = model.model.layers[-1].register_forward_hook(lambda mod, inp, out: captured.__setitem__("h", out))
        model(ids, use_cache=False)
        hook.remove()
        hidden = captured["h"][:, :-1]  # the main model's last hidden state (before its norm) at 0..T-2
        emb = model.model.embed_tokens(ids[:, 1:])
        x = torch.cat([rms(emb, extra["enorm.weight"]), rms(hidden, extra["hnorm.weight"])], dim=-1)
        x = x @ extra["eh_proj.weight"].T
        s = x.shape[1]
        pos = torch.arange(s)[None]
        mask = torch.full((s, s), float("-inf")).triu(1)[None, None]
        y = layer(x, attention_mask=mask, position_ids=pos, position_embeddings=model.model.rotary_emb(x, pos))
        y = rms(y, extra["shared_head.norm.weight"])
        logits = model.lm_head(y)[0]
    return logits.float().numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "model", "data"))
    parser.add_argument("--only", default=None, help="write only this fixture")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name, spec in FIXTURES.items():
        if args.only is None or args.only == name:
            write_fixture(name, spec, args.out)


if __name__ == "__main__":
    main()
