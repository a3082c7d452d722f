"""Per-step conditioning: editing/alternation switch at A1111's steps, AND rows, padding, CFG."""

import pytest
import torch

from mixkit.prompts import build_conditioning_plan, combine_cfg, expand_latents


def texts_by_step(plan, steps):
    return [plan.texts_at(step) for step in range(steps)]


def test_prompt_editing_switches_at_a1111_steps(sd1_encoder):
    plan = build_conditioning_plan(sd1_encoder, ["a [b:c:2]"], [""], 5)
    # schedule [[2, "a b"], [5, "a c"]]; A1111 picks the first entry with end >= its 0-based step
    assert [texts[0] for texts in texts_by_step(plan, 5)] == ["a b", "a b", "a b", "a c", "a c"]
    early, late = plan.at_step(0), plan.at_step(3)
    assert plan.at_step(1) is early and plan.at_step(2) is early and plan.at_step(4) is late
    torch.testing.assert_close(early.embeds[0], sd1_encoder.encode("a b").hidden, atol=0, rtol=0)
    torch.testing.assert_close(late.embeds[0], sd1_encoder.encode("a c").hidden, atol=0, rtol=0)
    torch.testing.assert_close(late.embeds[1], sd1_encoder.encode("").hidden, atol=0, rtol=0)


def test_alternation_and_negative_schedules(sd1_encoder):
    plan = build_conditioning_plan(sd1_encoder, ["[x|y] z"], ["[n:m:0.5]"], 4)
    assert texts_by_step(plan, 4) == [("x z", "n"), ("x z", "n"), ("y z", "n"), ("x z", "m")]
    assert plan.at_step(0) is plan.at_step(1) and plan.at_step(2) is not plan.at_step(1)
    torch.testing.assert_close(plan.at_step(3).embeds[1], sd1_encoder.encode("m").hidden, atol=0, rtol=0)


def test_and_parts_become_weighted_rows(sd1_encoder):
    plan = build_conditioning_plan(sd1_encoder, ["a cat AND a dog:0.5", "a bird"], ["neg", ""], 3)
    step = plan.at_step(0)
    assert step.embeds.shape == (5, 77, 32) and step.pooled is None
    assert step.cond_rows == [[(0, 1.0), (1, 0.5)], [(2, 1.0)]]
    assert step.uncond_rows == [3, 4] and step.row_image == [0, 0, 1, 0, 1]
    for row, text in enumerate(["a cat", " a dog", "a bird", "neg", ""]):
        torch.testing.assert_close(step.embeds[row], sd1_encoder.encode(text).hidden, atol=0, rtol=0)


def test_prompt_and_negative_of_different_lengths_are_not_padded_to_each_other(sd1_encoder):
    # A1111's "Pad prompt/negative prompt" is off by default: each runs at its own length.
    plan = build_conditioning_plan(sd1_encoder, ["b" * 80], ["short"], 2)
    step = plan.at_step(0)
    assert step.row_tokens == [154, 77] and step.embeds.shape == (2, 154, 32)
    assert step.token_groups() == [([0], 154), ([1], 77)]
    torch.testing.assert_close(step.embeds[0], sd1_encoder.encode("b" * 80).hidden, atol=0, rtol=0)
    torch.testing.assert_close(step.embeds[1, :77], sd1_encoder.encode("short").hidden, atol=0, rtol=0)
    negative = step.subset([1], 77)
    assert negative.embeds.shape == (1, 77, 32) and negative.uncond_rows == [0] and negative.cond_rows == [[]]


def test_and_parts_of_different_lengths_repeat_their_last_vector(sd1_encoder):
    # A1111's stack_conds; negatives of a batch are padded with the empty prompt's chunk instead.
    plan = build_conditioning_plan(sd1_encoder, ["blue AND " + "b" * 80, "red"], ["n", "m" * 80], 2)
    step = plan.at_step(0)
    assert step.row_tokens == [154, 154, 154, 154, 154]
    short = sd1_encoder.encode("blue").hidden
    torch.testing.assert_close(step.embeds[0, :77], short, atol=0, rtol=0)
    torch.testing.assert_close(step.embeds[0, 77:], short[-1:].expand(77, -1), atol=0, rtol=0)
    torch.testing.assert_close(step.embeds[3, 77:], sd1_encoder.encode("").hidden, atol=0, rtol=0)


