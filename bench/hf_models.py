"""The real-model suite's cases: HF ``transformers`` architectures built from configs, random weights.

Nothing is downloaded: every model is ``ModelClass(config)`` under ``torch.manual_seed(case.seed)``,
so a case is deterministic exactly as :mod:`bench.models`' cases are (same :class:`Case` /
:class:`Built` shape: ``case.build()`` gives a fresh module, positional input tensors and a target).
transformers' vision models need no torchvision.

HF models take keyword inputs, so the module a contender gets is a small wrapper,
:class:`HFModule`, that takes the case's tensors positionally, calls the HF model with them as
keywords (``use_cache=False``) and returns what the loss needs: the model's own loss (labels passed)
for the language models, the logits for the vision models (the loss is then cross-entropy on them,
:meth:`HFCase.loss`).  The HF model itself is ``wrapper.hf``, for ``gradient_checkpointing_enable``.

Families (``FAMILIES``): ``gpt2-eager`` and ``gpt2-sdpa`` (GPT-2 with either attention
implementation), ``llama``, ``bert`` (masked LM, dropout 0.1 everywhere BERT has dropout), ``t5``
(encoder-decoder, labels for the decoder), ``qwen2`` (grouped-query attention, LM head tied to the
embedding), ``bart`` (encoder-decoder with learned positions), ``vit``, ``convnext``, ``resnet`` (ResNet-50 layout),
``mobilenetv2`` and ``efficientnet`` (B0); and, added as held-out checks after the planner was built
(2026-12-04), ``gpt-neox`` (parallel branches, partial rotary), ``mistral`` (sliding window), ``opt``,
``roberta``, ``whisper`` (speech encoder-decoder; its mask pads the decoder side), ``swin``, ``deit``
(distillation token) and ``regnet`` (RegNetY-4.0GF: grouped convolutions, squeeze-excite), at one
activation-dominated size each; and two fine-tuning setups of Llama: ``llama-lora`` (frozen
weights, LoRA adapters on q and v) and ``llama-bf16`` (bfloat16 weights).  Dropout is off in every
other model, so gradients can be compared with eager's.  The language models come with and without a padded ``attention_mask``
(right padding: the last quarter of the second sequence is padding, its labels ignored).

Sizes (``SIZES``): ``weights`` (short sequences, small images: weight gradients are a large part of
the peak), ``activations`` (long sequences, bigger images or batches: activations dominate),
``large`` where a family has it (ResNet-50 at 160 px), ``published`` (a published model's configuration:
GPT-2 small, BERT-base, T5-small, ViT-B/16, and SmolLM-135M's depth and widths for Llama; sequence 512,
padded batch of 2; minutes per contender on a CPU) and ``tiny`` (2 layers, width 32-64, sequence 16-32:
``--quick`` and the tests).
"""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .models import Built, Case

__all__ = ["HFCase", "HFModule", "FAMILIES", "LM_FAMILIES", "SIZES", "make_hf_case", "hf_cases", "select_cases"]

IGNORE = -100  # label value HF losses ignore


class HFModule(nn.Module):
    """``hf(**dict(zip(keys, tensors)), **fixed)``, returning ``output`` (``"loss"`` or ``"logits"``)."""

    def __init__(self, hf: nn.Module, keys: tuple[str, ...], output: str, fixed: dict[str, Any] | None = None):
        super().__init__()
        self.hf = hf
        self.keys = tuple(keys)
        self.output = output
        self.fixed = dict(fixed or {})

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        out = self.hf(**dict(zip(self.keys, tensors)), **self.fixed)
        return getattr(out, self.output)


