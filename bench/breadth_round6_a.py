"""Breadth cases, round 6 (2026-12-06), part a: HF transformers decoder-only language models not in
:mod:`bench.breadth_models` or :mod:`bench.breadth_more`, added after the planner was built (held out: nothing
in fxremat was tuned on them).

Same contract and helpers as :mod:`bench.breadth_more` (``python -m bench.breadth <name>`` runs them): each
case is a zero-argument builder returning ``(module, inputs, loss_fn)`` with ``loss_fn`` None (the model
returns its own causal-LM loss).  Random weights from configs, nothing downloaded; tiny sizes (``DEC``: width
64, 4 heads, 2 layers -- more where the family alternates layer kinds, enough to have each kind -- sequence 32,
batch 2, vocabulary 512), a right-padded attention mask wherever the model takes one, sdpa attention unless
the class has none.  Dropouts at their defaults, or attention/hidden dropout 0.1 where the config has one
defaulting to 0, so random ops are exercised; MoE router aux losses on (``output_router_logits``).
``ROUND6_A``: the families; skipped families and why: at the end of the file.
"""
import torch

from .breadth_more import DEC, _dec, _seeded_lm

__all__ = ["ROUND6_A"]

# sliding/full alternation used by the families with a layer_types list (2 layers: one of each)
SW = {"sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"]}


