"""The model suite: small `transformers` architectures with random weights built from configs
(nothing downloaded), and a few plain `torch.nn` models.

A `ModelSpec` builds its module and, for a size (sequence length or image side), the keyword
arguments of one call, drawn from a seeded generator. `sizes` are the sizes of the dynamic-shape
check; the first is the one timed and checked for forward and training.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

Inputs = dict[str, torch.Tensor]
BATCH = 2
VOCAB = 256
HIDDEN = 64
LAYERS = 2
TEXT_SIZES = (32, 48, 61)
IMAGE_SIZES = (32, 48, 64)
# A BatchNorm in training mode that normalises two values per channel (batch 2, one pixel) makes
# the step ill-conditioned: the gradient scales with 1 / |x1 - x2|, and eager's own float32 error
# against float64 reached 3.8e-3 (ResNet at 32 pixels), 0.1 (RegNet) and 18 (LeViT at batch 2),
# which judges nothing. Models whose last stage is 1/32 of the image run at these sizes, so their
# norms see at least eight values per channel.
BN_IMAGE_SIZES = (64, 96, 128)
# dropout off so that training runs are comparable with eager and float64
_NO_DROPOUT = {
    "hidden_dropout_prob": 0.0,
    "hidden_dropout": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "dropout": 0.0,
    "dropout_rate": 0.0,  # T5, mT5, LongT5
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "drop_path_rate": 0.0,  # stochastic depth: random in training mode
}


@dataclass(frozen=True)
class ModelSpec:
    """`build()` returns the fp32 module; `inputs(gen, size, device)` one call's kwargs."""

    name: str
    family: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[torch.Generator, int, str], Inputs]
    sizes: tuple[int, ...]


def _tokens(gen: torch.Generator, length: int, device: str, vocab: int = VOCAB) -> torch.Tensor:
    # ids from 3 up: never the pad/bos/eos ids of the configs below
    return torch.randint(3, vocab, (BATCH, length), generator=gen).to(device)


