"""VisionLanguageModel: swappable parts, freezing, placeholder vs prefix, save/load round trip."""

from __future__ import annotations

import pytest
import torch

from mixkit.errors import CheckpointFormatError, ModelNotFoundError
from mixkit.models.vlm.modular import (
    MLPBridge,
    ProjectionBridgeConfig,
    VisionLanguageModel,
    build_bridge,
    from_hf_blip2,
)
from mixkit.testing.tiny_vlm import tiny_blip2_config


@pytest.fixture(scope="module")
def blip2():
    from transformers import Blip2ForConditionalGeneration

    torch.manual_seed(0)
    return from_hf_blip2(Blip2ForConditionalGeneration(tiny_blip2_config("opt", image_token_index=4)).eval())


def llava_style():
    """CLIP vision tower, penultimate-layer patch features, MLP bridge, tiny OPT."""
    from transformers import CLIPVisionConfig, CLIPVisionModel, OPTConfig, OPTForCausalLM

    torch.manual_seed(0)
    vision = CLIPVisionModel(CLIPVisionConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                              num_attention_heads=4, image_size=30, patch_size=6))
    lm = OPTForCausalLM(OPTConfig(vocab_size=99, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                                  ffn_dim=32, max_position_embeddings=64, word_embed_proj_dim=16))
    bridge = MLPBridge(ProjectionBridgeConfig(input_size=32, output_size=16))
    return VisionLanguageModel(vision, bridge, lm, image_token_index=98, vision_feature_layer=-2, drop_cls_token=True).eval()


def test_save_load_round_trip(blip2, tmp_path):
    blip2.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mixkit_vlm.json", "model.safetensors"]
    loaded = VisionLanguageModel.from_pretrained(tmp_path)
    pixels, ids = torch.randn(1, 3, 30, 30), torch.tensor([[4, 4, 4, 4, 2, 7, 8]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(pixels, ids).logits, blip2(pixels, ids).logits, atol=0, rtol=0)


def test_llava_style_parts_round_trip(tmp_path):
    model = llava_style()
    ids = torch.tensor([[2] + [98] * 25 + [5, 6]])  # 30 px / 6 px patches = 25 tokens, CLS dropped
    pixels = torch.randn(1, 3, 30, 30)
    with torch.no_grad():
        logits = model(pixels, ids).logits
    assert logits.shape == (1, 28, 99)
    model.save_pretrained(tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(VisionLanguageModel.from_pretrained(tmp_path)(pixels, ids).logits, logits)


def test_prefix_mode_equals_placeholders_at_the_front(blip2):
    pixels = torch.randn(1, 3, 30, 30)
    with torch.no_grad():
        placed = blip2(pixels, torch.tensor([[4, 4, 4, 4, 2, 7, 8]])).logits
        prefixed = blip2(pixels, torch.tensor([[2, 7, 8]])).logits
    torch.testing.assert_close(prefixed, placed)


def test_wrong_placeholder_count_is_refused(blip2):
    with pytest.raises(ValueError, match=r"exactly 4 image placeholder tokens \(id 4\), got \[2\]"):
        blip2(torch.randn(1, 3, 30, 30), torch.tensor([[4, 4, 2, 7]]))


def test_freezing_is_per_part():
    model = llava_style().freeze("vision_encoder", "language_model")
    assert model.frozen_parts() == ["vision_encoder", "language_model"]
    with pytest.raises(ValueError, match="'decoder'.*'bridge'"):
        model.freeze("decoder")


def test_bridge_registry_builds_by_name():
    assert isinstance(build_bridge({"kind": "mlp", "input_size": 4, "output_size": 2}), MLPBridge)
    with pytest.raises(ValueError, match="'resampler'.*'qformer'"):
        build_bridge({"kind": "resampler"})
    with pytest.raises(ValueError, match="bad 'linear' bridge config"):
        build_bridge({"kind": "linear", "width": 3})
    with pytest.raises(ValueError, match="hidden_act 'wiggle'.*'gelu'"):
        build_bridge({"kind": "mlp", "input_size": 4, "output_size": 2, "hidden_act": "wiggle"})
    without_bias = build_bridge({"kind": "mlp", "input_size": 4, "output_size": 2, "bias": False})
    assert without_bias.up.bias is None and without_bias.down.bias is None


def test_instruction_aware_bridge_needs_a_text_path():
    from mixkit.models.vlm.modular import QFormerBridgeConfig, QFormerConfig

    with pytest.raises(ValueError, match="text_vocab_size > 0"):
        QFormerBridgeConfig(qformer=QFormerConfig(hidden_size=8, num_attention_heads=2), instruction_aware=True)


def test_loading_missing_or_corrupt_files(blip2, tmp_path):
    with pytest.raises(ModelNotFoundError, match="mixkit_vlm.json"):
        VisionLanguageModel.from_pretrained(tmp_path)
    blip2.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointFormatError, match="model.safetensors"):
        VisionLanguageModel.from_pretrained(tmp_path)


def test_half_precision_keeps_the_qformer_in_fp32(blip2):
    import copy

    half = copy.deepcopy(blip2).to(torch.bfloat16)
    half.bridge.keep_qformer_in_fp32()
    assert half.bridge.qformer.input_norm.weight.dtype == torch.float32
    assert half.bridge.query_tokens.dtype == torch.float32
    pixels, ids = torch.randn(1, 3, 30, 30), torch.tensor([[4, 4, 4, 4, 2, 7, 8]])
    with torch.no_grad():
        reference = blip2(pixels, ids).logits
        logits = half(pixels, ids).logits
    assert logits.dtype == torch.bfloat16
    torch.testing.assert_close(logits.float(), reference, atol=0.05, rtol=0.05)


def test_prefix_mode_moves_left_padding_before_the_image(blip2):
    """[pad, image, text]: a left-padded row gives the unpadded row's logits at its real positions."""
    pixels = torch.randn(2, 3, 30, 30, generator=torch.Generator().manual_seed(5))
    ids = torch.tensor([[1, 1, 2, 7], [2, 9, 10, 11]])
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    with torch.no_grad():
        embeds, full_mask = blip2.embed_inputs(pixels, ids, mask)
        batch = blip2(pixels, ids, mask).logits
        single = blip2(pixels[:1], torch.tensor([[2, 7]])).logits
    assert full_mask[0].tolist() == [0, 0] + [1] * 6
    torch.testing.assert_close(batch[0, 2:], single[0], atol=1e-5, rtol=1e-5)