def bitnet():
    """BitNet b1.58 quantization-aware training: every projection but the LM head an ``AutoBitLinear`` with
    online quantization (ternary weights through WeightQuant, 8-bit per-token activations through ActQuant:
    two straight-through ``autograd.Function``s whose forwards are themselves ``torch.compile``-decorated)."""
    from transformers.integrations.bitnet import AutoBitLinear

    model, inputs, loss_fn = _seeded_lm("BitNetForCausalLM", "BitNetConfig", **DEC, num_key_value_heads=2,
                                        attention_dropout=0.1, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    hf = model.hf
    for name, mod in list(hf.named_modules()):
        if isinstance(mod, torch.nn.Linear) and not name.endswith("lm_head"):
            new = AutoBitLinear(mod.in_features, mod.out_features, bias=mod.bias is not None, online_quant=True)
            new.load_state_dict(mod.state_dict())
            hf.set_submodule(name, new)
    return model, inputs, loss_fn


ROUND6_A = {
    # per-head q/k RMSNorm before rotary, GQA, explicit head_dim, attention dropout
    "qwen3": _dec("Qwen3ForCausalLM", "Qwen3Config", **DEC, num_key_value_heads=2, head_dim=16,
                  attention_dropout=0.1),
    # q/k norm + top-2-of-4 experts as 3-D stacked weights (dense first layer via mlp_only_layers), aux loss
    "qwen3-moe": _dec("Qwen3MoeForCausalLM", "Qwen3MoeConfig", **DEC, num_key_value_heads=2, head_dim=16,
                      moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, norm_topk_prob=True,
                      mlp_only_layers=[0], output_router_logits=True, router_aux_loss_coef=0.02,
                      attention_dropout=0.1),
    # sliding + global layers with separate (local/global) rotary tables, q/k norm, sandwich norms,
    # sqrt(d)-scaled embeddings, query_pre_attn_scalar, final-logit soft-capping
    "gemma3-text": _dec("Gemma3ForCausalLM", "Gemma3TextConfig", **DEC, num_key_value_heads=2, head_dim=16,
                        query_pre_attn_scalar=16, final_logit_softcapping=30.0, attention_dropout=0.1, **SW),
    # MLA: q and kv low-rank (LoRA) projections with their own norms, rope on a split-off slice (interleaved),
    # v head dim != qk head dim; sigmoid-scored grouped top-k routing with a bias buffer, shared expert,
    # first layer dense (first_k_dense_replace)
    "deepseek-v3": _dec("DeepseekV3ForCausalLM", "DeepseekV3Config", **DEC, num_key_value_heads=4,
                        moe_intermediate_size=32, n_shared_experts=1, n_routed_experts=8, num_experts_per_tok=2,
                        n_group=2, topk_group=1, first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=32,
                        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, routed_scaling_factor=2.5,
                        attention_dropout=0.1, pad_token_id=0),
    # learned attention sinks concatenated to the logits (eager: no sdpa), sliding + full layers, biased
    # projections, clamped SwiGLU (alpha, limit) experts with a softmax-after-top-k router, yarn rope
    "gpt-oss": _dec("GptOssForCausalLM", "GptOssConfig", **DEC, num_key_value_heads=2, head_dim=16,
                    num_local_experts=4, num_experts_per_tok=2, output_router_logits=True,
                    router_aux_loss_coef=0.02, attention_dropout=0.1, **SW, attn="eager",
                    rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                                     "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 16}),
    # sparsemixer routing: top-2 picked with a custom autograd.Function (PhimoeMultiplier) and router jitter,
    # multiplicative input jitter (torch.rand in training), LayerNorm (not RMS), biased LM head
    "phimoe": _dec("PhimoeForCausalLM", "PhimoeConfig", **DEC, num_key_value_heads=2, num_local_experts=4,
                   num_experts_per_tok=2, input_jitter_noise=0.01, output_router_logits=True,
                   router_aux_loss_coef=0.02, lm_head_bias=True, attention_dropout=0.1),
    # parallel attention + MLP off one LayerNorm, sliding layers with interleaved rotary and full layers
    # without positions (NoPE), scaled logits
    "cohere2": _dec("Cohere2ForCausalLM", "Cohere2Config", **DEC, num_key_value_heads=2, head_dim=16,
                    attention_dropout=0.1, **SW, pad_token_id=0, bos_token_id=1, eos_token_id=2),
    # differential attention: two softmax maps subtracted with a learned lambda (exp of dot products of
    # learned vectors), a per-head GroupNorm-like RMSNorm, (1 - lambda_init) scaling (attention dropout 0: 5.25
    # rejects attention_dropout > 0 for DiffLlama)
    "diffllama": _dec("DiffLlamaForCausalLM", "DiffLlamaConfig", **DEC, num_key_value_heads=2, head_dim=16),
    # Mamba-2 SSD torch path: chunked segment-sum scan (cumsum, exp of a tril-masked segsum), causal depthwise
    # conv1d, gated RMSNorm, padding zeroed by multiplying the attention mask into the hidden states
    "mamba2": _dec("Mamba2ForCausalLM", "Mamba2Config", hidden_size=64, num_hidden_layers=2, num_heads=8,
                   head_dim=16, state_size=16, n_groups=1, expand=2, conv_kernel=4, chunk_size=8,
                   time_step_rank=8, pad_token_id=0, bos_token_id=1, eos_token_id=2, attn="eager"),
    # parallel hybrid: attention and a Mamba-2 mixer side by side in every layer, many scalar multipliers
    # (embedding, attention in/out, key, ssm in/out, MLP, LM head), mup-style ssm multipliers on z/x/B/C/dt
    "falcon-h1": _dec("FalconH1ForCausalLM", "FalconH1Config", **DEC, num_key_value_heads=2, mamba_d_ssm=128,
                      mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16, mamba_n_groups=1, mamba_chunk_size=8,
                      mamba_rms_norm=True, embedding_multiplier=2.0, lm_head_multiplier=0.5,
                      attention_in_multiplier=0.8, attention_out_multiplier=1.2, key_multiplier=0.9,
                      ssm_in_multiplier=1.1, ssm_out_multiplier=0.7, ssm_multipliers=[0.9, 1.1, 1.2, 0.8, 1.0],
                      mlp_multipliers=[1.1, 0.9], attention_dropout=0.1),
    # Mamba-2 layers + one *shared* attention/MLP block applied at each hybrid layer on concat(hidden,
    # original embeddings), per-use LoRA adapters on the shared block
    "zamba2": _dec("Zamba2ForCausalLM", "Zamba2Config", hidden_size=64, intermediate_size=128,
                   num_hidden_layers=4, layers_block_type=["mamba", "hybrid", "mamba", "hybrid"],
                   num_attention_heads=4, num_key_value_heads=4, mamba_d_state=16, mamba_expand=2,
                   n_mamba_heads=4, mamba_ngroups=1, chunk_size=8, use_mamba_kernels=False,
                   num_mem_blocks=1, use_shared_attention_adapter=True, adapter_rank=8, use_mem_rope=True,
                   attention_dropout=0.1, max_position_embeddings=64),
    # Mamba-2 layers with attention at chosen indices (partial rotary), z-loss
    "bamba": _dec("BambaForCausalLM", "BambaConfig", **DEC, num_key_value_heads=2, attn_layer_indices=[1],
                  mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16, mamba_n_groups=1, mamba_chunk_size=8,
                  z_loss_coefficient=0.01, attention_dropout=0.1),
    # LFM2: gated short causal conv (B*x, depthwise conv1d, C*) layers + attention layers with q/k norm
    "lfm2": _dec("Lfm2ForCausalLM", "Lfm2Config", **DEC, num_key_value_heads=2, block_multiple_of=32,
                 block_auto_adjust_ff_dim=False, layer_types=["conv", "full_attention"]),
    # LFM2 body with sigmoid-scored top-2 experts routed through an expert-bias buffer (bias used for the
    # choice only), routed scaling, dense first layer; conv layers on both sides of the attention layer
    "lfm2-moe": _dec("Lfm2MoeForCausalLM", "Lfm2MoeConfig", **{**DEC, "num_hidden_layers": 3}, num_key_value_heads=2,
                     moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, num_dense_layers=1,
                     routed_scaling_factor=1.5, layer_types=["conv", "full_attention", "conv"]),
    # post-norm (norm after attention/MLP, before the residual add), q/k norm over the whole projection,
    # sliding + full layers
    "olmo3": _dec("Olmo3ForCausalLM", "Olmo3Config", **DEC, num_key_value_heads=2, attention_dropout=0.1,
                  pad_token_id=0, eos_token_id=2, **SW),
    # sigmoid-scored top-k with a correction-bias buffer and group limits, routed scaling, shared expert,
    # dense first layer, partial rotary, q/k norm
    "glm4-moe": _dec("Glm4MoeForCausalLM", "Glm4MoeConfig", **DEC, num_key_value_heads=2, moe_intermediate_size=32,
                     n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
                     use_qk_norm=True, routed_scaling_factor=1.5, attention_dropout=0.1),
    # lightning (linear) attention: block-wise decayed kv state carried across blocks in a Python loop,
    # intra-block decay mask, output gate; alternating with softmax attention; MoE; alpha/beta residual scales
    "minimax": _dec("MiniMaxForCausalLM", "MiniMaxConfig", **DEC, num_key_value_heads=2, head_dim=16,
                    layer_types=["linear_attention", "full_attention"], block_size=8, num_local_experts=4,
                    num_experts_per_tok=2, output_router_logits=True, router_aux_loss_coef=0.02,
                    full_attn_alpha_factor=1.5, linear_attn_alpha_factor=0.8, mlp_alpha_factor=1.2,
                    attention_dropout=0.1),
    # gated delta net (torch chunked delta rule: per-chunk triangular solve by a Python loop, l2-normalized
    # q/k, causal conv1d) + gated full attention (sigmoid output gate, q/k norm, partial rotary), MoE with a
    # sigmoid-gated shared expert
    "qwen3-next": _dec("Qwen3NextForCausalLM", "Qwen3NextConfig", **DEC, num_key_value_heads=2, head_dim=16,
                       layer_types=["linear_attention", "full_attention"], linear_key_head_dim=16,
                       linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                       moe_intermediate_size=32, shared_expert_intermediate_size=32, num_experts=4,
                       num_experts_per_tok=2, output_router_logits=True, router_aux_loss_coef=0.02,
                       attention_dropout=0.1),
    # hybrid local/global: rotary only in sliding layers (full layers NoPE), q/k norm, post-norm residuals
    "exaone4": _dec("Exaone4ForCausalLM", "Exaone4Config", **DEC, num_key_value_heads=2, attention_dropout=0.1,
                    **SW),
    # xIELU activation (learned alpha_p/alpha_n via softplus, expm1 branch on the sign), non-gated MLP,
    # q/k norm, llama3 rope scaling
    "apertus": _dec("ApertusForCausalLM", "ApertusConfig", **DEC, num_key_value_heads=2, attention_dropout=0.1,
                    rope_parameters={"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 4.0,
                                     "original_max_position_embeddings": 16, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0}),
    "bitnet-qat": bitnet,
    # Gemma-style, differentially-private variant: sliding/full, attention and final-logit soft-capping
    # (tanh inside the attention scores: eager), no post-norms
    "vaultgemma": _dec("VaultGemmaForCausalLM", "VaultGemmaConfig", **DEC, num_key_value_heads=2, head_dim=16,
                       query_pre_attn_scalar=16, attention_dropout=0.1, **SW, attn="eager"),
    # fused qkv split through a model-parallel reshape (mp_num=4), GPT-J-style interleaved partial rotary
    # (sincos gathered per position), parallel attention + MLP, all dropouts 0.1
    "codegen": _dec("CodeGenForCausalLM", "CodeGenConfig", n_embd=64, n_layer=2, n_head=4, rotary_dim=8,
                    n_positions=64, n_ctx=64, n_inner=128, resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
                    bos_token_id=1, eos_token_id=2),
    # attention output bias kept aside and added after the residual dropout (bias_dropout_add), fused qkv,
    # default attention dropout 0.1 (eager: no sdpa)
    "gpt-neox-japanese": _dec("GPTNeoXJapaneseForCausalLM", "GPTNeoXJapaneseConfig", hidden_size=64,
                              num_hidden_layers=2, num_attention_heads=4, intermediate_multiple_size=2,
                              max_position_embeddings=64, hidden_dropout=0.1, bos_token_id=1, eos_token_id=2,
                              attn="eager"),
    # Helium: interleaved (GPT-J-style) rotary on a Llama body, tiny rms eps
    "helium": _dec("HeliumForCausalLM", "HeliumConfig", **DEC, num_key_value_heads=2, head_dim=16,
                   attention_dropout=0.1, pad_token_id=0),
    # NoPE on every other layer (no_rope_layers), GQA
    "smollm3": _dec("SmolLM3ForCausalLM", "SmolLM3Config", **DEC, num_key_value_heads=2, no_rope_layers=[1, 0],
                    attention_dropout=0.1, pad_token_id=0, bos_token_id=1, eos_token_id=2),
    # top-2-of-4 experts with a norm-min clamped renormalization, a learned bias added for the choice only
    # (moe_statics), shared experts, dense first layer, biased projections
    "ernie4.5-moe": _dec("Ernie4_5_MoeForCausalLM", "Ernie4_5_MoeConfig", **DEC, num_key_value_heads=2,
                         moe_intermediate_size=32, moe_k=2, moe_num_experts=4, moe_num_shared_experts=1,
                         moe_layer_start_index=1, moe_layer_end_index=1, output_router_logits=True,
                         router_aux_loss_coef=0.02, use_bias=True),
}

# ---------------------------------------------------------------- skipped families (transformers 5.25, CPU)
# xlstm: no working training path on CPU in 5.25 without the `xlstm` package.  mode="train" (chunkwise--native_autograd
#      kernel) fails in eager with shape errors (qk_dim_factor 0.5: "The expanded size of the tensor (8) must match
#      the existing size (16)" in mlstm_chunkwise_recurrent_fw_C; qk_dim_factor 1: the kernel returns h as
#      (batch*heads, seq, dh), "Got torch.Size([4, 32, 16]), expected (2, 4, 32, 16)"); mode="inference" runs forward
#      but backward raises "one of the variables needed for gradient computation has been modified by an inplace
#      operation" (states written in place)
