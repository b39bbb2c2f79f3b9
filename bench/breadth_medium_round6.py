"""The held-out round-6 decoder families of :mod:`bench.breadth_round6_a` at an activation-dominated size (2026-12-06).

Built as :mod:`bench.breadth_medium` builds its language models: 4 layers, width 128, 4 heads, FFN 4x width,
sequence 512, batch 2, vocabulary 4096, a right-padded attention mask, every dropout 0 (gradients compare with
eager's); the features that make a family distinct are kept and scaled with the sequence (sliding windows of 128,
chunks and blocks of 64, experts of width 128).  Families alternating layer kinds get the pattern over 4 layers.
Vision cases: the round-6 builders of :mod:`bench.breadth_round6_b` at larger inputs (their towers stay at width
64, 2-4 layers, so activations dominate): the two torchvision-style convnets at 160 px, batch 8, stochastic depth
and dropout 0; video at 8 frames of 64 px; super-resolution and depth at 64 px (drop path 0.1 kept there: compare
those with min-cut, not eager).  Random weights from configs (seed 0 before each build), nothing downloaded.
Nothing in fxremat was tuned on them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import breadth_round6_b as r6b
from .breadth_medium import DECODER, LMK, D, S
from .breadth_more import _seeded_lm as _lm

__all__ = ["MEDIUM_ROUND6"]

# sliding (window 128 of 512) and full layers alternating over the 4 layers
SW = {"sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 2}
# MoE sizes: top-2 of 4 experts as wide as the dense FFN / 2, router aux loss on
MOE = {"num_experts_per_tok": 2, "output_router_logits": True, "router_aux_loss_coef": 0.02}


def _dec(cls, cfg, **kw):
    return lambda: _lm(cls, cfg, **{**DECODER, **kw}, **LMK)


def efficientnetv2(batch=8, image=160):
    """:class:`bench.breadth_round6_b.EfficientNetV2ish` without stochastic depth or head dropout."""
    torch.manual_seed(0)
    model = r6b.EfficientNetV2ish(sd=0.0)
    model.head[3].p = 0.0
    return (model, (torch.randn(batch, 3, image, image),),
            lambda o: F.cross_entropy(o, torch.arange(o.shape[0]) % 10, label_smoothing=0.1))


VISION = {
    # Fused-MBConv early, MBConv + squeeze-excite late, train-mode BatchNorm (160 px, batch 8)
    "tv-efficientnetv2": efficientnetv2,
    # grouped 3x3 convs, SE, zero-init last BN, in-place add/ReLU, channels_last model and input (160 px, batch 8)
    "tv-regnety-cl": lambda: r6b.regnety_cl(batch=8, image=160),
    # divided space-time attention over 8 frames of 64 px (512 patch tokens)
    "timesformer": lambda: r6b.timesformer(batch=2, frames=8, image=64),
    # x2 super-resolution of 64 px images (4096 tokens in 4x4 windows), pixel shuffle, L1 loss
    "swin2sr": lambda: r6b.swin2sr(batch=2, image=64),
    # DINOv2 backbone (256 tokens), DPT neck and depth head at 64 px, scale-invariant log loss
    "depth-anything": lambda: r6b.depth_anything(batch=4, image=64),
}

MEDIUM_ROUND6 = {
    # per-head q/k RMSNorm before rotary, GQA
    "qwen3": _dec("Qwen3ForCausalLM", "Qwen3Config", num_key_value_heads=2, head_dim=32),
    # q/k norm + top-2-of-4 experts as 3-D stacked weights, first layer dense
    "qwen3-moe": _dec("Qwen3MoeForCausalLM", "Qwen3MoeConfig", num_key_value_heads=2, head_dim=32,
                      moe_intermediate_size=2 * D, num_experts=4, norm_topk_prob=True, mlp_only_layers=[0], **MOE),
    # sliding + global layers with local/global rotary tables, sandwich norms, final-logit soft-capping
    "gemma3-text": _dec("Gemma3ForCausalLM", "Gemma3TextConfig", num_key_value_heads=2, head_dim=32,
                        query_pre_attn_scalar=32, final_logit_softcapping=30.0, **SW),
    # MLA (q and kv LoRA projections with norms, rope on a split slice), grouped sigmoid routing, shared expert,
    # first layer dense
    "deepseek-v3": _dec("DeepseekV3ForCausalLM", "DeepseekV3Config", num_key_value_heads=4,
                        moe_intermediate_size=D, n_shared_experts=1, n_routed_experts=8, num_experts_per_tok=2,
                        n_group=2, topk_group=1, first_k_dense_replace=1, kv_lora_rank=64, q_lora_rank=96,
                        qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=32, routed_scaling_factor=2.5,
                        pad_token_id=0),
    # attention sinks (eager), sliding + full layers, clamped SwiGLU experts, yarn rope
    "gpt-oss": _dec("GptOssForCausalLM", "GptOssConfig", num_key_value_heads=2, head_dim=32, num_local_experts=4,
                    **MOE, **SW, attn="eager",
                    rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                                     "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": S // 4}),
    # differential attention: two softmax maps subtracted with a learned lambda, per-head RMSNorm
    "diffllama": _dec("DiffLlamaForCausalLM", "DiffLlamaConfig", num_key_value_heads=2, head_dim=32),
    # Mamba-2 SSD torch path: chunked segment-sum scan (chunks of 64), causal depthwise conv1d, gated RMSNorm
    "mamba2": lambda: _lm("Mamba2ForCausalLM", "Mamba2Config", hidden_size=D, num_hidden_layers=4, num_heads=8,
                          head_dim=32, state_size=32, n_groups=1, expand=2, conv_kernel=4, chunk_size=64,
                          time_step_rank=16, pad_token_id=0, bos_token_id=1, eos_token_id=2, attn="eager", **LMK),
    # attention and a Mamba-2 mixer side by side in every layer, scalar multipliers
    "falcon-h1": _dec("FalconH1ForCausalLM", "FalconH1Config", num_key_value_heads=2, mamba_d_ssm=2 * D,
                      mamba_n_heads=8, mamba_d_head=32, mamba_d_state=32, mamba_n_groups=1, mamba_chunk_size=64,
                      mamba_rms_norm=True, embedding_multiplier=2.0, lm_head_multiplier=0.5),
    # LFM2: gated short causal conv layers + attention layers with q/k norm
    "lfm2": _dec("Lfm2ForCausalLM", "Lfm2Config", num_key_value_heads=2, block_multiple_of=32,
                 block_auto_adjust_ff_dim=False, layer_types=["conv", "full_attention"] * 2),
    # lightning (linear) attention in blocks of 64 (decayed kv state carried by a Python loop) alternating with
    # softmax attention; MoE
    "minimax": _dec("MiniMaxForCausalLM", "MiniMaxConfig", num_key_value_heads=2, head_dim=32,
                    layer_types=["linear_attention", "full_attention"] * 2, block_size=64, num_local_experts=4,
                    **MOE),
    # gated delta net (chunked delta rule, a Python loop per chunk of 64) + gated full attention, MoE with a
    # sigmoid-gated shared expert
    "qwen3-next": _dec("Qwen3NextForCausalLM", "Qwen3NextConfig", num_key_value_heads=2, head_dim=32,
                       layer_types=["linear_attention", "full_attention"] * 2, linear_key_head_dim=32,
                       linear_value_head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
                       moe_intermediate_size=D, shared_expert_intermediate_size=D, num_experts=4, **MOE),
    # Mamba-2 layers and hybrid layers that run one shared attention block (per-layer LoRA adapters) on the
    # concatenation of the stream and the embeddings (read by every hybrid layer); added 2026-12-06 09:21
    "zamba2": _dec("Zamba2ForCausalLM", "Zamba2Config", layers_block_type=["mamba", "hybrid"] * 2,
                   num_key_value_heads=4, mamba_d_state=32, mamba_expand=2, n_mamba_heads=8, mamba_ngroups=1,
                   chunk_size=64, use_mamba_kernels=False, num_mem_blocks=1, use_shared_attention_adapter=True,
                   adapter_rank=8, use_mem_rope=True, attention_dropout=0.0),
    # xIELU activation (learned, softplus / expm1 branches), non-gated MLP, q/k norm
    "apertus": _dec("ApertusForCausalLM", "ApertusConfig", num_key_value_heads=2),
    # NoPE on every other layer, GQA
    "smollm3": _dec("SmolLM3ForCausalLM", "SmolLM3Config", num_key_value_heads=2, no_rope_layers=[1, 0, 1, 0],
                    pad_token_id=0, bos_token_id=1, eos_token_id=2),
    **VISION,
}