def test_texts_of_one_schedule_are_padded_to_its_longest_with_the_empty_chunk(sd1_encoder):
    # A1111 encodes a prompt's schedule texts as one batch, whose shorter texts get the empty chunk.
    plan = build_conditioning_plan(sd1_encoder, ["[short:" + "b" * 80 + ":1]"], ["n"], 4)
    early = plan.at_step(0)
    assert early.row_tokens == [154, 77]
    torch.testing.assert_close(early.embeds[0, 77:], sd1_encoder.encode("").hidden, atol=0, rtol=0)


def test_sdxl_rows_carry_pooled(sdxl_encoder):
    step = build_conditioning_plan(sdxl_encoder, ["a AND b"], ["c"], 2).at_step(1)
    assert step.embeds.shape == (3, 77, 64) and step.pooled.shape == (3, 32)
    torch.testing.assert_close(step.pooled[2], sdxl_encoder.encode("c").pooled, atol=0, rtol=0)


def test_combine_cfg_is_composable_diffusion(sd1_encoder):
    step = build_conditioning_plan(sd1_encoder, ["a AND b:0.5", "c"], ["n1", "n2"], 2).at_step(0)
    torch.manual_seed(0)
    pred = torch.randn(5, 4, 8, 8)
    out = combine_cfg(pred, step, 7.0)
    assert out.shape == (2, 4, 8, 8)
    torch.testing.assert_close(out[0], pred[3] + 7.0 * (pred[0] - pred[3]) + 3.5 * (pred[1] - pred[3]))
    torch.testing.assert_close(out[1], pred[4] + 7.0 * (pred[2] - pred[4]))
    with pytest.raises(ValueError, match="noise_pred has 4 rows"):
        combine_cfg(pred[:4], step, 7.0)


def test_cfg_of_plain_prompt_matches_classic_formula(sd1_encoder):
    step = build_conditioning_plan(sd1_encoder, ["a"], ["n"], 1).at_step(0)
    cond, uncond = torch.randn(1, 4, 2, 2), torch.randn(1, 4, 2, 2)
    out = combine_cfg(torch.cat([cond, uncond]), step, 5.0)
    torch.testing.assert_close(out, uncond + 5.0 * (cond - uncond))


def test_expand_latents_follows_rows(sd1_encoder):
    step = build_conditioning_plan(sd1_encoder, ["a AND b", "c"], ["", ""], 1).at_step(0)
    latents = torch.arange(2.0).reshape(2, 1)
    assert expand_latents(latents, step).flatten().tolist() == [0.0, 0.0, 1.0, 0.0, 1.0]


def test_encodings_are_reused_across_batch_and_calls(sd1_encoder, monkeypatch):
    calls = []
    original = sd1_encoder._encode_raw
    monkeypatch.setattr(sd1_encoder, "_encode_raw", lambda text: calls.append(text) or original(text))
    build_conditioning_plan(sd1_encoder, ["same", "same", "same"], ["neg", "neg", "neg"], 3)
    build_conditioning_plan(sd1_encoder, ["same"], ["neg"], 10)
    assert sorted(calls) == ["", "neg", "same"]


@pytest.mark.parametrize("prompts, negatives, steps, error, message", [
    (["a"], ["b", "c"], 2, ValueError, "equal length"),
    ([], [], 2, ValueError, "non-empty"),
    ("a", "b", 2, TypeError, "list of str"),
    (["a"], ["b"], 0, ValueError, "steps must be an int >= 1"),
])
def test_inputs_are_validated(sd1_encoder, prompts, negatives, steps, error, message):
    with pytest.raises(error, match=message):
        build_conditioning_plan(sd1_encoder, prompts, negatives, steps)


def test_step_must_be_non_negative(sd1_encoder):
    plan = build_conditioning_plan(sd1_encoder, ["a"], ["b"], 2)
    with pytest.raises(ValueError, match="step must be an int >= 0"):
        plan.at_step(-1)
    assert plan.at_step(5) is plan.at_step(0)  # past the end: the last schedule entry