@dataclasses.dataclass(frozen=True)
class HFCase(Case):
    """A :class:`Case` whose loss is the model's own (``loss_kind="own"``: the module returns it) or
    cross-entropy on the returned logits (``"ce"``)."""

    loss_kind: str = "own"
    supports_gradient_checkpointing: bool = False  # the HF class has gradient_checkpointing_enable()
    kind: str = ""  # size name: weights | activations | tiny
    mask: bool = False  # a padded attention_mask is passed
    hf_ckpt_skip: str = ""  # why per-layer checkpointing is not run on this case ("": it is)

    def loss(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.loss_kind == "own":
            return out
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


# ------------------------------------------------------------------------------- inputs


def _padding_mask(batch: int, seq: int) -> torch.Tensor:
    """Right padding: the last quarter of the second sequence (the first if batch is 1) masked."""
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[min(1, batch - 1), seq - max(1, seq // 4):] = 0
    return mask


def _lm(hf: nn.Module, tensors: dict[str, torch.Tensor]) -> Built:
    keys = tuple(tensors)
    module = HFModule(hf, keys, "loss", {"use_cache": False} if "use_cache" in _forward_params(hf) else None)
    return Built(module, tuple(tensors.values()), torch.zeros(()))


def _forward_params(hf: nn.Module) -> set[str]:
    import inspect

    return set(inspect.signature(hf.forward).parameters)


def _causal_lm_inputs(vocab: int, seq: int, batch: int, mask: bool) -> dict[str, torch.Tensor]:
    ids = torch.randint(0, vocab, (batch, seq))
    labels = ids.clone()
    out = {"input_ids": ids}
    if mask:
        am = _padding_mask(batch, seq)
        labels[am == 0] = IGNORE
        out["attention_mask"] = am
    out["labels"] = labels
    return out


# ----------------------------------------------------------------------------- language models


def build_gpt2(layers: int, d: int, heads: int, seq: int, batch: int, vocab: int, attn: str, mask: bool) -> Built:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=vocab, n_positions=seq, n_embd=d, n_layer=layers, n_head=heads,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
                     bos_token_id=vocab - 1, eos_token_id=vocab - 1)
    cfg._attn_implementation = attn
    hf = GPT2LMHeadModel(cfg)
    # Its class name does not say ForCausalLM, so the loss lookup would log a warning on every call:
    # a graph break under torch.compile.
    hf.loss_type = "ForCausalLM"
    return _lm(hf, _causal_lm_inputs(vocab, seq, batch, mask))


def build_llama(layers: int, d: int, heads: int, ffn: int, seq: int, batch: int, vocab: int, mask: bool) -> Built:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=d, intermediate_size=ffn, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=seq,
                      attention_dropout=0.0, use_cache=False)
    cfg._attn_implementation = "sdpa"
    return _lm(LlamaForCausalLM(cfg), _causal_lm_inputs(vocab, seq, batch, mask))


class LoRA(nn.Module):
    """``base(x) + b(a(x))``: a trainable rank-``rank`` pair beside a frozen linear layer, as peft's
    LoRA adapters (``b`` starts small, not zero, so every gradient is non-trivial)."""

    def __init__(self, base: nn.Linear, rank: int = 4) -> None:
        super().__init__()
        self.base = base
        self.a = nn.Linear(base.in_features, rank, bias=False)
        self.b = nn.Linear(rank, base.out_features, bias=False)
        nn.init.normal_(self.b.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.b(self.a(x))


def add_lora(hf: nn.Module) -> None:
    """Freeze a Llama-style model and put :class:`LoRA` adapters on every attention's q and v
    projections (the only parameters left with gradients)."""
    hf.requires_grad_(False)
    for layer in hf.model.layers:
        layer.self_attn.q_proj = LoRA(layer.self_attn.q_proj)
        layer.self_attn.v_proj = LoRA(layer.self_attn.v_proj)


def build_llama_lora(**size: Any) -> Built:
    """Llama fine-tuned through LoRA adapters: frozen weights, activations dominate at any length."""
    built = build_llama(**size)
    add_lora(built.module.hf)
    return built


def build_llama_bf16(**size: Any) -> Built:
    """Llama with bfloat16 weights (and so bfloat16 activations and gradients)."""
    built = build_llama(**size)
    built.module.hf.to(torch.bfloat16)
    return built


def build_bert(layers: int, d: int, heads: int, seq: int, batch: int, vocab: int, mask: bool,
               dropout: float = 0.1) -> Built:
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=4 * d, max_position_embeddings=seq, hidden_dropout_prob=dropout,
                     attention_probs_dropout_prob=dropout)
    hf = BertForMaskedLM(cfg)
    ids = torch.randint(0, vocab, (batch, seq))
    labels = torch.full_like(ids, IGNORE)
    chosen = torch.rand(batch, seq) < 0.15  # MLM: predict 15% of the positions
    labels[chosen] = ids[chosen]
    tensors = {"input_ids": ids}
    if mask:
        am = _padding_mask(batch, seq)
        labels[am == 0] = IGNORE
        tensors["attention_mask"] = am
    tensors["labels"] = labels
    return _lm(hf, tensors)


def build_t5(layers: int, d: int, heads: int, seq: int, target_seq: int, batch: int, vocab: int, mask: bool) -> Built:
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(vocab_size=vocab, d_model=d, d_kv=d // heads, d_ff=4 * d, num_layers=layers,
                   num_decoder_layers=layers, num_heads=heads, dropout_rate=0.0, use_cache=False,
                   decoder_start_token_id=0, pad_token_id=0)
    hf = T5ForConditionalGeneration(cfg)
    tensors = {"input_ids": torch.randint(1, vocab, (batch, seq))}
    labels = torch.randint(1, vocab, (batch, target_seq))
    if mask:
        tensors["attention_mask"] = _padding_mask(batch, seq)
        labels[_padding_mask(batch, target_seq) == 0] = IGNORE  # the padded example's target is shorter too
    tensors["labels"] = labels
    return _lm(hf, tensors)


def build_qwen2(layers: int, d: int, heads: int, kv_heads: int, ffn: int, seq: int, batch: int, vocab: int,
                mask: bool) -> Built:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab, hidden_size=d, intermediate_size=ffn, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=seq,
                      attention_dropout=0.0, tie_word_embeddings=True, use_cache=False)
    cfg._attn_implementation = "sdpa"
    return _lm(Qwen2ForCausalLM(cfg), _causal_lm_inputs(vocab, seq, batch, mask))


