"""Modular LLaVA imported from transformers: MLP bridge and vision-layer selection give its outputs."""

from __future__ import annotations

import pytest
import torch

from mixkit.models.vlm.modular import MLPBridge, from_hf_llava

IMAGE_TOKEN = 98
PATCHES = 25  # 30 px images, 6 px patches


def hf_llava(vision_feature_layer=-2, strategy="default", act="gelu"):
    from transformers import LlavaConfig, LlavaForConditionalGeneration

    vision = dict(model_type="clip_vision_model", hidden_size=32, intermediate_size=37, num_hidden_layers=3,
                  num_attention_heads=4, image_size=30, patch_size=6)
    text = dict(model_type="llama", vocab_size=100, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, bos_token_id=2,
                eos_token_id=2, pad_token_id=1)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN,
                         vision_feature_layer=vision_feature_layer, vision_feature_select_strategy=strategy,
                         projector_hidden_act=act)
    torch.manual_seed(0)
    return LlavaForConditionalGeneration(config).eval()


def prompt(tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """'USER: <image> ... ASSISTANT:'-shaped ids; the second row left-padded by two."""
    image = [IMAGE_TOKEN] * tokens
    ids = torch.tensor([[2, 20] + image + [21, 22, 23], [1, 1, 2] + image + [24, 25]])
    return ids, (ids != 1).long()


@pytest.mark.parametrize(("layer", "strategy", "act", "tokens"), [
    (-2, "default", "gelu", PATCHES),
    (-1, "full", "silu", PATCHES + 1),
    ([-3, -1], "default", "gelu", PATCHES),
])
def test_logits_match_transformers(layer, strategy, act, tokens):
    hf = hf_llava(layer, strategy, act)
    modular = from_hf_llava(hf)
    assert isinstance(modular.bridge, MLPBridge)
    pixels = torch.randn(2, 3, 30, 30, generator=torch.Generator().manual_seed(1))
    ids, mask = prompt(tokens)
    with torch.no_grad():
        expected = hf(pixel_values=pixels, input_ids=ids, attention_mask=mask).logits
        got = modular(pixels, ids, mask).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # A copy, not a view: changing the modular LM leaves transformers' model as it was.
    with torch.no_grad():
        modular.language_model.lm_head.weight.zero_()
        torch.testing.assert_close(hf(pixel_values=pixels, input_ids=ids, attention_mask=mask).logits, expected)


def test_greedy_generation_matches_transformers():
    hf = hf_llava()
    modular = from_hf_llava(hf)
    pixels = torch.randn(2, 3, 30, 30, generator=torch.Generator().manual_seed(2))
    ids, mask = prompt(PATCHES)
    with torch.no_grad():
        expected = hf.generate(pixel_values=pixels, input_ids=ids, attention_mask=mask, max_new_tokens=6,
                               do_sample=False)[:, ids.shape[1]:]
    got = modular.generate(pixels, ids, mask, max_new_tokens=6)
    assert got.shape == (2, 6)
    assert torch.equal(got, expected)


def test_save_load_keeps_layer_list_and_activation(tmp_path):
    from mixkit.models.vlm.modular import VisionLanguageModel

    modular = from_hf_llava(hf_llava([-3, -1], "default", "silu"))
    modular.save_pretrained(tmp_path)
    loaded = VisionLanguageModel.from_pretrained(tmp_path)
    assert loaded.vision_feature_layer == [-3, -1] and loaded.bridge.config.hidden_act == "silu"
    pixels = torch.randn(1, 3, 30, 30)
    ids, _ = prompt(PATCHES)
    with torch.no_grad():
        torch.testing.assert_close(loaded(pixels, ids[:1]).logits, modular(pixels, ids[:1]).logits, atol=0, rtol=0)


def test_unknown_strategy_and_model_are_refused():
    hf = hf_llava()
    # A strategy a later transformers may add; today's config validates on assignment, hence object.__setattr__.
    object.__setattr__(hf.config, "vision_feature_select_strategy", "pooled")
    with pytest.raises(ValueError, match="'pooled'.*'default', 'full'"):
        from_hf_llava(hf)
    with pytest.raises(TypeError, match="LlavaForConditionalGeneration.*Linear"):
        from_hf_llava(torch.nn.Linear(2, 2))
