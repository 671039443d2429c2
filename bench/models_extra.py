"""Architectures beyond the suite: a second set of `transformers` models, built the same way
(small configs, random weights, nothing downloaded), run only when named
(`python -m bench models --models extra`, or by name). They check that what the suite shows holds
for models it was not tuned on: grouped and multi-query attention, ALiBi, mixture of experts,
relative position biases, BatchNorm inside attention, depthwise and grouped convolutions, raw
audio."""

from __future__ import annotations

import torch

from bench.models_zoo import (
    _BART_LIKE,
    _BERT_LIKE,
    _LLAMA_LIKE,
    _LM,
    BATCH,
    BN_IMAGE_SIZES,
    HIDDEN,
    IMAGE_SIZES,
    TEXT_SIZES,
    VOCAB,
    Inputs,
    ModelSpec,
    _hf,
    image_inputs,
    seq2seq_inputs,
    text_inputs,
)

_VIT_LIKE = {"hidden_size": HIDDEN, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 2 * HIDDEN, "image_size": 32, "patch_size": 8}
_STAGES = {"hidden_sizes": [16, 32, 48, 64], "depths": [1, 1, 1, 1]}


def audio_inputs(gen: torch.Generator, size: int, device: str) -> Inputs:
    """Raw waveforms of 50 * size samples."""
    return {"input_values": torch.randn(BATCH, 50 * size, generator=gen).to(device)}


def _decoder(name: str, model: str, config: str, mask: bool, **kw: object) -> ModelSpec:
    return ModelSpec(name, "decoder", _hf(model, config, **kw), text_inputs(mask), TEXT_SIZES)