def build_bart(layers: int, d: int, heads: int, seq: int, target_seq: int, batch: int, vocab: int, mask: bool) -> Built:
    from transformers import BartConfig, BartForConditionalGeneration

    cfg = BartConfig(vocab_size=vocab, d_model=d, encoder_layers=layers, decoder_layers=layers,
                     encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=4 * d,
                     decoder_ffn_dim=4 * d, max_position_embeddings=max(seq, target_seq), dropout=0.0,
                     attention_dropout=0.0, activation_dropout=0.0, use_cache=False)
    cfg._attn_implementation = "sdpa"
    hf = BartForConditionalGeneration(cfg)
    tensors = {"input_ids": torch.randint(4, vocab, (batch, seq))}
    labels = torch.randint(4, vocab, (batch, target_seq))
    if mask:
        tensors["attention_mask"] = _padding_mask(batch, seq)
        labels[_padding_mask(batch, target_seq) == 0] = IGNORE
    tensors["labels"] = labels
    return _lm(hf, tensors)


def build_gpt_neox(layers: int, d: int, heads: int, seq: int, batch: int, vocab: int, mask: bool) -> Built:
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    # Parallel attention and MLP branches, partial rotary tables.
    cfg = GPTNeoXConfig(vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=4 * d, max_position_embeddings=seq, hidden_dropout=0.0,
                        attention_dropout=0.0, use_cache=False)
    cfg._attn_implementation = "sdpa"
    return _lm(GPTNeoXForCausalLM(cfg), _causal_lm_inputs(vocab, seq, batch, mask))


