"""The breadth families at an activation-dominated size (``python -m bench.breadth --medium``).

The breadth cases (:mod:`bench.breadth_models`) are tiny (sequence 32, width 64): weights dominate
there.  These 28 HF families (held out from the planner's development, 2026-12-05) are built with
the same helpers at the size a user meets: language models at 4 layers, width 128, sequence 512,
batch 2, vocabulary 4096, a right-padded attention mask, dropout 0 (gradients compare with
eager's); vision models at 128 px, batch 4-8.  Random weights, nothing downloaded.  Two more,
not HF, share their weights over steps or applications (a GRU cell unrolled 64 steps; one
``nn.TransformerEncoderLayer`` applied 6 times), as ALBERT does.
"""

from __future__ import annotations

import torch

from .breadth_models import GRUSeq, SharedEncoder, lm, vision

__all__ = ["MEDIUM"]

S, D, L, V = 512, 128, 4, 4096  # sequence, width, layers, vocabulary of the language models
LMK = {"vocab": V, "seq": S, "batch": 2}
# the Llama-style decoders' shared sizes
DECODER = {
    "hidden_size": D,
    "intermediate_size": 4 * D,
    "num_hidden_layers": L,
    "num_attention_heads": 4,
    "max_position_embeddings": S,
}

MEDIUM = {
    "gemma": lambda: lm("GemmaForCausalLM", "GemmaConfig", **DECODER, num_key_value_heads=1, head_dim=32, **LMK),
    "phi": lambda: lm("PhiForCausalLM", "PhiConfig", **DECODER, resid_pdrop=0.0, embd_pdrop=0.0, **LMK),
    "falcon": lambda: lm("FalconForCausalLM", "FalconConfig", hidden_size=D, num_hidden_layers=L,
        num_attention_heads=4, multi_query=True, parallel_attn=True, new_decoder_architecture=False, alibi=False,
        max_position_embeddings=S, hidden_dropout=0.0, attention_dropout=0.0, **LMK),
    "bloom": lambda: lm("BloomForCausalLM", "BloomConfig", hidden_size=D, n_layer=L, n_head=4, hidden_dropout=0.0,
        attention_dropout=0.0, attn="eager", **LMK),
    "gptj": lambda: lm("GPTJForCausalLM", "GPTJConfig", n_embd=D, n_layer=L, n_head=4, rotary_dim=16, n_positions=S,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn="eager", **LMK),
    "gpt-neo": lambda: lm("GPTNeoForCausalLM", "GPTNeoConfig", hidden_size=D, num_layers=L, num_heads=4,
        attention_types=[[["global", "local"], L // 2]], window_size=64, max_position_embeddings=S,
        resid_dropout=0.0, embed_dropout=0.0, attention_dropout=0.0, attn="eager", **LMK),
    "gptbigcode": lambda: lm("GPTBigCodeForCausalLM", "GPTBigCodeConfig", n_embd=D, n_layer=L, n_head=4,
        multi_query=True, n_positions=S, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **LMK),
    "gemma2": lambda: lm("Gemma2ForCausalLM", "Gemma2Config", **DECODER, num_key_value_heads=2, head_dim=32,
        sliding_window=128, attn_logit_softcapping=50.0, final_logit_softcapping=30.0, query_pre_attn_scalar=32,
        attn="eager", **LMK),
    "phi3": lambda: lm("Phi3ForCausalLM", "Phi3Config", **DECODER, num_key_value_heads=2,
        original_max_position_embeddings=S, pad_token_id=0, bos_token_id=1, eos_token_id=2, resid_pdrop=0.0, **LMK),
    "cohere": lambda: lm("CohereForCausalLM", "CohereConfig", **DECODER, num_key_value_heads=2, use_qk_norm=True,
        logit_scale=0.0625, pad_token_id=0, bos_token_id=1, eos_token_id=2, **LMK),
    "olmo2": lambda: lm("Olmo2ForCausalLM", "Olmo2Config", **DECODER, num_key_value_heads=2, pad_token_id=0, **LMK),
    "stablelm": lambda: lm("StableLmForCausalLM", "StableLmConfig", **DECODER, num_key_value_heads=2,
        use_qkv_bias=True, qk_layernorm=True, use_parallel_residual=True, hidden_dropout=0.0, **LMK),
    "distilbert": lambda: lm("DistilBertForMaskedLM", "DistilBertConfig", dim=D, n_layers=L, n_heads=4, hidden_dim=4
        * D, max_position_embeddings=S, dropout=0.0, attention_dropout=0.0, attn="eager", **LMK),
    "albert": lambda: lm("AlbertForMaskedLM", "AlbertConfig", embedding_size=64, hidden_size=D, num_hidden_layers=L,
        num_attention_heads=4, intermediate_size=4 * D, max_position_embeddings=S, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn="eager", **LMK),
    "deberta-v2": lambda: lm("DebertaV2ForMaskedLM", "DebertaV2Config", hidden_size=D, num_hidden_layers=L,
        num_attention_heads=4, intermediate_size=4 * D, max_position_embeddings=S, relative_attention=True,
        position_buckets=64, pos_att_type=["p2c", "c2p"], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        attn="eager", **LMK),
    "mpnet": lambda: lm("MPNetForMaskedLM", "MPNetConfig", hidden_size=D, num_hidden_layers=L,
        num_attention_heads=4, intermediate_size=4 * D, max_position_embeddings=S + 2, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn="eager", **LMK),
    "pegasus": lambda: lm("PegasusForConditionalGeneration", "PegasusConfig", d_model=D, encoder_layers=L // 2,
        decoder_layers=L // 2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=4 * D,
        decoder_ffn_dim=4 * D, max_position_embeddings=S, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, pad_token_id=0, decoder_start_token_id=0, eos_token_id=1, enc_dec=True, **LMK),
    "t5-gated": lambda: lm("T5ForConditionalGeneration", "T5Config", d_model=D, d_kv=32, d_ff=4 * D, num_layers=L //
        2, num_decoder_layers=L // 2, num_heads=4, feed_forward_proj="gated-gelu", dropout_rate=0.0,
        decoder_start_token_id=0, pad_token_id=0, use_cache=False, enc_dec=True, **LMK),
    "xglm": lambda: lm("XGLMForCausalLM", "XGLMConfig", d_model=D, num_layers=L, attention_heads=4, ffn_dim=4 * D,
        max_position_embeddings=S, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, scale_embedding=True,
        pad_token_id=0, attn="eager", **LMK),
    "modernbert": lambda: lm("ModernBertForMaskedLM", "ModernBertConfig", **DECODER, local_attention=128,
        pad_token_id=0, sparse_prediction=True, mlp_dropout=0.0, **LMK),
    "dinov2": lambda: vision("Dinov2ForImageClassification", "Dinov2Config", image=128, batch=4, image_size=128,
        patch_size=8, hidden_size=192, num_hidden_layers=6, num_attention_heads=3, layerscale_value=0.1),
    "beit": lambda: vision("BeitForImageClassification", "BeitConfig", image=128, batch=4, image_size=128,
        patch_size=8, hidden_size=192, num_hidden_layers=6, num_attention_heads=3, intermediate_size=768,
        use_relative_position_bias=True),
    "segformer": lambda: vision("SegformerForImageClassification", "SegformerConfig", image=128, batch=4,
        num_encoder_blocks=4, depths=[2, 2, 2, 2], sr_ratios=[8, 4, 2, 1], hidden_sizes=[32, 64, 160, 256],
        num_attention_heads=[1, 2, 5, 8]),
    "convnextv2": lambda: vision("ConvNextV2ForImageClassification", "ConvNextV2Config", image=128, batch=8,
        depths=[2, 2, 6, 2], hidden_sizes=[40, 80, 160, 320]),
    "levit": lambda: vision("LevitForImageClassification", "LevitConfig", image=128, batch=8, image_size=128,
        hidden_sizes=[128, 256, 384], num_attention_heads=[4, 6, 8], depths=[2, 3, 4], key_dim=[16, 16, 16]),
    "poolformer": lambda: vision("PoolFormerForImageClassification", "PoolFormerConfig", image=128, batch=8,
        depths=[2, 2, 6, 2], hidden_sizes=[64, 128, 320, 512]),
    "mobilevit": lambda: vision("MobileViTForImageClassification", "MobileViTConfig", image=128, batch=8,
        image_size=128 ),
    "swinv2": lambda: vision("Swinv2ForImageClassification", "Swinv2Config", image=128, batch=8, image_size=128,
        embed_dim=48, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], window_size=4),
    # not HF, added after ALBERT (2026-12-05): weights shared by every step or application
    "gru-unrolled": lambda: _seeded(lambda: (GRUSeq(128, 256), (torch.randn(64, 64, 128),))),
    "shared-encoder": lambda: _seeded(lambda: (SharedEncoder(), (torch.randn(4, 256, 128),
                                                                 torch.arange(256).expand(4, 256) >= 200))),
}


def _seeded(build) -> tuple:
    """(model, inputs, loss) of ``build()`` run from seed 0; the loss: the output's mean square."""
    torch.manual_seed(0)
    model, inputs = build()
    return model, inputs, lambda o: o.pow(2).mean()