def extra_specs() -> list[ModelSpec]:
    gpt_like = {"vocab_size": VOCAB, "n_embd": HIDDEN, "n_layer": 2, "n_head": 4}
    return [
        _decoder("gemma", "GemmaForCausalLM", "GemmaConfig", False, **_LLAMA_LIKE, head_dim=16),
        _decoder("gemma2", "Gemma2ForCausalLM", "Gemma2Config", True, **_LLAMA_LIKE, head_dim=16,
                 sliding_window=16),
        _decoder("falcon", "FalconForCausalLM", "FalconConfig", True, **_LM, num_attention_heads=4),
        _decoder("bloom", "BloomForCausalLM", "BloomConfig", True, vocab_size=VOCAB,
                 hidden_size=HIDDEN, n_layer=2, n_head=4),
        _decoder("gptj", "GPTJForCausalLM", "GPTJConfig", True, **gpt_like, rotary_dim=8,
                 n_positions=128),
        _decoder("gpt_bigcode", "GPTBigCodeForCausalLM", "GPTBigCodeConfig", True, **gpt_like,
                 n_positions=128),
        _decoder("mixtral", "MixtralForCausalLM", "MixtralConfig", False, **_LLAMA_LIKE,
                 num_local_experts=4, num_experts_per_tok=2, experts_implementation="eager"),
        _decoder("phi3", "Phi3ForCausalLM", "Phi3Config", True, **_LLAMA_LIKE),
        _decoder("stablelm", "StableLmForCausalLM", "StableLmConfig", False, **_LLAMA_LIKE),
        _decoder("olmo", "OlmoForCausalLM", "OlmoConfig", False, **_LLAMA_LIKE),
        ModelSpec("mpnet", "encoder", _hf("MPNetForMaskedLM", "MPNetConfig", **_BERT_LIKE),
                  text_inputs(True), TEXT_SIZES),
        ModelSpec("convbert", "encoder",
                  _hf("ConvBertForSequenceClassification", "ConvBertConfig", **_BERT_LIKE,
                      embedding_size=HIDDEN),
                  text_inputs(True), TEXT_SIZES),
        ModelSpec("mobilebert", "encoder",
                  _hf("MobileBertForSequenceClassification", "MobileBertConfig", **_BERT_LIKE,
                      embedding_size=32, intra_bottleneck_size=32, true_hidden_size=32,
                      num_feedforward_networks=2),
                  text_inputs(True), TEXT_SIZES),
        ModelSpec("funnel", "encoder",
                  _hf("FunnelForSequenceClassification", "FunnelConfig", vocab_size=VOCAB,
                      d_model=HIDDEN, n_head=4, d_head=16, d_inner=2 * HIDDEN, block_sizes=[1, 1]),
                  text_inputs(True), TEXT_SIZES),
        ModelSpec("pegasus", "seq2seq",
                  _hf("PegasusForConditionalGeneration", "PegasusConfig", vocab_size=VOCAB,
                      **_BART_LIKE, max_position_embeddings=128),
                  seq2seq_inputs, TEXT_SIZES),
        ModelSpec("mbart", "seq2seq",
                  _hf("MBartForConditionalGeneration", "MBartConfig", vocab_size=VOCAB,
                      **_BART_LIKE, max_position_embeddings=128),
                  seq2seq_inputs, TEXT_SIZES),
        ModelSpec("beit", "vision",
                  _hf("BeitForImageClassification", "BeitConfig", **_VIT_LIKE,
                      use_relative_position_bias=True, drop_path_rate=0.0),
                  image_inputs(), (32,)),  # relative position tables are sized for one image
        ModelSpec("dinov2", "vision", _hf("Dinov2Model", "Dinov2Config", **_VIT_LIKE),
                  image_inputs(), (32,)),
        ModelSpec("clip_vision", "vision", _hf("CLIPVisionModel", "CLIPVisionConfig", **_VIT_LIKE),
                  image_inputs(), (32,)),
        ModelSpec("data2vec_vision", "vision",
                  _hf("Data2VecVisionForImageClassification", "Data2VecVisionConfig",
                      **_VIT_LIKE),
                  image_inputs(), (32,)),
        ModelSpec("convnextv2", "vision",
                  _hf("ConvNextV2ForImageClassification", "ConvNextV2Config", **_STAGES),
                  image_inputs(), IMAGE_SIZES),
        ModelSpec("swinv2", "vision",
                  _hf("Swinv2ForImageClassification", "Swinv2Config", image_size=32, patch_size=2,
                      embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
                  image_inputs(), (32,)),
        ModelSpec("deit", "vision",
                  _hf("DeiTForImageClassification", "DeiTConfig", **_VIT_LIKE),
                  image_inputs(), (32,)),
        ModelSpec("mobilenet_v2", "vision",
                  _hf("MobileNetV2ForImageClassification", "MobileNetV2Config",
                      depth_multiplier=0.35, image_size=32),
                  image_inputs(), IMAGE_SIZES),
        ModelSpec("regnet", "vision",
                  _hf("RegNetForImageClassification", "RegNetConfig", **_STAGES, groups_width=8,
                      embedding_size=16),
                  image_inputs(), BN_IMAGE_SIZES),
        ModelSpec("efficientnet", "vision",
                  _hf("EfficientNetForImageClassification", "EfficientNetConfig",
                      width_coefficient=0.25, depth_coefficient=0.25, image_size=32,
                      hidden_dim=320),
                  image_inputs(), IMAGE_SIZES),
        ModelSpec("poolformer", "vision",
                  _hf("PoolFormerForImageClassification", "PoolFormerConfig", **_STAGES),
                  image_inputs(), IMAGE_SIZES),
        ModelSpec("levit", "vision",
                  _hf("LevitForImageClassification", "LevitConfig", image_size=64,
                      hidden_sizes=[32, 48, 64], num_attention_heads=[2, 2, 2], depths=[1, 1, 1],
                      key_dim=[8, 8, 8]),
                  # attention biases are sized for one image; the head's BatchNorm1d normalises
                  # over the batch alone (see BN_IMAGE_SIZES)
                  image_inputs(batch=8), (64,)),
        ModelSpec("wav2vec2", "audio", _hf("Wav2Vec2ForCTC", "Wav2Vec2Config", **_W2V),
                  audio_inputs, (32, 40, 56)),
        *more_specs(),
        *found_specs(),
    ]


_W2V = {"vocab_size": 32, "hidden_size": HIDDEN, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 2 * HIDDEN, "conv_dim": (32, 32, 32), "conv_stride": (5, 2, 2),
        "conv_kernel": (10, 3, 3), "num_conv_pos_embeddings": 16,
        "num_conv_pos_embedding_groups": 4, "mask_time_prob": 0.0, "hidden_dropout": 0.0,
        "activation_dropout": 0.0, "final_dropout": 0.0, "layerdrop": 0.0}


def found_specs() -> list[ModelSpec]:
    """Architectures that found bugs when tried outside the suite (tests/e2e/
    test_new_architectures.py): WavLM (a permuted position bias repeated and viewed), Reformer
    (LSH attention; `torch._check` of sizes; trains at 64 tokens only) and Deformable DETR
    (multi-scale deformable attention, a ResNet backbone)."""

    def deformable_detr() -> torch.nn.Module:
        import transformers

        backbone = transformers.ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
            layer_type="basic", out_features=["stage2", "stage3", "stage4"])
        config = transformers.DeformableDetrConfig(
            use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False,
            d_model=32, encoder_layers=1, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10,
            num_feature_levels=3, encoder_n_points=2, decoder_n_points=2, dropout=0.0,
            attention_dropout=0.0, activation_dropout=0.0, num_labels=5,
            disable_custom_kernels=True)
        torch.manual_seed(0)
        return transformers.DeformableDetrForObjectDetection(config)

    reformer = _hf(
        "ReformerModelWithLMHead", "ReformerConfig", vocab_size=VOCAB, hidden_size=HIDDEN,
        attention_head_size=16, num_attention_heads=4, attn_layers=["local", "lsh"],
        axial_pos_shape=[8, 8], axial_pos_embds_dim=[32, 32], feed_forward_size=2 * HIDDEN,
        local_attn_chunk_length=16, lsh_attn_chunk_length=16, num_buckets=4, num_hashes=1,
        hash_seed=0, is_decoder=True, max_position_embeddings=64,
        lsh_attention_probs_dropout_prob=0.0, local_attention_probs_dropout_prob=0.0,
        pad_token_id=0)
    return [
        ModelSpec("wavlm", "audio", _hf("WavLMForCTC", "WavLMConfig", **_W2V, num_buckets=32,
                                        max_bucket_distance=64), audio_inputs, (32, 40, 56)),
        ModelSpec("reformer", "decoder", reformer, text_inputs(False), (64, 32, 48)),
        ModelSpec("deformable_detr", "vision", deformable_detr, image_inputs(),
                  BN_IMAGE_SIZES),
    ]


