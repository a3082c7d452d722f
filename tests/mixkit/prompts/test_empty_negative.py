"""An empty negative prompt is zeros on SDXL (A1111 `sd_models_xl.get_learned_conditioning`, diffusers'
`force_zeros_for_empty_prompt`) and text on SD 1.x (A1111 and diffusers encode it)."""

import numpy as np
import pytest
import torch

from mixkit.prompts import build_conditioning_plan

SMALL = dict(width=64, height=64, steps=4)


def test_sdxl_empty_negative_is_zero_hidden_and_pooled(sdxl_encoder):
    step = build_conditioning_plan(sdxl_encoder, ["a cat"], [""], 4).at_step(0)
    negative = step.uncond_rows[0]
    assert torch.count_nonzero(step.embeds[negative]) == 0
    assert torch.count_nonzero(step.pooled[negative]) == 0
    # the prompt row is untouched text
    torch.testing.assert_close(step.embeds[0], sdxl_encoder.encode("a cat").hidden, atol=0, rtol=0)
    torch.testing.assert_close(step.pooled[0], sdxl_encoder.encode("a cat").pooled, atol=0, rtol=0)


def test_sdxl_empty_positive_is_text(sdxl_encoder):
    """A1111 zeroes only when `is_negative_prompt`; an empty prompt is encoded as text."""
    empty = sdxl_encoder.encode("")
    step = build_conditioning_plan(sdxl_encoder, [""], ["ugly"], 4).at_step(0)
    assert torch.count_nonzero(empty.hidden) > 0
    torch.testing.assert_close(step.embeds[0], empty.hidden, atol=0, rtol=0)
    torch.testing.assert_close(step.pooled[0], empty.pooled, atol=0, rtol=0)


def test_sdxl_each_empty_negative_of_a_batch_is_zeroed_on_its_own(sdxl_encoder):
    """A1111 encodes each negative prompt's schedule as one batch, so the rule is per negative prompt."""
    step = build_conditioning_plan(sdxl_encoder, ["a", "b"], ["", "ugly"], 4).at_step(0)
    empty_row, text_row = step.uncond_rows
    assert torch.count_nonzero(step.embeds[empty_row]) == 0 and torch.count_nonzero(step.pooled[empty_row]) == 0
    torch.testing.assert_close(step.embeds[text_row], sdxl_encoder.encode("ugly").hidden, atol=0, rtol=0)
    torch.testing.assert_close(step.pooled[text_row], sdxl_encoder.encode("ugly").pooled, atol=0, rtol=0)


def test_sdxl_scheduled_negative_with_an_empty_part_is_text_throughout(sdxl_encoder):
    """`[:ugly:2]` schedules '' then 'ugly': not every text is '', so A1111 encodes '' as text."""
    plan = build_conditioning_plan(sdxl_encoder, ["a"], ["[:ugly:2]"], 4)
    early, late = plan.at_step(0), plan.at_step(3)
    torch.testing.assert_close(early.embeds[1], sdxl_encoder.encode("").hidden, atol=0, rtol=0)
    torch.testing.assert_close(early.pooled[1], sdxl_encoder.encode("").pooled, atol=0, rtol=0)
    torch.testing.assert_close(late.embeds[1], sdxl_encoder.encode("ugly").hidden, atol=0, rtol=0)


def test_sdxl_zeroed_negative_next_to_a_longer_one_is_zero_in_all_its_chunks(sdxl_encoder):
    long_negative = ", ".join(["ugly"] * 80)  # several chunks
    tokens = sdxl_encoder.encode(long_negative).hidden.shape[0]
    step = build_conditioning_plan(sdxl_encoder, ["a", "b"], ["", long_negative], 4).at_step(0)
    empty_row, long_row = step.uncond_rows
    assert tokens > 77 and step.row_tokens[empty_row] == tokens
    assert torch.count_nonzero(step.embeds[empty_row]) == 0
    torch.testing.assert_close(step.embeds[long_row], sdxl_encoder.encode(long_negative).hidden, atol=0, rtol=0)


def test_sd1_empty_negative_stays_text(sd1_encoder):
    step = build_conditioning_plan(sd1_encoder, ["a cat"], [""], 4).at_step(0)
    empty = sd1_encoder.encode("").hidden
    assert torch.count_nonzero(empty) > 0
    torch.testing.assert_close(step.embeds[1], empty, atol=0, rtol=0)
    assert step.pooled is None


def _diffusers_image(reference, negative_prompt, sdxl):
    from pipelines.samplers import make_scheduler
    from pipelines.seeds import image_generators, initial_noise

    reference.scheduler = make_scheduler("Euler", dict(reference.scheduler.config), "Automatic", sdxl=sdxl)
    latents = initial_noise(image_generators([7]), (4, 8, 8))
    kwargs = {} if negative_prompt is None else {"negative_prompt": negative_prompt}
    image = reference(prompt="a red circle", latents=latents, guidance_scale=5.0, num_inference_steps=4,
                      width=64, height=64, output_type="np", **kwargs).images[0]
    return (image * 255).round().astype(np.int16)


def _mixkit_image(directory, negative_prompt):
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(directory)
    result = pipe(prompt="a red circle", negative_prompt=negative_prompt, seed=7, sampler="Euler",
                  schedule_type="Automatic", cfg_scale=5.0, **SMALL)
    return np.asarray(result.images[0]).astype(np.int16)


def test_sdxl_empty_negative_image_equals_diffusers_default_call(tiny_sdxl_dir):
    """Oracle: StableDiffusionXLPipeline with the negative prompt left unset (force_zeros_for_empty_prompt)."""
    from diffusers import StableDiffusionXLPipeline

    reference = StableDiffusionXLPipeline.from_pretrained(tiny_sdxl_dir)
    assert reference.config.force_zeros_for_empty_prompt is True
    ours = _mixkit_image(tiny_sdxl_dir, "")
    assert np.abs(ours - _diffusers_image(reference, None, sdxl=True)).max() == 0
    # and it is not the text encoding of "" (what diffusers does when "" is passed explicitly)
    assert np.abs(ours - _diffusers_image(reference, "", sdxl=True)).max() > 0


@pytest.mark.parametrize("negative_prompt", [None, ""])
def test_sd1_empty_negative_image_equals_diffusers(tiny_sd1_dir, negative_prompt):
    """SD 1.x is unchanged: diffusers encodes "" (and an unset negative) as text, as A1111 does."""
    from diffusers import StableDiffusionPipeline

    reference = StableDiffusionPipeline.from_pretrained(tiny_sd1_dir, safety_checker=None,
                                                        requires_safety_checker=False)
    ours = _mixkit_image(tiny_sd1_dir, "")
    assert np.abs(ours - _diffusers_image(reference, negative_prompt, sdxl=False)).max() == 0
