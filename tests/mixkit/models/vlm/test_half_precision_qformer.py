"""InstructBLIP / BLIP-2 in fp16 and bf16 through `load_vlm`, whose Q-Former is kept in fp32 (`keep_qformer_in_fp32`).

transformers runs an InstructBLIP checkpoint loaded in half precision as one dtype throughout; mixkit keeps the
Q-Former in fp32 (as LAVIS does), so the half-precision vision features must be cast up on the way into it and its
output cast down before the half-precision `language_projection` (InstructBLIP casts neither).
"""

from __future__ import annotations

import pytest
import torch
from PIL import Image


@pytest.fixture(scope="module")
def tiny_instructblip_dir(tmp_path_factory):
    from mixkit.testing.tiny_vlm import build_tiny_instructblip

    return build_tiny_instructblip(tmp_path_factory.mktemp("tiny-iblip"), seed=0)


def _language_model_inputs(adapter, image, prompt: str) -> torch.Tensor:
    """The projected Q-Former outputs the LM sees for one image, computed through the adapter's own inputs."""
    inputs = adapter._model_inputs([image], [prompt])
    with torch.no_grad():
        features = adapter.model.get_image_features(
            pixel_values=inputs["pixel_values"], qformer_input_ids=inputs["qformer_input_ids"],
            qformer_attention_mask=inputs["qformer_attention_mask"])
    return features.pooler_output.float()


@pytest.mark.parametrize("dtype, tolerance", [("bf16", 5e-2), ("fp16", 5e-3)])
def test_instructblip_in_half_precision_captions_and_matches_fp32_within_its_precision(tiny_instructblip_dir, dtype,
                                                                                       tolerance):
    from mixkit.models.vlm import load_vlm

    image = Image.new("RGB", (48, 40), (20, 30, 200))
    half = load_vlm(tiny_instructblip_dir, dtype=dtype)
    assert next(half.model.qformer.parameters()).dtype == torch.float32  # kept in fp32, as LAVIS keeps it
    # Before the casts: "mat1 and mat2 must have the same dtype" in the Q-Former's cross-attention.
    captions = half.caption([image, image.rotate(90)], max_new_tokens=3)
    answers = half.answer([image], ["what colour is it?"], max_new_tokens=3)
    assert len(captions) == 2 and len(answers) == 1 and all(isinstance(t, str) for t in captions + answers)

    full = load_vlm(tiny_instructblip_dir)  # fp32 throughout: the reference
    expected = _language_model_inputs(full, image, full.caption_prompt)
    got = _language_model_inputs(half, image, half.caption_prompt)
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=tolerance, rtol=tolerance), (got - expected).abs().max()


def test_the_casting_hooks_are_added_once(tiny_instructblip_dir):
    from mixkit.models.vlm import load_vlm
    from mixkit.models.vlm.loading import keep_qformer_in_fp32

    half = load_vlm(tiny_instructblip_dir, dtype="bf16")
    hooks = len(half.model.qformer._forward_pre_hooks)
    keep_qformer_in_fp32(half.model)  # a second call (a reload path) adds no second hook
    assert len(half.model.qformer._forward_pre_hooks) == hooks == 1