def more_specs() -> list[ModelSpec]:
    """Architectures added after the first extra set: local and sliding attention (Longformer,
    LED, LongT5, GPT-Neo), Fourier mixing (FNet), state-space scans (Mamba), relative and rotary
    variants, hashed character embeddings (CANINE), detection tokens (YOLOS), focal modulation."""
    t5_like = {"vocab_size": VOCAB, "d_model": HIDDEN, "d_kv": 16, "d_ff": 2 * HIDDEN,
               "num_layers": 2, "num_heads": 4, "decoder_start_token_id": 0}
    bart = {"vocab_size": VOCAB, **_BART_LIKE}

    def enc(name: str, model: str, config: str, mask: bool = True, **kw: object) -> ModelSpec:
        return ModelSpec(name, "encoder", _hf(model, config, **kw), text_inputs(mask), TEXT_SIZES)

    def s2s(name: str, model: str, config: str, **kw: object) -> ModelSpec:
        return ModelSpec(name, "seq2seq", _hf(model, config, **kw), seq2seq_inputs, TEXT_SIZES)

    def vis(name: str, model: str, config: str, sizes: tuple[int, ...] = IMAGE_SIZES,
            **kw: object) -> ModelSpec:
        return ModelSpec(name, "vision", _hf(model, config, **kw), image_inputs(), sizes)

    return [
        enc("fnet", "FNetForSequenceClassification", "FNetConfig", False, **_LM,
            intermediate_size=2 * HIDDEN, max_position_embeddings=128, pad_token_id=0,
            use_tpu_fourier_optimizations=False),
        enc("longformer", "LongformerForSequenceClassification", "LongformerConfig",
            **_BERT_LIKE, attention_window=8),
        _decoder("xlnet", "XLNetLMHeadModel", "XLNetConfig", True, vocab_size=VOCAB,
                 d_model=HIDDEN, n_layer=2, n_head=4, d_inner=2 * HIDDEN),
        _decoder("gpt_neo", "GPTNeoForCausalLM", "GPTNeoConfig", True, vocab_size=VOCAB,
                 hidden_size=HIDDEN, num_layers=2, num_heads=4,
                 attention_types=[[["global", "local"], 1]], window_size=16,
                 max_position_embeddings=128),
        _decoder("codegen", "CodeGenForCausalLM", "CodeGenConfig", True, vocab_size=VOCAB,
                 n_embd=HIDDEN, n_layer=2, n_head=4, rotary_dim=8, n_positions=128),
        _decoder("mamba", "MambaForCausalLM", "MambaConfig", False, vocab_size=VOCAB,
                 hidden_size=HIDDEN, num_hidden_layers=2, state_size=8, use_mambapy=False),
        enc("big_bird", "BigBirdForSequenceClassification", "BigBirdConfig", **_BERT_LIKE,
            attention_type="original_full"),
        s2s("marian", "MarianMTModel", "MarianConfig", **bart, max_position_embeddings=128,
            pad_token_id=0, decoder_start_token_id=1),
        s2s("blenderbot", "BlenderbotForConditionalGeneration", "BlenderbotConfig", **bart,
            max_position_embeddings=128),
        s2s("led", "LEDForConditionalGeneration", "LEDConfig", **bart,
            max_encoder_position_embeddings=128, max_decoder_position_embeddings=128,
            attention_window=8),
        s2s("longt5", "LongT5ForConditionalGeneration", "LongT5Config", **t5_like,
            local_radius=8, encoder_attention_type="local"),
        s2s("mt5", "MT5ForConditionalGeneration", "MT5Config", **t5_like),
        enc("squeezebert", "SqueezeBertForSequenceClassification", "SqueezeBertConfig",
            **_BERT_LIKE, embedding_size=HIDDEN, q_groups=2, k_groups=2, v_groups=2,
            post_attention_groups=2, intermediate_groups=2, output_groups=2),
        enc("esm", "EsmForMaskedLM", "EsmConfig", **_BERT_LIKE,
            position_embedding_type="rotary", mask_token_id=2),
        enc("roformer", "RoFormerForSequenceClassification", "RoFormerConfig", **_BERT_LIKE,
            embedding_size=HIDDEN),
        enc("deberta", "DebertaForSequenceClassification", "DebertaConfig", **_BERT_LIKE,
            relative_attention=True, pos_att_type=["c2p", "p2c"], max_relative_positions=32),
        enc("canine", "CanineModel", "CanineConfig", hidden_size=HIDDEN, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=2 * HIDDEN, num_hash_buckets=64,
            num_hash_functions=4, downsampling_rate=4, max_position_embeddings=512),
        _decoder("qwen3", "Qwen3ForCausalLM", "Qwen3Config", False, **_LLAMA_LIKE, head_dim=16),
        _decoder("granite", "GraniteForCausalLM", "GraniteConfig", False, **_LLAMA_LIKE),
        _decoder("cohere", "CohereForCausalLM", "CohereConfig", False, **_LLAMA_LIKE),
        _decoder("starcoder2", "Starcoder2ForCausalLM", "Starcoder2Config", False,
                 **_LLAMA_LIKE),
        _decoder("ctrl", "CTRLLMHeadModel", "CTRLConfig", True, vocab_size=VOCAB,
                 n_embd=HIDDEN, n_layer=2, n_head=4, dff=2 * HIDDEN, n_positions=128),
        vis("yolos", "YolosForObjectDetection", "YolosConfig", (32,), hidden_size=HIDDEN,
            num_hidden_layers=2, num_attention_heads=4, intermediate_size=2 * HIDDEN,
            image_size=[32, 32], patch_size=8, num_detection_tokens=10),
        vis("focalnet", "FocalNetForImageClassification", "FocalNetConfig", embed_dim=16,
            depths=[1, 1], image_size=32, patch_size=2),
        vis("mobilevitv2", "MobileViTV2ForImageClassification", "MobileViTV2Config",
            BN_IMAGE_SIZES, image_size=64, width_multiplier=0.25),
        vis("mobilenet_v1", "MobileNetV1ForImageClassification", "MobileNetV1Config",
            depth_multiplier=0.25, image_size=32),
        vis("siglip_vision", "SiglipVisionModel", "SiglipVisionConfig", (32,),
            hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=2 * HIDDEN, image_size=32, patch_size=8),
    ]
