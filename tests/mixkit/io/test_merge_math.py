"""The per-tensor merge arithmetic: exact values for each method and A1111's extra-channel rule."""

from __future__ import annotations

import pytest
import torch

from mixkit.io.merge_math import (ADD_DIFFERENCE, WEIGHTED_SUM, MergeShapeError, extra_channel_kind, is_merged_key,
                                  merge_tensor, to_half)


def test_weighted_sum_is_a_times_one_minus_m_plus_b_times_m():
    a, b = torch.tensor([1.0, 2.0, -4.0]), torch.tensor([3.0, 6.0, 4.0])
    merged, kind = merge_tensor(WEIGHTED_SUM, a, b, None, 0.25)
    assert kind is None
    assert merged.tolist() == [1.5, 3.0, -2.0]


def test_add_difference_is_a_plus_b_minus_c_times_m():
    a, b, c = torch.tensor([1.0, 2.0]), torch.tensor([5.0, 2.0]), torch.tensor([1.0, 6.0])
    merged, _ = merge_tensor(ADD_DIFFERENCE, a, b, c, 0.5)
    assert merged.tolist() == [3.0, 0.0]


def test_add_difference_without_the_key_in_c_keeps_a():
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([5.0, 7.0])
    assert merge_tensor(ADD_DIFFERENCE, a, b, None, 1.0)[0].tolist() == [1.0, 2.0]


def test_fp16_inputs_are_merged_in_float32_and_rounded_once():
    a = torch.tensor([1.0], dtype=torch.float16)
    b = torch.tensor([1.0009765625], dtype=torch.float16)  # 1 + 2**-10, the next fp16 after 1
    merged, _ = merge_tensor(WEIGHTED_SUM, a, b, None, 0.75)
    assert merged.dtype == torch.float16
    exact = torch.tensor([0.25 * 1.0 + 0.75 * 1.0009765625], dtype=torch.float32).half()
    assert merged.tolist() == exact.tolist()


def test_mixed_dtypes_give_the_promoted_dtype():
    merged, _ = merge_tensor(WEIGHTED_SUM, torch.ones(2, dtype=torch.float16), torch.zeros(2), None, 0.5)
    assert merged.dtype == torch.float32 and merged.tolist() == [0.5, 0.5]


@pytest.mark.parametrize("channels, kind", [(9, "inpainting"), (8, "instruct-pix2pix")])
def test_extra_channel_a_merges_only_the_first_four_channels(channels, kind):
    a = torch.arange(2 * channels * 1 * 1, dtype=torch.float32).reshape(2, channels, 1, 1)
    b = torch.full((2, 4, 1, 1), 100.0)
    before = a.clone()
    merged, found = merge_tensor(WEIGHTED_SUM, a, b, None, 0.5)
    assert found == kind
    assert torch.equal(merged[:, :4], (before[:, :4] + 100) / 2)
    assert torch.equal(merged[:, 4:], before[:, 4:])
    assert torch.equal(a, before)  # the input tensor is not written


@pytest.mark.parametrize("channels, kind", [(9, "inpainting"), (8, "instruct-pix2pix")])
def test_extra_channel_b_with_a_normal_a_is_refused(channels, kind):
    with pytest.raises(MergeShapeError, match=f"A must be the {kind} model"):
        extra_channel_kind((2, 4, 3, 3), (2, channels, 3, 3))


def test_other_shape_differences_are_refused():
    with pytest.raises(MergeShapeError, match=r"A \[320, 768\], B \[320, 1024\]"):
        extra_channel_kind((320, 768), (320, 1024))
    with pytest.raises(MergeShapeError, match="A must be"):  # 4 vs 9 is the inpainting rule, not a generic mismatch
        extra_channel_kind((1, 4), (1, 9))


def test_add_difference_needs_b_and_c_of_one_shape():
    with pytest.raises(MergeShapeError, match="B \\[2\\], C \\[3\\]"):
        merge_tensor(ADD_DIFFERENCE, torch.zeros(2), torch.zeros(2), torch.zeros(3), 0.5)


def test_only_model_keys_except_position_ids_are_merged():
    assert is_merged_key("model.diffusion_model.out.2.weight")
    assert is_merged_key("first_stage_model.decoder.conv_in.bias")
    assert not is_merged_key("alphas_cumprod")
    assert not is_merged_key("cond_stage_model.transformer.text_model.embeddings.position_ids")


def test_to_half_converts_float32_only():
    assert to_half(torch.ones(1)).dtype == torch.float16
    assert to_half(torch.ones(1, dtype=torch.bfloat16)).dtype == torch.bfloat16
    assert to_half(torch.ones(1, dtype=torch.int64)).dtype == torch.int64
