"""Breadth cases, round 9 (2026-12-07): the task heads and inputs HF users fine-tune with, which the earlier
rounds (language-model and image-classification heads, ``input_ids`` in, the model's own loss out) lack:
sequence classification (single-label, multi-label; GPT-2's and Llama's pooling at the last non-padding
token, BART's at the end-of-sequence tokens), extractive question answering, multiple choice (choices
folded into the batch), token classification, masked image modeling, a Swin with stochastic depth, an
encoder-only T5 with mean pooling, ``inputs_embeds`` that need a gradient (adversarial training), hidden
states of every layer in the loss (deep supervision), a loss with label smoothing computed outside the
compiled model on its returned logits, and a 4-D block-diagonal attention mask (packed sequences).

``ROUND9``: tiny sizes for ``python -m bench.breadth``; ``MEDIUM_ROUND9``: activation-dominated sizes for
``--medium`` (4 layers, width 128, sequence 512, batch 2; 128 px images, batch 4; the Swin at batch 8).  Each
case is a zero-argument builder returning ``(module, inputs, loss_fn)``; seed 0 before each build; random
weights, dropout off unless the case is about a random op (the Swin's stochastic depth).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .breadth_models import KW, pad_mask

__all__ = ["ROUND9", "MEDIUM_ROUND9"]


@dataclasses.dataclass(frozen=True)
class Size:
    """One size of every case: the language models' vocabulary, sequence, batch and transformer shape;
    the vision models' image side, batch, ViT patch (the Swin's is half) and Swin window."""

    vocab: int = 512
    seq: int = 32
    batch: int = 2
    width: int = 64
    ffn: int = 128
    layers: int = 2
    image: int = 32
    image_batch: int = 2
    patch: int = 4
    window: int = 4

    def small(self, layers: int | None = None) -> dict[str, int]:
        return dict(hidden_size=self.width, intermediate_size=self.ffn, num_hidden_layers=layers or self.layers,
                    num_attention_heads=4)


TINY = Size()
MEDIUM = Size(vocab=4096, seq=512, batch=2, width=128, ffn=512, layers=4, image=128, image_batch=4, patch=8, window=8)


def _cfg(name: str, attn: str = "sdpa", **kw: Any):
    import transformers

    cfg = getattr(transformers, name)(**kw)
    cfg._attn_implementation = attn
    return cfg


def _hf(cls_name: str, cfg) -> nn.Module:
    import transformers

    return getattr(transformers, cls_name)(cfg)


def _own_loss(cls_name: str, cfg, inputs: dict[str, torch.Tensor], fixed: dict | None = None):
    return KW(_hf(cls_name, cfg), tuple(inputs), "loss", fixed), tuple(inputs.values()), None


def _ids(z: Size, *lead: int) -> torch.Tensor:
    return torch.randint(3, z.vocab, (*(lead or (z.batch,)), z.seq))


def _mask(z: Size) -> torch.Tensor:
    return pad_mask(z.batch, z.seq)


def _llama(z: Size, layers: int | None = None, **kw: Any):
    return _cfg("LlamaConfig", vocab_size=z.vocab, num_key_value_heads=2, max_position_embeddings=z.seq,
                **z.small(layers), **kw)


def _bert(z: Size, **kw: Any):
    return _cfg("BertConfig", vocab_size=z.vocab, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                max_position_embeddings=z.seq, **z.small(), **kw)


def bert_seq_cls(z: Size):
    labels = torch.arange(z.batch) % 3
    inputs = {"input_ids": _ids(z), "attention_mask": _mask(z), "labels": labels}
    return _own_loss("BertForSequenceClassification", _bert(z, num_labels=3), inputs)


def bert_multilabel(z: Size):
    inputs = {"input_ids": _ids(z), "attention_mask": _mask(z), "labels": (torch.rand(z.batch, 4) > 0.5).float()}
    return _own_loss("BertForSequenceClassification",
                     _bert(z, num_labels=4, problem_type="multi_label_classification"), inputs)


def roberta_qa(z: Size):
    cfg = _cfg("RobertaConfig", vocab_size=z.vocab, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
               max_position_embeddings=z.seq + 2, pad_token_id=1, **z.small())
    start = torch.randint(0, z.seq // 2, (z.batch,))
    inputs = {"input_ids": _ids(z), "attention_mask": _mask(z), "start_positions": start,
              "end_positions": start + 5}
    return _own_loss("RobertaForQuestionAnswering", cfg, inputs)


def bert_multiple_choice(z: Size, choices: int = 4):
    inputs = {"input_ids": _ids(z, z.batch, choices),
              "attention_mask": pad_mask(z.batch * choices, z.seq).view(z.batch, choices, z.seq),
              "labels": torch.arange(z.batch) % choices}
    return _own_loss("BertForMultipleChoice", _bert(z), inputs)


def deberta_token_cls(z: Size):
    cfg = _cfg("DebertaV2Config", attn="eager", vocab_size=z.vocab, hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0, max_position_embeddings=z.seq, num_labels=5,
               relative_attention=True, position_buckets=16, pos_att_type=["p2c", "c2p"], **z.small())
    labels = torch.randint(0, 5, (z.batch, z.seq))
    labels[_mask(z) == 0] = -100
    inputs = {"input_ids": _ids(z), "attention_mask": _mask(z), "labels": labels}
    return _own_loss("DebertaV2ForTokenClassification", cfg, inputs)


def _last_token_cls(z: Size, cls_name: str, cfg_name: str, **kw: Any):
    """Pooling at each sequence's last non-padding token: found from ``input_ids == pad_token_id``."""
    ids = _ids(z)
    ids[-1, z.seq - z.seq // 4:] = 0  # right padding with pad_token_id 0
    cfg = _cfg(cfg_name, vocab_size=z.vocab, num_labels=3, pad_token_id=0, **kw)
    inputs = {"input_ids": ids, "attention_mask": _mask(z), "labels": torch.arange(z.batch) % 3}
    return _own_loss(cls_name, cfg, inputs)


def gpt2_seq_cls(z: Size):
    return _last_token_cls(z, "GPT2ForSequenceClassification", "GPT2Config", n_embd=z.width, n_layer=z.layers,
                           n_head=4, n_positions=z.seq, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def llama_seq_cls(z: Size):
    return _last_token_cls(z, "LlamaForSequenceClassification", "LlamaConfig", num_key_value_heads=2,
                           max_position_embeddings=z.seq, **z.small())


def bart_seq_cls(z: Size):
    """BART pools the decoder's state at the last end-of-sequence token (a boolean mask of ``input_ids``)."""
    ids = _ids(z)
    ids[:, -1] = 2  # eos
    cfg = _cfg("BartConfig", vocab_size=z.vocab, d_model=z.width, encoder_layers=z.layers, decoder_layers=z.layers,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=2 * z.width,
               decoder_ffn_dim=2 * z.width, max_position_embeddings=z.seq, dropout=0.0, attention_dropout=0.0,
               activation_dropout=0.0, classifier_dropout=0.0, num_labels=3, pad_token_id=1, bos_token_id=0,
               eos_token_id=2)
    inputs = {"input_ids": ids, "attention_mask": torch.ones(z.batch, z.seq, dtype=torch.long),
              "labels": torch.arange(z.batch) % 3}
    return _own_loss("BartForSequenceClassification", cfg, inputs)


def vit_mim(z: Size):
    cfg = _cfg("ViTConfig", image_size=z.image, patch_size=z.patch, encoder_stride=z.patch, hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0, **z.small())
    masked = torch.zeros(z.image_batch, (z.image // z.patch) ** 2, dtype=torch.bool)
    masked[:, ::3] = True
    inputs = {"pixel_values": torch.randn(z.image_batch, 3, z.image, z.image), "bool_masked_pos": masked}
    return _own_loss("ViTForMaskedImageModeling", cfg, inputs)


def swin_drop_path(z: Size):
    cfg = _cfg("SwinConfig", image_size=z.image, patch_size=z.patch // 2, embed_dim=32, depths=[2, 2],
               num_heads=[2, 4], window_size=z.window, drop_path_rate=0.3, hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0, num_labels=10)
    inputs = {"pixel_values": torch.randn(2 * z.image_batch, 3, z.image, z.image),
              "labels": torch.randint(0, 10, (2 * z.image_batch,))}
    return _own_loss("SwinForImageClassification", cfg, inputs)


class MeanPooledT5(nn.Module):
    """A T5 encoder, masked mean pooling, a linear head: a sentence-embedding fine-tune."""

    def __init__(self, z: Size) -> None:
        super().__init__()
        cfg = _cfg("T5Config", vocab_size=z.vocab, d_model=z.width, d_ff=2 * z.width, d_kv=z.width // 4,
                   num_layers=z.layers, num_heads=4, dropout_rate=0.0, relative_attention_num_buckets=8)
        self.hf = _hf("T5EncoderModel", cfg)
        self.head = nn.Linear(z.width, 8)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.hf(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1))


def t5_mean_pool(z: Size):
    return MeanPooledT5(z), (_ids(z), _mask(z)), lambda out: out.square().mean()


class EmbedsNeedGrad(nn.Module):
    """Adversarial training (FreeLB-style): the loss's gradient with respect to ``inputs_embeds`` is wanted."""

    def __init__(self, z: Size) -> None:
        super().__init__()
        self.hf = _hf("LlamaForCausalLM", _llama(z))

    def forward(self, embeds: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.hf(inputs_embeds=embeds, attention_mask=mask, labels=labels).loss


def _lm_labels(z: Size) -> torch.Tensor:
    labels = _ids(z)
    labels[_mask(z) == 0] = -100
    return labels


def embeds_need_grad(z: Size):
    embeds = torch.randn(z.batch, z.seq, z.width, requires_grad=True)
    return EmbedsNeedGrad(z), (embeds, _mask(z), _lm_labels(z)), None


class DeepSupervision(nn.Module):
    """Every layer's hidden state returned (``output_hidden_states``) and in the loss."""

    def __init__(self, z: Size) -> None:
        super().__init__()
        self.hf = _hf("LlamaForCausalLM", _llama(z, layers=2 * z.layers))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        out = self.hf(input_ids=ids, attention_mask=mask, labels=labels, output_hidden_states=True)
        aux = sum(h.float().pow(2).mean() for h in out.hidden_states[1:-1])
        return out.loss + 0.01 * aux


def deep_supervision(z: Size):
    return DeepSupervision(z), (_ids(z), _mask(z), _lm_labels(z)), None


def gpt2_logits_label_smoothing(z: Size):
    cfg = _cfg("GPT2Config", vocab_size=z.vocab, n_embd=z.width, n_layer=z.layers, n_head=4, n_positions=z.seq,
               resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    labels = _ids(z)
    model = KW(_hf("GPT2LMHeadModel", cfg), ("input_ids", "attention_mask"), "logits")

    def loss(logits: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits[:, :-1].reshape(-1, z.vocab), labels[:, 1:].reshape(-1), label_smoothing=0.1)

    return model, (_ids(z), _mask(z)), loss


def llama_packed_4d_mask(z: Size):
    """Two documents packed in each row: a 4-D additive block-diagonal causal mask, positions restarting."""
    cfg = _llama(z)
    split = z.seq // 2 + 3  # the second document's first position
    doc = torch.arange(z.seq) >= split
    allowed = (doc[:, None] == doc[None, :]) & torch.ones(z.seq, z.seq, dtype=torch.bool).tril()
    mask = torch.where(allowed, 0.0, torch.finfo(torch.float32).min)[None, None].expand(z.batch, 1, z.seq, z.seq)
    pos = torch.where(doc, torch.arange(z.seq) - split, torch.arange(z.seq)).expand(z.batch, z.seq)
    ids = _ids(z)
    inputs = {"input_ids": ids, "attention_mask": mask.contiguous(), "position_ids": pos.contiguous(),
              "labels": ids.clone()}
    return _own_loss("LlamaForCausalLM", cfg, inputs)


BUILDERS: dict[str, Callable[[Size], tuple]] = {
    "bert-seq-cls": bert_seq_cls,
    "bert-multilabel": bert_multilabel,
    "roberta-qa": roberta_qa,
    "bert-multiple-choice": bert_multiple_choice,
    "deberta-token-cls": deberta_token_cls,
    "gpt2-seq-cls": gpt2_seq_cls,
    "llama-seq-cls": llama_seq_cls,
    "bart-seq-cls": bart_seq_cls,
    "vit-mim": vit_mim,
    "swin-drop-path": swin_drop_path,
    "t5-encoder-mean-pool": t5_mean_pool,
    "embeds-need-grad": embeds_need_grad,
    "deep-supervision": deep_supervision,
    "gpt2-logits-label-smoothing": gpt2_logits_label_smoothing,
    "llama-packed-4d-mask": llama_packed_4d_mask,
}


def _seeded(build: Callable[[Size], tuple], z: Size) -> Callable[[], tuple]:
    def built() -> tuple:
        torch.manual_seed(0)
        return build(z)

    return functools.update_wrapper(built, build)


ROUND9 = {name: _seeded(build, TINY) for name, build in BUILDERS.items()}
MEDIUM_ROUND9 = {name: _seeded(build, MEDIUM) for name, build in BUILDERS.items()}
