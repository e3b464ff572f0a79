#!/usr/bin/env python3
"""Builds the DeepSeek-V4 reference fixtures in tests/model/data/ with Hugging Face transformers.

Each fixture is a tiny random V4 checkpoint in the released layout (config.json with the released keys,
model.safetensors with DeepSeek's tensor names, e.g. `layers.0.attn.wq_a.weight`, `mtp.0.e_proj.weight`)
plus reference.safetensors holding what transformers' `deepseek_v4` model computes from it:

  seq{i}.tokens   I32 [T]        fixed random token ids
  seq{i}.logits   F32 [T, V]     logits at every position of one full-prefill forward pass
  greedy.prompt   I32 [P]        a prompt
  greedy.output   I32 [64]       64 greedy tokens after it (argmax of a full forward at each step; checked
                                 against transformers' cached decode)
  mtp.tokens      I32 [T]        tokens for the MTP check (= seq1.tokens)
  mtp.logits      F32 [T-1, V]   MTP logits at positions 0..T-2 (inputs: main-model streams at t and the
                                 embedding of token t+1). transformers has no MTP; this follows DeepSeek's
                                 reference MTPBlock (enorm/hnorm, e_proj + h_proj, one block, own hc_head,
                                 own norm, shared head) built from transformers' own V4 layer modules.

Usage: .venv/bin/python tools/model/gen_fixtures.py [--out tests/model/data]
Needs torch and transformers (scripts/setup.sh --reference). Deterministic: seeded, single-threaded.
"""
import argparse
import json
import os
import shutil

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM, DynamicCache
from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4DecoderLayer, DeepseekV4HyperHead

GREEDY_NEW_TOKENS = 64

# Tiny configs that together exercise every layer type and routing mode. Keys follow the released
# config.json (compress_ratios with one extra entry for the MTP layer, num_hash_layers, qk_rope_head_dim,
# rope_scaling); `compress_rates` is transformers' override of the per-type ratio, used to make HCA small.
FIXTURES = {
    # Sliding / CSA / HCA layers with a small HCA ratio (8) and window (16), so short sequences cross the
    # window and many compression groups; index_topk 3 so the indexer's selection matters. BF16 linears.
    "v4_mixed": dict(
        seed=1234,
        bf16=True,
        tid2eid_dtype=np.int32,
        config=dict(
            vocab_size=256, hidden_size=64, num_hidden_layers=5, num_attention_heads=4, num_key_value_heads=1,
            head_dim=64, qk_rope_head_dim=16, q_lora_rank=32, o_groups=2, o_lora_rank=24,
            n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, moe_intermediate_size=16,
            num_hash_layers=2, scoring_func="sqrtsoftplus", norm_topk_prob=True, routed_scaling_factor=1.5,
            swiglu_limit=10.0, sliding_window=16, compress_ratios=[0, 4, 128, 4, 128, 0],
            compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
            index_n_heads=16, index_head_dim=32, index_topk=3, hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6,
            rope_theta=10000.0, compress_rope_theta=160000.0,
            rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 16, "original_max_position_embeddings": 64,
                          "type": "yarn"},
            max_position_embeddings=4096, num_nextn_predict_layers=1, rms_norm_eps=1e-6,
        ),
        seq_lens=[5, 40, 150],
        greedy_prompt_len=20,
    ),
    # The released ratios (CSA 4, HCA 128) with a 32-token window, hc_mult 2, a small SwiGLU limit so the
    # clamp acts, three routed experts per token, F32 weights and an int64 tid2eid table.
    "v4_hca128": dict(
        seed=99,
        bf16=False,
        tid2eid_dtype=np.int64,
        config=dict(
            vocab_size=256, hidden_size=48, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
            head_dim=32, qk_rope_head_dim=8, q_lora_rank=24, o_groups=1, o_lora_rank=16,
            n_routed_experts=6, n_shared_experts=1, num_experts_per_tok=3, moe_intermediate_size=12,
            num_hash_layers=1, scoring_func="sqrtsoftplus", norm_topk_prob=True, routed_scaling_factor=2.5,
            swiglu_limit=0.8, sliding_window=32, compress_ratios=[128, 4, 0, 0],
            index_n_heads=16, index_head_dim=16, index_topk=5, hc_mult=2, hc_sinkhorn_iters=20, hc_eps=1e-6,
            rope_theta=10000.0, compress_rope_theta=160000.0,
            rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 16, "original_max_position_embeddings": 128,
                          "type": "yarn"},
            max_position_embeddings=4096, num_nextn_predict_layers=1, rms_norm_eps=1e-6,
        ),
        seq_lens=[9, 300],
        greedy_prompt_len=100,
    ),
}


