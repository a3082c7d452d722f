"""A1111's "Pad prompt/negative prompt" (pad_cond_uncond) and its v0 (mixkit/prompts/cond_padding.py).

A1111 1.10 restated (`sd_samplers_cfg_denoiser.CFGDenoiser.pad_cond_uncond` / `pad_cond_uncond_v0`): with
`pad_cond_uncond`, the shorter of prompt and negative prompt gets (difference // 77) copies of the empty prompt's
encoding appended; with v0, a shorter negative prompt repeats its last vector up to the prompt's length and a
longer one is cut to it. Either leaves equal lengths alone and says so (A1111 writes its key only when it padded).
"""

from __future__ import annotations

import pytest
import torch

from mixkit.prompts import build_conditioning_plan


def test_a_shorter_negative_gets_empty_prompt_chunks(sd1_encoder):
    plan = build_conditioning_plan(sd1_encoder, ["b" * 80], ["short"], 2, cond_padding="empty")
    step = plan.at_step(0)
    assert plan.padded and step.row_tokens is None and step.embeds.shape == (2, 154, 32)
    assert step.token_groups() == [([0, 1], 154)]  # one UNet call
    torch.testing.assert_close(step.embeds[0], sd1_encoder.encode("b" * 80).hidden, atol=0, rtol=0)
    torch.testing.assert_close(step.embeds[1, :77], sd1_encoder.encode("short").hidden, atol=0, rtol=0)
    torch.testing.assert_close(step.embeds[1, 77:], sd1_encoder.encode("").hidden, atol=0, rtol=0)


def test_a_shorter_prompt_gets_them_too(sd1_encoder):
    negative = "n, " * 60
    length = build_conditioning_plan(sd1_encoder, ["a AND b"], [negative], 2).at_step(0).row_tokens[-1]
    assert length >= 154
    plan = build_conditioning_plan(sd1_encoder, ["a AND b"], [negative], 2, cond_padding="empty")
    step = plan.at_step(0)
    assert step.embeds.shape == (3, length, 32) and plan.padded
    empty = sd1_encoder.encode("").hidden
    for row in (0, 1):
        for start in range(77, length, 77):
            torch.testing.assert_close(step.embeds[row, start:start + 77], empty, atol=0, rtol=0)


def test_v0_repeats_the_negatives_last_vector_or_cuts_it(sd1_encoder):
    longer_prompt = build_conditioning_plan(sd1_encoder, ["b" * 80], ["short"], 2, cond_padding="v0")
    step = longer_prompt.at_step(0)
    negative = sd1_encoder.encode("short").hidden
    assert step.embeds.shape == (2, 154, 32) and longer_prompt.padded
    torch.testing.assert_close(step.embeds[1, 77:], negative[-1:].expand(77, -1), atol=0, rtol=0)
    longer_negative = build_conditioning_plan(sd1_encoder, ["short"], ["b" * 80], 2, cond_padding="v0")
    step = longer_negative.at_step(0)
    assert step.embeds.shape == (2, 77, 32)
    torch.testing.assert_close(step.embeds[1], sd1_encoder.encode("b" * 80).hidden[:77], atol=0, rtol=0)
    torch.testing.assert_close(step.embeds[0], sd1_encoder.encode("short").hidden, atol=0, rtol=0)


@pytest.mark.parametrize("mode", ["empty", "v0"])
def test_equal_lengths_are_left_alone_and_not_recorded(sd1_encoder, mode):
    plain = build_conditioning_plan(sd1_encoder, ["a cat"], ["ugly"], 2).at_step(0)
    plan = build_conditioning_plan(sd1_encoder, ["a cat"], ["ugly"], 2, cond_padding=mode)
    assert torch.equal(plan.at_step(0).embeds, plain.embeds) and not plan.padded


def test_an_unknown_mode_is_refused(sd1_encoder):
    with pytest.raises(ValueError, match="cond_padding must be None, 'empty' or 'v0', got 'yes'"):
        build_conditioning_plan(sd1_encoder, ["a"], ["b"], 2, cond_padding="yes")


def test_sdxl_pads_the_hidden_states_and_keeps_the_pooled_vectors(sdxl_encoder):
    plain = build_conditioning_plan(sdxl_encoder, ["b" * 80], [""], 2).at_step(0)
    plan = build_conditioning_plan(sdxl_encoder, ["b" * 80], [""], 2, cond_padding="empty")
    step = plan.at_step(0)
    assert plan.padded and step.embeds.shape[1] == plain.row_tokens[0] == 154
    torch.testing.assert_close(step.pooled, plain.pooled, atol=0, rtol=0)
    # the empty negative stays A1111's zeros; the chunk appended is the empty prompt's encoding (A1111's padding)
    assert torch.count_nonzero(step.embeds[1, :77]) == 0
    torch.testing.assert_close(step.embeds[1, 77:], sdxl_encoder.encode("").hidden, atol=0, rtol=0)