def _padding_mask(length: int, device: str) -> torch.Tensor:
    """Row 0 attends to everything, row 1 has its last quarter padded."""
    mask = torch.ones(BATCH, length, dtype=torch.long)
    mask[1, length - max(1, length // 4) :] = 0
    return mask.to(device)


def text_inputs(mask: bool, vocab: int = VOCAB) -> Callable[[torch.Generator, int, str], Inputs]:
    def make(gen: torch.Generator, length: int, device: str) -> Inputs:
        kw = {"input_ids": _tokens(gen, length, device, vocab)}
        if mask:
            kw["attention_mask"] = _padding_mask(length, device)
        return kw

    return make


def seq2seq_inputs(gen: torch.Generator, length: int, device: str) -> Inputs:
    return {
        "input_ids": _tokens(gen, length, device),
        "attention_mask": _padding_mask(length, device),
        "decoder_input_ids": _tokens(gen, length // 2 + 1, device),
    }


def whisper_inputs(gen: torch.Generator, length: int, device: str) -> Inputs:
    # the encoder takes a fixed number of frames (2 * max_source_positions); the decoder varies
    return {
        "input_features": torch.randn(BATCH, 16, 64, generator=gen).to(device),
        "decoder_input_ids": _tokens(gen, length // 2, device),
    }


def image_inputs(
    channels: int = 3, batch: int = BATCH
) -> Callable[[torch.Generator, int, str], Inputs]:
    def make(gen: torch.Generator, side: int, device: str) -> Inputs:
        return {"pixel_values": torch.randn(batch, channels, side, side, generator=gen).to(device)}

    return make


def vit_inputs(gen: torch.Generator, side: int, device: str) -> Inputs:
    return {**image_inputs()(gen, side, device), "interpolate_pos_encoding": True}  # type: ignore[dict-item]


def _hf(model_cls: str, config_cls: str, **config: Any) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        import transformers

        cfg = getattr(transformers, config_cls)(**config)
        cfg.use_cache = False
        for key, value in _NO_DROPOUT.items():
            if hasattr(cfg, key):  # zero of the config's own type (LeViT's drop_path_rate is an int)
                current = getattr(cfg, key)
                setattr(cfg, key, type(current)(value) if isinstance(current, (int, float)) else value)
        torch.manual_seed(0)
        model: torch.nn.Module = getattr(transformers, model_cls)(cfg)
        return model

    return build


_LM = {"vocab_size": VOCAB, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS}
_LLAMA_LIKE = {
    **_LM,
    "intermediate_size": 2 * HIDDEN,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,  # grouped-query attention
    "max_position_embeddings": 256,
    "pad_token_id": 0,
}
_BERT_LIKE = {
    **_LM,
    "intermediate_size": 2 * HIDDEN,
    "num_attention_heads": 4,
    "max_position_embeddings": 128,
    "pad_token_id": 0,
}


_BART_LIKE = {
    "d_model": HIDDEN,
    "encoder_layers": LAYERS,
    "decoder_layers": LAYERS,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 2 * HIDDEN,
    "decoder_ffn_dim": 2 * HIDDEN,
}


def _text(name: str, family: str, build: Callable[[], torch.nn.Module], mask: bool) -> ModelSpec:
    return ModelSpec(name, family, build, text_inputs(mask), TEXT_SIZES)


def hf_specs() -> list[ModelSpec]:
    """The `transformers` architectures of the suite."""
    seq2seq = {"vocab_size": VOCAB, "pad_token_id": 0, "decoder_start_token_id": 2}
    return [
        _text(
            "gpt2",
            "decoder",
            _hf(
                "GPT2LMHeadModel",
                "GPT2Config",
                vocab_size=VOCAB,
                n_embd=HIDDEN,
                n_layer=2,
                n_head=4,
                n_positions=128,
                resid_pdrop=0.0,
                embd_pdrop=0.0,
                attn_pdrop=0.0,
            ),
            mask=False,
        ),
        _text("llama", "decoder", _hf("LlamaForCausalLM", "LlamaConfig", **_LLAMA_LIKE), False),
        _text(
            "mistral",
            "decoder",
            _hf("MistralForCausalLM", "MistralConfig", **_LLAMA_LIKE, sliding_window=16),
            False,
        ),
        _text("qwen2", "decoder", _hf("Qwen2ForCausalLM", "Qwen2Config", **_LLAMA_LIKE), False),
        _text(
            "opt",
            "decoder",
            _hf(
                "OPTForCausalLM",
                "OPTConfig",
                vocab_size=VOCAB,
                hidden_size=HIDDEN,
                num_hidden_layers=2,
                ffn_dim=2 * HIDDEN,
                num_attention_heads=4,
                word_embed_proj_dim=HIDDEN,
                max_position_embeddings=128,
                pad_token_id=0,
            ),
            False,
        ),
        _text(
            "gpt_neox",
            "decoder",
            _hf(
                "GPTNeoXForCausalLM",
                "GPTNeoXConfig",
                **_LM,
                intermediate_size=2 * HIDDEN,
                num_attention_heads=4,
                max_position_embeddings=128,
                rotary_pct=0.5,
            ),
            False,
        ),
        _text(
            "phi",
            "decoder",
            _hf(
                "PhiForCausalLM",
                "PhiConfig",
                **_LM,
                intermediate_size=2 * HIDDEN,
                num_attention_heads=4,
                max_position_embeddings=128,
                resid_pdrop=0.0,
                embd_pdrop=0.0,
            ),
            False,
        ),
        _text(
            "bert",
            "encoder",
            _hf("BertForSequenceClassification", "BertConfig", **_BERT_LIKE),
            True,
        ),
        _text(
            "roberta",
            "encoder",  # positions start after the padding id
            _hf(
                "RobertaForMaskedLM",
                "RobertaConfig",
                **{**_BERT_LIKE, "max_position_embeddings": 130},
            ),
            True,
        ),
        _text(
            "distilbert",
            "encoder",
            _hf(
                "DistilBertForSequenceClassification",
                "DistilBertConfig",
                vocab_size=VOCAB,
                dim=HIDDEN,
                n_layers=2,
                n_heads=4,
                hidden_dim=2 * HIDDEN,
                max_position_embeddings=128,
                pad_token_id=0,
            ),
            True,
        ),
        _text(
            "deberta_v2",
            "encoder",
            _hf(
                "DebertaV2ForSequenceClassification",
                "DebertaV2Config",
                **_BERT_LIKE,
                relative_attention=True,
                position_buckets=32,
                max_relative_positions=64,
                pos_att_type=["p2c", "c2p"],
            ),
            True,
        ),
        _text(
            "albert",
            "encoder",
            _hf("AlbertForMaskedLM", "AlbertConfig", **_BERT_LIKE, embedding_size=32),
            True,
        ),
        _text(
            "electra",
            "encoder",
            _hf("ElectraForPreTraining", "ElectraConfig", **_BERT_LIKE, embedding_size=32),
            True,
        ),
        ModelSpec(
            "t5",
            "seq2seq",
            _hf(
                "T5ForConditionalGeneration",
                "T5Config",
                **seq2seq,
                d_model=HIDDEN,
                d_kv=16,
                d_ff=2 * HIDDEN,
                num_layers=2,
                num_heads=4,
                dropout_rate=0.0,
                relative_attention_num_buckets=8,
            ),
            seq2seq_inputs,
            TEXT_SIZES,
        ),
        ModelSpec(
            "bart",
            "seq2seq",
            _hf(
                "BartForConditionalGeneration",
                "BartConfig",
                **seq2seq,
                **_BART_LIKE,
                max_position_embeddings=128,
            ),
            seq2seq_inputs,
            TEXT_SIZES,
        ),
        ModelSpec(
            "whisper",
            "seq2seq",
            _hf(
                "WhisperForConditionalGeneration",
                "WhisperConfig",
                **seq2seq,
                **_BART_LIKE,
                num_mel_bins=16,
                max_source_positions=32,
                max_target_positions=64,
                begin_suppress_tokens=None,
                suppress_tokens=None,
            ),
            whisper_inputs,
            TEXT_SIZES,
        ),
        *vision_specs(),
    ]


def vision_specs() -> list[ModelSpec]:
    """The `transformers` vision architectures."""
    return [
        ModelSpec(
            "vit",
            "vision",
            _hf(
                "ViTForImageClassification",
                "ViTConfig",
                hidden_size=HIDDEN,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=2 * HIDDEN,
                image_size=32,
                patch_size=8,
                num_labels=10,
            ),
            vit_inputs,
            IMAGE_SIZES,
        ),
        ModelSpec(
            "resnet",
            "vision",
            _hf(
                "ResNetForImageClassification",
                "ResNetConfig",
                embedding_size=16,
                hidden_sizes=[16, 32, 64, 128],
                depths=[1, 1, 1, 1],
                layer_type="basic",
                num_labels=10,
            ),
            image_inputs(),
            BN_IMAGE_SIZES,
        ),
        ModelSpec(
            "convnext",
            "vision",
            _hf(
                "ConvNextForImageClassification",
                "ConvNextConfig",
                hidden_sizes=[16, 32, 64, 128],
                depths=[1, 1, 1, 1],
                num_labels=10,
                patch_size=2,
            ),
            image_inputs(),
            IMAGE_SIZES,
        ),
        ModelSpec(
            "swin",
            "vision",
            _hf(
                "SwinForImageClassification",
                "SwinConfig",
                image_size=32,
                patch_size=2,
                embed_dim=32,
                depths=[1, 1],
                num_heads=[2, 4],
                window_size=4,
                num_labels=10,
                drop_path_rate=0.0,
            ),
            image_inputs(),
            IMAGE_SIZES,
        ),
        ModelSpec(
            "mobilevit",
            "vision",
            _hf(
                "MobileViTForImageClassification",
                "MobileViTConfig",
                image_size=64,
                patch_size=2,
                hidden_sizes=[32, 48, 64],
                neck_hidden_sizes=[8, 16, 24, 32, 48, 64, 80],
                num_attention_heads=2,
                num_labels=10,
                classifier_dropout_prob=0.0,
            ),
            image_inputs(),
            (64, 96, 128),
        ),
        ModelSpec(
            "segformer",
            "vision",
            _hf(
                "SegformerForSemanticSegmentation",
                "SegformerConfig",
                num_encoder_blocks=2,
                depths=[1, 1],
                sr_ratios=[2, 1],
                hidden_sizes=[16, 32],
                patch_sizes=[7, 3],
                strides=[4, 2],
                num_attention_heads=[1, 2],
                mlp_ratios=[2, 2],
                decoder_hidden_size=32,
                num_labels=5,
                classifier_dropout_prob=0.0,
                drop_path_rate=0.0,
            ),
            image_inputs(),
            IMAGE_SIZES,
        ),
    ]