def build_mistral(layers: int, d: int, heads: int, kv_heads: int, ffn: int, seq: int, batch: int, vocab: int,
                  mask: bool) -> Built:
    from transformers import MistralConfig, MistralForCausalLM

    # Sliding-window attention over half the sequence, grouped-query attention.
    cfg = MistralConfig(vocab_size=vocab, hidden_size=d, intermediate_size=ffn, num_hidden_layers=layers,
                        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=seq,
                        sliding_window=seq // 2, use_cache=False)
    cfg._attn_implementation = "sdpa"
    return _lm(MistralForCausalLM(cfg), _causal_lm_inputs(vocab, seq, batch, mask))


def build_opt(layers: int, d: int, heads: int, seq: int, batch: int, vocab: int, mask: bool) -> Built:
    from transformers import OPTConfig, OPTForCausalLM

    cfg = OPTConfig(vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                    ffn_dim=4 * d, word_embed_proj_dim=d, max_position_embeddings=seq, dropout=0.0,
                    attention_dropout=0.0, use_cache=False)
    cfg._attn_implementation = "sdpa"
    return _lm(OPTForCausalLM(cfg), _causal_lm_inputs(vocab, seq, batch, mask))


def build_roberta(layers: int, d: int, heads: int, seq: int, batch: int, vocab: int, mask: bool) -> Built:
    from transformers import RobertaConfig, RobertaForMaskedLM

    # Positions offset by padding_idx + 1 (its position table is two longer); no dropout.
    cfg = RobertaConfig(vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=4 * d, max_position_embeddings=seq + 2, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    cfg._attn_implementation = "sdpa"
    tensors = _causal_lm_inputs(vocab, seq, batch, mask)
    tensors["input_ids"] = tensors["input_ids"].clamp(min=cfg.pad_token_id + 1)  # no pad token inside
    return _lm(RobertaForMaskedLM(cfg), tensors)


def build_whisper(layers: int, d: int, heads: int, seq: int, target_seq: int, batch: int, vocab: int,
                  mask: bool) -> Built:
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    # Speech encoder-decoder: two 1-d convolutions over ``seq`` mel frames (stride 2), sinusoidal
    # encoder positions; ``mask`` pads the decoder side (decoder_attention_mask, labels ignored).
    cfg = WhisperConfig(vocab_size=vocab, d_model=d, encoder_layers=layers, decoder_layers=layers,
                        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=4 * d,
                        decoder_ffn_dim=4 * d, num_mel_bins=80, max_source_positions=seq // 2,
                        max_target_positions=target_seq, pad_token_id=1, bos_token_id=2, eos_token_id=2,
                        decoder_start_token_id=3, suppress_tokens=None, begin_suppress_tokens=None, dropout=0.0,
                        attention_dropout=0.0, activation_dropout=0.0, use_cache=False)
    cfg._attn_implementation = "sdpa"
    tensors = {"input_features": torch.randn(batch, 80, seq)}
    labels = torch.randint(4, vocab, (batch, target_seq))
    if mask:
        tensors["decoder_attention_mask"] = _padding_mask(batch, target_seq)
        labels[tensors["decoder_attention_mask"] == 0] = IGNORE
    tensors["labels"] = labels
    return _lm(WhisperForConditionalGeneration(cfg), tensors)


# ---------------------------------------------------------------------------------- vision


def _vision(hf: nn.Module, image: int, batch: int, classes: int) -> Built:
    pixels = torch.randn(batch, 3, image, image)
    return Built(HFModule(hf, ("pixel_values",), "logits"), (pixels,), torch.randint(0, classes, (batch,)))


def _vit_like(config: str, model: str, layers: int, d: int, heads: int, image: int, patch: int, batch: int,
              classes: int) -> Built:
    """A ViT-layout transformers model (``config``, ``model``: class names), sdpa attention, no dropout."""
    import transformers

    cfg = getattr(transformers, config)(hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                                        intermediate_size=4 * d, image_size=image, patch_size=patch,
                                        num_labels=classes, hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0)
    cfg._attn_implementation = "sdpa"
    return _vision(getattr(transformers, model)(cfg), image, batch, classes)


def build_vit(layers: int, d: int, heads: int, image: int, patch: int, batch: int, classes: int = 1000) -> Built:
    return _vit_like("ViTConfig", "ViTForImageClassification", layers, d, heads, image, patch, batch, classes)


def build_convnext(depths: tuple[int, ...], widths: tuple[int, ...], image: int, batch: int,
                   classes: int = 1000) -> Built:
    from transformers import ConvNextConfig, ConvNextForImageClassification

    cfg = ConvNextConfig(depths=list(depths), hidden_sizes=list(widths), num_stages=len(depths),
                         drop_path_rate=0.0, num_labels=classes)
    return _vision(ConvNextForImageClassification(cfg), image, batch, classes)


def build_resnet(depths: tuple[int, ...], widths: tuple[int, ...], stem: int, layer_type: str, image: int,
                 batch: int, classes: int = 1000) -> Built:
    from transformers import ResNetConfig, ResNetForImageClassification

    cfg = ResNetConfig(depths=list(depths), hidden_sizes=list(widths), embedding_size=stem, layer_type=layer_type,
                       num_labels=classes)
    return _vision(ResNetForImageClassification(cfg), image, batch, classes)


def build_mobilenetv2(multiplier: float, image: int, batch: int, classes: int = 1000) -> Built:
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

    cfg = MobileNetV2Config(depth_multiplier=multiplier, image_size=image, classifier_dropout_prob=0.0,
                            num_labels=classes)
    return _vision(MobileNetV2ForImageClassification(cfg), image, batch, classes)


def build_efficientnet(width: float, depth: float, hidden: int, image: int, batch: int, classes: int = 1000) -> Built:
    from transformers import EfficientNetConfig, EfficientNetForImageClassification

    cfg = EfficientNetConfig(width_coefficient=width, depth_coefficient=depth, image_size=image, hidden_dim=hidden,
                             dropout_rate=0.0, drop_connect_rate=0.0, num_labels=classes)
    return _vision(EfficientNetForImageClassification(cfg), image, batch, classes)


def build_swin(widths: int, depths: tuple[int, ...], window: int, image: int, batch: int, classes: int = 1000) -> Built:
    from transformers import SwinConfig, SwinForImageClassification

    # Shifted windows (torch.roll, window partitions, a relative position bias table).
    cfg = SwinConfig(image_size=image, embed_dim=widths, depths=list(depths),
                     num_heads=[max(1, widths // 16) * 2 ** i for i in range(len(depths))], window_size=window,
                     drop_path_rate=0.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     num_labels=classes)
    cfg._attn_implementation = "sdpa"
    return _vision(SwinForImageClassification(cfg), image, batch, classes)


def build_deit(layers: int, d: int, heads: int, image: int, patch: int, batch: int, classes: int = 1000) -> Built:
    """ViT's layout with class and distillation tokens, two heads averaged."""
    return _vit_like("DeiTConfig", "DeiTForImageClassificationWithTeacher", layers, d, heads, image, patch, batch,
                     classes)


def build_regnet(depths: tuple[int, ...], widths: tuple[int, ...], groups: int, image: int, batch: int,
                 classes: int = 1000) -> Built:
    from transformers import RegNetConfig, RegNetForImageClassification

    # RegNetY: grouped 3x3 convolutions and squeeze-excite in every block.
    cfg = RegNetConfig(depths=list(depths), hidden_sizes=list(widths), groups_width=groups, layer_type="y",
                       num_labels=classes)
    return _vision(RegNetForImageClassification(cfg), image, batch, classes)


# -------------------------------------------------------------------------------- registry


@dataclasses.dataclass(frozen=True)
class Family:
    factory: Callable[..., Built]
    hf_class: str  # transformers class (for supports_gradient_checkpointing)
    fixed: dict[str, Any]  # size entries every size shares (e.g. attn)
    lm: bool  # a language model: the model's own loss, with and without a padding mask
    hf_ckpt_skip: str = ""  # why the per-layer-checkpointing contender is not run ("": it is)


FAMILIES: dict[str, Family] = {
    "gpt2-eager": Family(build_gpt2, "GPT2LMHeadModel", {"attn": "eager"}, True),
    "gpt2-sdpa": Family(build_gpt2, "GPT2LMHeadModel", {"attn": "sdpa"}, True),
    "llama": Family(build_llama, "LlamaForCausalLM", {}, True),
    "bert": Family(build_bert, "BertForMaskedLM", {}, True),
    "t5": Family(build_t5, "T5ForConditionalGeneration", {}, True),
    "qwen2": Family(build_qwen2, "Qwen2ForCausalLM", {}, True),
    "bart": Family(build_bart, "BartForConditionalGeneration", {}, True),
    "vit": Family(build_vit, "ViTForImageClassification", {}, False),
    "convnext": Family(build_convnext, "ConvNextForImageClassification", {}, False),
    "resnet": Family(build_resnet, "ResNetForImageClassification", {}, False),
    "mobilenetv2": Family(build_mobilenetv2, "MobileNetV2ForImageClassification", {}, False),
    "efficientnet": Family(build_efficientnet, "EfficientNetForImageClassification", {}, False),
    # Families added after the planner was built (2026-12-04), run once as held-out checks.
    "gpt-neox": Family(build_gpt_neox, "GPTNeoXForCausalLM", {}, True),
    "mistral": Family(build_mistral, "MistralForCausalLM", {}, True),
    "opt": Family(build_opt, "OPTForCausalLM", {}, True),
    "roberta": Family(build_roberta, "RobertaForMaskedLM", {}, True),
    "whisper": Family(build_whisper, "WhisperForConditionalGeneration", {}, True),
    "swin": Family(build_swin, "SwinForImageClassification", {}, False,
                   hf_ckpt_skip="per-layer checkpointing's default compile did not finish in 17 minutes (Inductor's "
                                "C++ tiling and sympy, 2026-12-04)"),
    "deit": Family(build_deit, "DeiTForImageClassificationWithTeacher", {}, False),
    "regnet": Family(build_regnet, "RegNetForImageClassification", {}, False),
    # Fine-tuning setups of the Llama family.
    "llama-lora": Family(build_llama_lora, "LlamaForCausalLM", {}, True),
    "llama-bf16": Family(build_llama_bf16, "LlamaForCausalLM", {}, True),
}
LM_FAMILIES = tuple(f for f, fam in FAMILIES.items() if fam.lm)

_GPT2 = dict(layers=12, d=256, heads=4, vocab=8192)
_LLAMA = dict(layers=8, d=256, heads=4, ffn=688, vocab=8192)
_BERT = dict(layers=6, d=256, heads=4, vocab=8192, dropout=0.1)
_T5 = dict(layers=4, d=256, heads=4, vocab=8192)
_QWEN2 = dict(layers=8, d=256, heads=8, kv_heads=2, ffn=688, vocab=8192)  # grouped-query attention, tied head
_BART = dict(layers=4, d=256, heads=4, vocab=8192)
_VIT = dict(layers=12, d=192, heads=3, patch=8)  # ViT-tiny widths, patch 8
_CONVNEXT = dict(depths=(2, 2, 6, 2), widths=(40, 80, 160, 320))  # ConvNeXt-atto
_RESNET = dict(depths=(3, 4, 6, 3), widths=(256, 512, 1024, 2048), stem=64, layer_type="bottleneck")  # ResNet-50
_EFFNET = dict(width=1.0, depth=1.0, hidden=1280)  # B0 (hidden: the top conv's width, 1280 * width)

# family -> size name -> size entries (CPU: one eager step well under 2 s on one thread).
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "gpt2-eager": {
        "weights": dict(_GPT2, seq=256, batch=2),
        "activations": dict(_GPT2, seq=512, batch=2),
        "tiny": dict(layers=2, d=32, heads=2, vocab=128, seq=32, batch=2),
    },
    "llama": {
        "weights": dict(_LLAMA, seq=256, batch=2),
        "activations": dict(_LLAMA, seq=1024, batch=2),
        # Gradients about a fifth of per-layer checkpointing's peak: activations dominate by issue 10's definition.
        "long": dict(_LLAMA, seq=2048, batch=2),
        "tiny": dict(layers=2, d=32, heads=2, ffn=64, vocab=128, seq=32, batch=2),
        # SmolLM-135M's depth and widths (its 3 KV heads and tied head aside).
        "published": dict(layers=30, d=576, heads=9, ffn=1536, vocab=49152, seq=512, batch=2),
    },
    "bert": {
        "weights": dict(_BERT, seq=256, batch=2),
        "activations": dict(_BERT, seq=512, batch=2),
        "tiny": dict(layers=2, d=32, heads=2, vocab=128, seq=32, batch=2, dropout=0.1),
        "published": dict(layers=12, d=768, heads=12, vocab=30522, seq=512, batch=2, dropout=0.1),  # BERT-base
    },
    "t5": {
        "weights": dict(_T5, seq=256, target_seq=64, batch=2),
        "activations": dict(_T5, seq=1024, target_seq=256, batch=2),
        "tiny": dict(layers=2, d=32, heads=2, vocab=128, seq=32, target_seq=16, batch=2),
        "published": dict(layers=6, d=512, heads=8, vocab=32128, seq=512, target_seq=128, batch=2),  # T5-small
    },
    "qwen2": {
        "weights": dict(_QWEN2, seq=256, batch=2),
        "activations": dict(_QWEN2, seq=1024, batch=2),
        "tiny": dict(layers=2, d=32, heads=4, kv_heads=2, ffn=64, vocab=128, seq=32, batch=2),
    },
    "bart": {
        "weights": dict(_BART, seq=256, target_seq=64, batch=2),
        "activations": dict(_BART, seq=1024, target_seq=256, batch=2),
        "tiny": dict(layers=2, d=32, heads=2, vocab=128, seq=32, target_seq=16, batch=2),
    },
    "vit": {
        "weights": dict(_VIT, image=64, batch=4),
        "activations": dict(_VIT, image=128, batch=4),
        "tiny": dict(layers=2, d=32, heads=2, patch=8, image=32, batch=2, classes=10),
        "published": dict(layers=12, d=768, heads=12, patch=16, image=224, batch=4),  # ViT-B/16
    },
    "convnext": {
        "weights": dict(_CONVNEXT, image=64, batch=4),
        "activations": dict(_CONVNEXT, image=160, batch=8),
        "tiny": dict(depths=(1, 1), widths=(16, 32), image=32, batch=2, classes=10),
    },
    "resnet": {
        "weights": dict(_RESNET, image=64, batch=4),
        "activations": dict(_RESNET, image=128, batch=8),
        "tiny": dict(depths=(1, 1), widths=(16, 32), stem=8, layer_type="basic", image=32, batch=2, classes=10),
        # Issue 10's own activation-dominated size (gradients 0.24 of min-cut's peak, vs 0.33 at 128 px).
        "large": dict(_RESNET, image=160, batch=8),
    },
    "mobilenetv2": {
        "weights": dict(multiplier=1.0, image=64, batch=4),
        "activations": dict(multiplier=1.0, image=128, batch=8),
        "tiny": dict(multiplier=0.35, image=32, batch=2, classes=10),
    },
    "efficientnet": {
        "weights": dict(_EFFNET, image=64, batch=4),
        "activations": dict(_EFFNET, image=128, batch=8),
        "tiny": dict(width=0.25, depth=0.25, hidden=320, image=32, batch=2, classes=10),
    },
}
SIZES["gpt2-sdpa"] = {**SIZES["gpt2-eager"],
                      "published": dict(layers=12, d=768, heads=12, vocab=50257, seq=512, batch=2)}  # GPT-2 small
_HELD_OUT_LM = dict(layers=6, d=256, heads=4, vocab=8192, seq=512, batch=2)
_HELD_OUT_TINY = dict(layers=2, d=32, heads=2, vocab=128, seq=32, batch=2)
SIZES.update({
    "llama-lora": {"activations": dict(_LLAMA, seq=512, batch=2), "tiny": SIZES["llama"]["tiny"]},
    "llama-bf16": {"activations": dict(_LLAMA, seq=512, batch=2), "tiny": SIZES["llama"]["tiny"]},
    "gpt-neox": {"activations": _HELD_OUT_LM, "tiny": _HELD_OUT_TINY},
    "mistral": {"activations": dict(_HELD_OUT_LM, heads=8, kv_heads=2, ffn=688),
                "tiny": dict(_HELD_OUT_TINY, heads=4, kv_heads=2, ffn=64)},
    "opt": {"activations": _HELD_OUT_LM, "tiny": _HELD_OUT_TINY},
    "roberta": {"activations": _HELD_OUT_LM, "tiny": _HELD_OUT_TINY},
    # seq: mel frames (the encoder sees half as many positions).
    "whisper": {"activations": dict(layers=4, d=256, heads=4, vocab=8192, seq=1000, target_seq=128, batch=2),
                "tiny": dict(_HELD_OUT_TINY, target_seq=16)},
    "swin": {"activations": dict(widths=48, depths=(2, 2, 6, 2), window=4, image=128, batch=8),
             "tiny": dict(widths=16, depths=(1, 1), window=4, image=32, batch=2, classes=10)},
    "deit": {"activations": dict(_VIT, image=128, batch=4),
             "tiny": dict(layers=2, d=32, heads=2, patch=8, image=32, batch=2, classes=10)},
    # RegNetY-4.0GF widths and depths (weight gradients are about half of min-cut's peak at 128 px).
    "regnet": {"activations": dict(depths=(2, 6, 12, 2), widths=(128, 192, 512, 1088), groups=64, image=128,
                                   batch=4),
               "tiny": dict(depths=(1, 1), widths=(16, 32), groups=8, image=32, batch=2, classes=10)},
})


def _tag(family: str, size: dict[str, Any]) -> str:
    if FAMILIES[family].lm:
        return f"s{size['seq']}"
    return f"i{size['image']}-b{size['batch']}"


def make_hf_case(family: str, size_name: str = "tiny", mask: bool = False, seed: int = 0,
                 **overrides: Any) -> HFCase:
    """``family`` at ``size_name`` (``overrides`` replace size entries), with a padded attention
    mask if ``mask`` (language models only)."""
    import transformers

    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; expected one of {list(FAMILIES)}")
    fam = FAMILIES[family]
    if mask and not fam.lm:
        raise ValueError(f"{family} takes no attention_mask")
    size = {**SIZES[family][size_name], **overrides, **fam.fixed}
    if fam.lm:
        size["mask"] = mask
    tag = "tiny" if size_name == "tiny" else _tag(family, size) + ("-published" if size_name == "published" else "")
    label = f"{family}-{tag}" + ("-mask" if mask else "")
    hf_class = getattr(transformers, fam.hf_class)
    return HFCase(family, label, size, sequential=False, depth=None, factory=fam.factory, seed=seed,
                  loss_kind="own" if fam.lm else "ce",
                  supports_gradient_checkpointing=bool(getattr(hf_class, "supports_gradient_checkpointing", False)),
                  kind=size_name, mask=mask, hf_ckpt_skip=fam.hf_ckpt_skip)


def hf_cases(quick: bool = False, seed: int = 0) -> list[HFCase]:
    """The suite: every family at each of its sizes but ``tiny``, language models with and without
    a padding mask (``quick``: the tiny size, language models with the padding mask only; the
    ``published`` sizes, a published model's configuration, with the padding mask only)."""
    out = []
    for family, fam in FAMILIES.items():
        for size_name in (("tiny",) if quick else [n for n in SIZES[family] if n != "tiny"]):
            # Published configurations (minutes per contender on CPU): the padded batch only.
            both = not quick and size_name != "published"
            for mask in (((False, True) if both else (True,)) if fam.lm else (False,)):
                out.append(make_hf_case(family, size_name, mask, seed))
    return out


def select_cases(cases: list[HFCase], patterns: list[str]) -> list[HFCase]:
    """Cases whose label or family matches one of ``patterns`` (exact or an fnmatch glob), in suite
    order; raises ValueError naming a pattern that matches nothing."""
    chosen = set()
    for pat in patterns:
        hit = {c.label for c in cases if c.label == pat or c.model == pat or fnmatch.fnmatchcase(c.label, pat)}
        if not hit:
            raise ValueError(f"{pat!r} matches no case; labels: {', '.join(c.label for c in cases)}")
        chosen |= hit
    return [c for c in cases if c.label in chosen]
