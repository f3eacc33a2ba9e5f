#!/usr/bin/env python3
"""Reference fixtures from Hugging Face transformers for Switchyard's fidelity tests.

For each architecture this builds a tiny random model with transformers (>= 5), saves it with
save_pretrained (f32, checkpoint tensor names), runs a fixed prompt and a greedy continuation in
float32 with eager attention, and writes what the C++ tests compare against:

  <out>/<name>/config.json, model.safetensors   the model, as transformers saves it
  <out>/<name>/reference.json                    prompt ids, greedy continuation, versions
  <out>/<name>/reference.safetensors             prompt_logits [prompt, vocab] f32,
                                                  step_logits [steps, vocab] f32 (logits that
                                                  chose each generated token),
                                                  hidden_states [layers+1, prompt, hidden] f32

Runs wherever torch and transformers are installed (the GPU machine has them); CI only reads the
committed output. Usage: python3 tests/fidelity/make_fixtures.py --out tests/fixtures/fidelity
"""
import argparse
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file

PROMPT = [1, 17, 42, 99, 7, 123, 5, 250, 31, 64]
STEPS = 32
# Weights wider than transformers' 0.02 default make logits peaked enough that a greedy
# continuation is decided by clear margins rather than by float rounding.
INIT_STD = 0.15

COMMON = dict(vocab_size=256, hidden_size=32, max_position_embeddings=512, rms_norm_eps=1e-6,
              tie_word_embeddings=False, initializer_range=INIT_STD)

MODELS = {
    # q_lora, YaRN, n_group > 1, noaux_tc with a random correction bias, one dense layer first.
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", dict(
        COMMON, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=8,
        routed_scaling_factor=2.5, kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8,
        v_head_dim=8, qk_nope_head_dim=8, n_group=4, topk_group=2, num_experts_per_tok=2,
        first_k_dense_replace=1, norm_topk_prob=True, rope_theta=10000.0),
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128,
         "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}),
    # No q_lora (q_proj), softmax greedy routing, two shared experts.
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM", dict(
        COMMON, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=4, n_shared_experts=2, n_routed_experts=8,
        routed_scaling_factor=1.0, kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8,
        v_head_dim=8, qk_nope_head_dim=8, topk_method="greedy", n_group=1, topk_group=1,
        num_experts_per_tok=2, first_k_dense_replace=1, norm_topk_prob=False, rope_theta=10000.0),
        None),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(
        COMMON, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_experts=8,
        num_experts_per_tok=2, decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True,
        rope_theta=1000000.0, attention_bias=False), None),
    # Partial RoPE (half of each head), q/k/v biases, grouped sigmoid routing with a correction
    # bias, one dense layer first; with and without per-head q/k norms.
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM", dict(
        COMMON, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, partial_rotary_factor=0.5,
        n_shared_experts=1, n_routed_experts=8, routed_scaling_factor=2.5, n_group=4, topk_group=2,
        num_experts_per_tok=2, first_k_dense_replace=1, norm_topk_prob=True, rope_theta=1000000.0,
        attention_bias=True, use_qk_norm=False), None),
    "glm4_moe_qk_norm": ("Glm4MoeConfig", "Glm4MoeForCausalLM", dict(
        COMMON, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, partial_rotary_factor=0.5,
        n_shared_experts=1, n_routed_experts=8, routed_scaling_factor=2.5, n_group=4, topk_group=2,
        num_experts_per_tok=2, first_k_dense_replace=1, norm_topk_prob=True, rope_theta=1000000.0,
        attention_bias=True, use_qk_norm=True), None),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(
        COMMON, intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2,
        rope_theta=1000000.0), None),
}


# Seeds other than the default where the default gives a greedy continuation decided by a top-2
# margin under 0.005 (too close to float rounding to compare against).
SEEDS = {"glm4_moe": 1235, "glm4_moe_qk_norm": 1237}


def make_config(cls_name, kwargs, rope):
    cls = getattr(transformers, cls_name)
    if rope is None:
        config = cls(**kwargs)
        # transformers >= 5 may keep partial_rotary_factor inside rope_parameters only.
        partial = kwargs.get("partial_rotary_factor")
        params = getattr(config, "rope_parameters", None)
        if partial is not None and isinstance(params, dict) and params.get("partial_rotary_factor", partial) != partial:
            raise ValueError(f"partial_rotary_factor {params.get('partial_rotary_factor')} in rope_parameters, asked {partial}")
        return config
    try:  # transformers >= 5 spells it rope_parameters (with rope_theta inside)
        return cls(**kwargs, rope_parameters=dict(rope, rope_theta=kwargs["rope_theta"]))
    except TypeError:
        return cls(**kwargs, rope_scaling=dict(rope, type=rope["rope_type"]))


def randomise(model, seed):
    """Every parameter random (norms around 1, biases small) so no path is trivially zero."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif "e_score_correction_bias" in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(INIT_STD * torch.randn(p.shape, generator=g))
        for name, b in model.named_buffers():
            if "e_score_correction_bias" in name:
                b.copy_(0.1 * torch.randn(b.shape, generator=g))


def build(name, out_dir, seed):
    cls_name, model_name, kwargs, rope = MODELS[name]
    config = make_config(cls_name, kwargs, rope)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).to(torch.float32).eval()
    randomise(model, seed)
    target = os.path.join(out_dir, name)
    os.makedirs(target, exist_ok=True)
    model.save_pretrained(target, safe_serialization=True)

    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        out = model(ids, output_hidden_states=True, use_cache=False)
        prompt_logits = out.logits[0].float().contiguous()
        hidden = torch.stack([h[0] for h in out.hidden_states]).float().contiguous()
        # Greedy continuation token by token with the KV cache, keeping each step's logits.
        generated, step_logits, margins = [], [], []
        past = None
        step_input = ids
        for _ in range(STEPS):
            o = model(step_input, past_key_values=past, use_cache=True)
            past = o.past_key_values
            logits = o.logits[0, -1].float()
            top2 = torch.topk(logits, 2).values
            margins.append(float(top2[0] - top2[1]))
            token = int(torch.argmax(logits))
            generated.append(token)
            step_logits.append(logits.clone())
            step_input = torch.tensor([[token]])
        # Cross-check with generate() so the fixture is what users of transformers would see.
        gen = model.generate(ids, max_new_tokens=STEPS, do_sample=False, min_new_tokens=STEPS,
                             eos_token_id=None, pad_token_id=0)
        assert gen[0, len(PROMPT):].tolist() == generated, "generate() disagrees with the manual loop"

    save_file({"prompt_logits": prompt_logits, "step_logits": torch.stack(step_logits).contiguous(),
               "hidden_states": hidden}, os.path.join(target, "reference.safetensors"))
    with open(os.path.join(target, "reference.json"), "w") as f:
        json.dump({"prompt_ids": PROMPT, "generated_ids": generated, "seed": seed,
                   "min_top2_margin": min(margins), "torch": torch.__version__,
                   "transformers": transformers.__version__, "dtype": "float32",
                   "attn_implementation": "eager"}, f, indent=2)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"generated {generated[:8]}..., min top-2 logit margin {min(margins):.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=None, help="default: SEEDS[name] or 1234")
    parser.add_argument("--only", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    failed = []
    for name in args.only:
        try:
            build(name, args.out, args.seed if args.seed is not None else SEEDS.get(name, 1234))
        except Exception as e:  # report every architecture, then fail
            print(f"{name}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
            failed.append(name)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