def full_config(c):
    out = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "bos_token_id": 0,
           "eos_token_id": 1, "tie_word_embeddings": False, "hidden_act": "silu", "topk_method": "noaux_tc",
           "torch_dtype": "bfloat16"}
    out.update(c)
    return out


class Init:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def randn(self, *shape, scale=1.0):
        return torch.randn(*shape, generator=self.g) * scale

    def linear(self, out_f, in_f, gain=1.0):
        return self.randn(out_f, in_f, scale=gain / in_f**0.5)

    def norm(self, n):
        return 1.0 + self.randn(n, scale=0.1)


def block_tensors(init, c, prefix, ratio, is_hash, tid2eid_dtype):
    """Tensors of one block (main layer or MTP) under `prefix`, as (name -> (tensor, keep_fp32))."""
    d, h, hd = c["hidden_size"], c["num_attention_heads"], c["head_dim"]
    hc = c["hc_mult"]
    t = {}
    a = prefix + "attn."
    t[a + "wq_a.weight"] = (init.linear(c["q_lora_rank"], d), False)
    t[a + "q_norm.weight"] = (init.norm(c["q_lora_rank"]), True)
    t[a + "wq_b.weight"] = (init.linear(h * hd, c["q_lora_rank"]), False)
    t[a + "wkv.weight"] = (init.linear(hd, d), False)
    t[a + "kv_norm.weight"] = (init.norm(hd), True)
    group_in = h * hd // c["o_groups"]
    t[a + "wo_a.weight"] = (init.linear(c["o_groups"] * c["o_lora_rank"], group_in), False)
    t[a + "wo_b.weight"] = (init.linear(d, c["o_groups"] * c["o_lora_rank"]), False)
    t[a + "attn_sink"] = (init.randn(h), True)
    if ratio:
        rate = c.get("compress_rates", {}).get(
            "compressed_sparse_attention" if ratio == 4 else "heavily_compressed_attention", ratio)
        coff = 2 if ratio == 4 else 1
        cp = a + "compressor."
        t[cp + "wkv.weight"] = (init.linear(coff * hd, d), False)
        t[cp + "wgate.weight"] = (init.linear(coff * hd, d, gain=2.0), False)
        t[cp + "ape"] = (init.randn(rate, coff * hd, scale=0.5), True)
        t[cp + "norm.weight"] = (init.norm(hd), True)
        if ratio == 4:
            ihd, ih = c["index_head_dim"], c["index_n_heads"]
            ip = a + "indexer."
            t[ip + "wq_b.weight"] = (init.linear(ih * ihd, c["q_lora_rank"]), False)
            t[ip + "weights_proj.weight"] = (init.linear(ih, d), False)
            t[ip + "compressor.wkv.weight"] = (init.linear(2 * ihd, d), False)
            t[ip + "compressor.wgate.weight"] = (init.linear(2 * ihd, d, gain=2.0), False)
            t[ip + "compressor.ape"] = (init.randn(rate, 2 * ihd, scale=0.5), True)
            t[ip + "compressor.norm.weight"] = (init.norm(ihd), True)
    t[prefix + "attn_norm.weight"] = (init.norm(d), True)
    t[prefix + "ffn_norm.weight"] = (init.norm(d), True)
    mix = (2 + hc) * hc
    for site in ("attn", "ffn"):
        t[prefix + f"hc_{site}_fn"] = (init.randn(mix, hc * d, scale=1.0 / (hc * d) ** 0.5), True)
        t[prefix + f"hc_{site}_base"] = (init.randn(mix, scale=0.5), True)
        t[prefix + f"hc_{site}_scale"] = (0.5 + torch.rand(3, generator=init.g), True)
    f = prefix + "ffn."
    e, inter = c["n_routed_experts"], c["moe_intermediate_size"]
    t[f + "gate.weight"] = (init.linear(e, d, gain=2.0), False)
    if is_hash:
        table = torch.stack([torch.randperm(e, generator=init.g)[: c["num_experts_per_tok"]]
                             for _ in range(c["vocab_size"])])
        t[f + "gate.tid2eid"] = (table.numpy().astype(tid2eid_dtype), None)
    else:
        t[f + "gate.bias"] = (init.randn(e, scale=0.3), True)
    for i in range(e):
        t[f + f"experts.{i}.w1.weight"] = (init.linear(inter, d, gain=2.0), False)
        t[f + f"experts.{i}.w3.weight"] = (init.linear(inter, d, gain=2.0), False)
        t[f + f"experts.{i}.w2.weight"] = (init.linear(d, inter), False)
    t[f + "shared_experts.w1.weight"] = (init.linear(inter, d, gain=2.0), False)
    t[f + "shared_experts.w3.weight"] = (init.linear(inter, d, gain=2.0), False)
    t[f + "shared_experts.w2.weight"] = (init.linear(d, inter), False)
    return t


