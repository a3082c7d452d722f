"""NGMS and Skip Early CFG (pipelines.uncond_skip): A1111's rules, its skipped-step guidance, the pipeline's UNet calls."""

import math

import pytest
import torch

from mixkit.prompts.conditioning import StepConditioning, combine_cfg
from pipelines.infotext import parse_infotext
from pipelines.uncond_skip import UncondSkip, check_uncond_skip, timestep_sigmas, without_uncond

from .unet_spy import replace_forward_for_the_test

SIGMAS = [14.6, 8.0, 3.0, 0.9, 0.5, 0.2, 0.05]  # one per model evaluation


@pytest.mark.parametrize("skip, expected", [
    (UncondSkip(), [False] * 7),
    # A1111: below the sigma, on odd evaluations only (its CFG denoiser counts calls from 0)
    (UncondSkip(s_min_uncond=1.0), [False, False, False, True, False, True, False]),
    (UncondSkip(s_min_uncond=1.0, s_min_uncond_all=True), [False, False, False, True, True, True, True]),
    (UncondSkip(s_min_uncond=15.0), [False, True, False, True, False, True, False]),
    # evaluation / evaluations <= fraction: 0/7, 1/7, 2/7 <= 0.3
    (UncondSkip(skip_early_cond=0.3), [True, True, True, False, False, False, False]),
    (UncondSkip(s_min_uncond=1.0, skip_early_cond=0.3), [True, True, True, True, False, True, False]),
])
def test_which_evaluations_skip_follows_a1111(skip, expected):
    assert [skip.skips(i, len(SIGMAS), sigma) for i, sigma in enumerate(SIGMAS)] == expected


def test_infotext_values_use_a1111_keys_and_only_when_on():
    assert UncondSkip().infotext_values() == {}
    assert UncondSkip(s_min_uncond=1.5).infotext_values() == {"NGMS": 1.5}
    assert UncondSkip(s_min_uncond=1.5, s_min_uncond_all=True, skip_early_cond=0.2).infotext_values() == {
        "Skip Early CFG": 0.2, "NGMS": 1.5, "NGMS all steps": True}


def test_sigmas_of_integer_timesteps_equal_eulers_own():
    from diffusers import EulerDiscreteScheduler

    scheduler = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                       timestep_spacing="leading", steps_offset=1)
    scheduler.set_timesteps(20)
    ours = timestep_sigmas(scheduler.alphas_cumprod, scheduler.timesteps)
    assert ours == pytest.approx(scheduler.sigmas[:-1].tolist(), rel=1e-5)


def test_fractional_timesteps_interpolate_log_sigma():
    alphas = torch.tensor([0.9, 0.5], dtype=torch.float64)
    low, high = math.sqrt(0.1 / 0.9), 1.0
    assert timestep_sigmas(alphas, torch.tensor([0.0, 0.25, 1.0])) == pytest.approx(
        [low, math.exp(0.75 * math.log(low) + 0.25 * math.log(high)), high], rel=1e-12)


def _two_images():
    """Image 0: uncond row 0, prompt row 1. Image 1: uncond row 2, AND parts rows 3 (weight 1) and 4 (weight 0.5)."""
    return StepConditioning(embeds=torch.arange(5.0).view(5, 1, 1), pooled=None, uncond_rows=[0, 2],
                            cond_rows=[[(1, 1.0)], [(3, 1.0), (4, 0.5)]], row_image=[0, 0, 1, 1, 1])


def test_a_skipped_step_keeps_prompt_rows_and_combines_like_a1111():
    skipped = without_uncond(_two_images())
    assert skipped.embeds.flatten().tolist() == [1.0, 3.0, 4.0]
    assert skipped.row_image == [0, 1, 1]
    assert skipped.cond_rows == [[(0, 1.0)], [(1, 1.0), (2, 0.5)]]
    prediction = torch.tensor([[10.0], [30.0], [50.0]])
    # A1111 copies each image's first prompt prediction into its uncond slot and combines at scale 1:
    # image 0 -> its prompt; image 1 -> c3 + 0.5 * (c4 - c3).
    assert combine_cfg(prediction, skipped, 1.0).flatten().tolist() == [10.0, 30.0 + 0.5 * (50.0 - 30.0)]