def build_checkpoint(spec):
    c = spec["config"]
    init = Init(spec["seed"])
    d, hc = c["hidden_size"], c["hc_mult"]
    t = {"embed.weight": (init.randn(c["vocab_size"], d), False)}
    n = c["num_hidden_layers"]
    for i in range(n):
        t.update(block_tensors(init, c, f"layers.{i}.", c["compress_ratios"][i], i < c["num_hash_layers"],
                               spec["tid2eid_dtype"]))
    t["norm.weight"] = (init.norm(d), True)
    t["hc_head_fn"] = (init.randn(hc, hc * d, scale=1.0 / (hc * d) ** 0.5), True)
    t["hc_head_base"] = (init.randn(hc, scale=0.5), True)
    t["hc_head_scale"] = (0.5 + torch.rand(1, generator=init.g), True)
    t["head.weight"] = (init.linear(c["vocab_size"], d, gain=3.0), False)
    # MTP (compress_ratios[-1] == 0: a sliding-window block with score routing).
    m = "mtp.0."
    t.update(block_tensors(init, c, m, c["compress_ratios"][n], False, spec["tid2eid_dtype"]))
    t[m + "e_proj.weight"] = (init.linear(d, d), False)
    t[m + "h_proj.weight"] = (init.linear(d, d), False)
    t[m + "enorm.weight"] = (init.norm(d), True)
    t[m + "hnorm.weight"] = (init.norm(d), True)
    t[m + "norm.weight"] = (init.norm(d), True)
    t[m + "hc_head_fn"] = (init.randn(hc, hc * d, scale=1.0 / (hc * d) ** 0.5), True)
    t[m + "hc_head_base"] = (init.randn(hc, scale=0.5), True)
    t[m + "hc_head_scale"] = (0.5 + torch.rand(1, generator=init.g), True)

    # Stored arrays: BF16 for the large linears of a BF16 fixture (the values the reference then sees are
    # exactly the BF16 ones, upcast), F32 for the fp32-kept parameters.
    arrays = {}
    for name, (value, keep_fp32) in t.items():
        if keep_fp32 is None:
            arrays[name] = torch.from_numpy(value).contiguous()
        elif spec["bf16"] and not keep_fp32:
            arrays[name] = value.to(torch.bfloat16).contiguous()
        else:
            arrays[name] = value.float().contiguous()
    return arrays