@pytest.mark.parametrize("arguments, message", [
    ((-0.1, False, 0.0), "s_min_uncond"),
    ((float("nan"), False, 0.0), "s_min_uncond"),
    ((15.5, False, 0.0), r"\[0, 15.0\]"),
    ((True, False, 0.0), "s_min_uncond"),
    (("1", False, 0.0), "s_min_uncond"),
    ((1.0, "yes", 0.0), "s_min_uncond_all"),
    ((0.0, True, 0.0), "needs s_min_uncond > 0"),
    ((0.0, False, 1.5), "skip_early_cond"),
    ((0.0, False, float("inf")), "skip_early_cond"),
])
def test_bad_settings_are_refused_with_their_name(arguments, message):
    with pytest.raises((ValueError, TypeError), match=message):
        check_uncond_skip(*arguments)


class _BatchRecorder:
    """Wraps a UNet's forward to record the batch size of every call."""

    def __init__(self, unet, monkeypatch):
        self.sizes = []
        forward = unet.forward

        def recording(sample, *args, **kwargs):
            self.sizes.append(sample.shape[0])
            return forward(sample, *args, **kwargs)

        replace_forward_for_the_test(monkeypatch, unet, recording)


SMALL = dict(width=64, height=64, steps=6, sampler="Euler", seed=3)


def test_ngms_runs_the_prompt_alone_on_every_other_evaluation(sd1_pipe, monkeypatch):
    recorder = _BatchRecorder(sd1_pipe.model.unet, monkeypatch)
    result = sd1_pipe(prompt="a cat", s_min_uncond=15.0, **SMALL)  # every sigma of SD is below 15
    assert recorder.sizes == [2, 1, 2, 1, 2, 1]
    info = parse_infotext(result.infotexts[0])
    assert info["NGMS"] == "15" and "NGMS all steps" not in info


def test_skip_early_cfg_runs_the_first_fraction_without_the_negative_prompt(sd1_pipe, monkeypatch):
    recorder = _BatchRecorder(sd1_pipe.model.unet, monkeypatch)
    result = sd1_pipe(prompt="a cat", skip_early_cond=0.5, **SMALL)
    assert recorder.sizes == [1, 1, 1, 1, 2, 2]  # evaluations 0..3 of 6: 0, 1/6, 2/6, 3/6 <= 0.5
    assert parse_infotext(result.infotexts[0])["Skip Early CFG"] == "0.5"


def test_skipping_every_step_equals_guidance_scale_one_for_a_batch(sd1_pipe):
    import numpy as np

    # (With AND parts the two differ by design: scale 1 keeps -(sum of weights - 1) x the negative
    # prediction, a skipped step has none; the pure test above pins A1111's skipped-step formula.)
    prompts = ["a cat", "a dog with a hat"]
    common = dict(prompt=prompts, negative_prompt="blurry", batch_size=2, **SMALL)
    skipped = sd1_pipe(cfg_scale=7.0, s_min_uncond=15.0, s_min_uncond_all=True, **common)
    unguided = sd1_pipe(cfg_scale=1.0, **common)
    for a, b in zip(skipped.images, unguided.images):
        difference = np.abs(np.asarray(a, dtype=np.int16) - np.asarray(b, dtype=np.int16))
        assert difference.max() <= 1  # a batch of 2 rows against 4: the same math, other float rounding
    assert parse_infotext(skipped.infotexts[1])["NGMS all steps"] == "True"


def test_ngms_off_is_bit_identical_to_before(sd1_pipe):
    import numpy as np

    plain = sd1_pipe(prompt="a cat", **SMALL).images[0]
    off = sd1_pipe(prompt="a cat", s_min_uncond=0.0, skip_early_cond=0.0, **SMALL).images[0]
    assert np.array_equal(np.asarray(plain), np.asarray(off))


def test_bad_ngms_fails_before_any_unet_call(sd1_pipe, monkeypatch):
    recorder = _BatchRecorder(sd1_pipe.model.unet, monkeypatch)
    with pytest.raises(ValueError, match="s_min_uncond"):
        sd1_pipe(prompt="a cat", s_min_uncond=-1.0, **SMALL)
    with pytest.raises(ValueError, match="needs s_min_uncond > 0"):
        sd1_pipe(prompt="a cat", s_min_uncond_all=True, **SMALL)
    assert recorder.sizes == []