def write_fixture(name, spec, out_root):
    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    config = full_config(spec["config"])
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    arrays = build_checkpoint(spec)
    save_file(arrays, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

    model, info = DeepseekV4ForCausalLM.from_pretrained(out, dtype=torch.float32, output_loading_info=True)
    model.eval()
    assert not info["missing_keys"], info["missing_keys"]
    assert not info["mismatched_keys"], info["mismatched_keys"]
    assert all(k.startswith("mtp.") for k in info["unexpected_keys"]), info["unexpected_keys"]
    # Every stored tensor arrived in the model unchanged (names, transposes and concatenations checked).
    sd = model.state_dict()
    tid = [k for k in arrays if k.endswith("tid2eid")]
    for k in tid:
        layer = k.split(".")[1]
        assert torch.equal(sd[f"model.layers.{layer}.mlp.gate.tid2eid"].long(), arrays[k].long())
    assert torch.equal(sd["lm_head.weight"], arrays["head.weight"].float())

    c = spec["config"]
    rng = np.random.default_rng(spec["seed"])
    ref = {}
    for i, length in enumerate(spec["seq_lens"]):
        tokens = rng.integers(0, c["vocab_size"], size=length).astype(np.int32)
        with torch.no_grad():
            logits = model(torch.from_numpy(tokens).long()[None]).logits[0].float().numpy()
        ref[f"seq{i}.tokens"] = tokens
        ref[f"seq{i}.logits"] = logits

    prompt = rng.integers(0, c["vocab_size"], size=spec["greedy_prompt_len"]).astype(np.int32)
    with torch.no_grad():
        # The oracle is the model's forward: each greedy token is the argmax of a full recomputation over
        # the sequence so far. A cached decode (prefill, then one token per call on a DynamicCache) must agree.
        # (transformers' generate() itself departs from its forward on v4_hca128 after 18 tokens, so it is not
        # used.)
        seq = torch.from_numpy(prompt).long()
        margins = []
        for step in range(GREEDY_NEW_TOKENS):
            last = model(seq[None], use_cache=False).logits[0, -1]
            top2 = torch.topk(last, 2).values
            margins.append(float(top2[0] - top2[1]))
            seq = torch.cat([seq, last.argmax().view(1)])
        generated = seq[len(prompt):].numpy().astype(np.int32)
        cache = DynamicCache(config=model.config)
        logits = model(seq[None, : len(prompt)], past_key_values=cache, use_cache=True).logits[0, -1]
        for step in range(GREEDY_NEW_TOKENS):
            assert int(logits.argmax()) == int(generated[step]), (name, step)
            pos = len(prompt) + step
            logits = model(seq[None, pos : pos + 1], past_key_values=cache, use_cache=True,
                           position_ids=torch.tensor([[pos]])).logits[0, -1]
    ref["greedy.prompt"] = prompt
    ref["greedy.output"] = generated

    mtp_tokens = ref["seq1.tokens"]
    ref["mtp.tokens"] = mtp_tokens.copy()
    ref["mtp.logits"] = mtp_reference(model, arrays, config, mtp_tokens)
    save_file({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in ref.items()},
              os.path.join(out, "reference.safetensors"))
    print(f"{name}: {len(arrays)} tensors, sequences {spec['seq_lens']}, greedy {len(prompt)}+{len(generated)}, "
          f"smallest greedy top-2 margin {min(margins):.4f}")


def mtp_reference(model, arrays, config, tokens):
    """MTP logits per DeepSeek's MTPBlock, composed from transformers' V4 modules."""
    c = DeepseekV4Config(**{**config, "num_hidden_layers": 1, "compress_ratios": [0], "num_hash_layers": 0})
    layer = DeepseekV4DecoderLayer(c, 0).eval()
    head = DeepseekV4HyperHead(c).eval()
    # Load mtp.0.* into the transformers layer through the same renames the model loader applies.
    sd = {}
    renames = [("attn.wq_a.weight", "self_attn.q_a_proj.weight"), ("attn.q_norm.weight", "self_attn.q_a_norm.weight"),
               ("attn.wq_b.weight", "self_attn.q_b_proj.weight"), ("attn.wkv.weight", "self_attn.kv_proj.weight"),
               ("attn.kv_norm.weight", "self_attn.kv_norm.weight"), ("attn.wo_a.weight", "self_attn.o_a_proj.weight"),
               ("attn.wo_b.weight", "self_attn.o_b_proj.weight"), ("attn.attn_sink", "self_attn.sinks"),
               ("attn_norm.weight", "input_layernorm.weight"), ("ffn_norm.weight", "post_attention_layernorm.weight"),
               ("hc_attn_fn", "attn_hc.fn"), ("hc_attn_base", "attn_hc.base"), ("hc_attn_scale", "attn_hc.scale"),
               ("hc_ffn_fn", "ffn_hc.fn"), ("hc_ffn_base", "ffn_hc.base"), ("hc_ffn_scale", "ffn_hc.scale"),
               ("ffn.gate.weight", "mlp.gate.weight"), ("ffn.gate.bias", "mlp.gate.e_score_correction_bias"),
               ("ffn.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"),
               ("ffn.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"),
               ("ffn.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight")]
    f32 = {k: v.float() for k, v in arrays.items() if k.startswith("mtp.")}
    for src, dst in renames:
        sd[dst] = f32["mtp.0." + src]
    e = config["n_routed_experts"]
    sd["mlp.experts.gate_up_proj"] = torch.stack(
        [torch.cat([f32[f"mtp.0.ffn.experts.{i}.w1.weight"], f32[f"mtp.0.ffn.experts.{i}.w3.weight"]]) for i in range(e)])
    sd["mlp.experts.down_proj"] = torch.stack([f32[f"mtp.0.ffn.experts.{i}.w2.weight"] for i in range(e)])
    missing, unexpected = layer.load_state_dict(sd, strict=False)
    assert not unexpected and all("rotary" in k for k in missing), (missing, unexpected)
    head.load_state_dict({"hc_fn": f32["mtp.0.hc_head_fn"], "hc_base": f32["mtp.0.hc_head_base"],
                          "hc_scale": f32["mtp.0.hc_head_scale"]})

    def rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + config["rms_norm_eps"]))

    ids = torch.from_numpy(tokens).long()[None]
    with torch.no_grad():
        # Main model streams after the last layer, before hc_head.
        captured = {}
        last = model.model.layers[-1]
        hook = last.register_forward_hook(lambda mod, inp, out: captured.__setitem__("h", out))
        model(ids, use_cache=False)
        hook.remove()
        streams = captured["h"][:, :-1]  # positions 0..T-2
        next_ids = ids[:, 1:]
        emb = model.model.embed_tokens(next_ids)
        x = f32["mtp.0.e_proj.weight"] @ rms(emb, f32["mtp.0.enorm.weight"]).unsqueeze(-1)
        x = x.squeeze(-1).unsqueeze(2) + torch.einsum("od,bshd->bsho", f32["mtp.0.h_proj.weight"],
                                                      rms(streams, f32["mtp.0.hnorm.weight"]))
        s = x.shape[1]
        pos = torch.arange(s)[None]
        qi, ki = torch.arange(s)[:, None], torch.arange(s)[None, :]
        allowed = (ki <= qi) & (ki > qi - config["sliding_window"])
        mask = torch.zeros(s, s).masked_fill(~allowed, float("-inf"))[None, None]
        rope = model.model.rotary_emb
        pe = {"main": rope(x, position_ids=pos, layer_type="main"), "compress": rope(x, position_ids=pos, layer_type="compress")}
        y = layer(x, position_embeddings=pe, position_ids=pos, attention_mask=mask, input_ids=next_ids,
                  past_key_values=None)
        y = head(y)
        y = rms(y, f32["mtp.0.norm.weight"])
        logits = model.lm_head(y)[0]
    return logits.float().numpy()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "model", "data"))
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for name, spec in FIXTURES.items():
        if args.only and name != args.only:
            continue
        write_fixture(name, spec, args.out)


if __name__ == "__main__":
    main()
