"""A1111's Beta alpha/beta, UniPC options, noise schedule, cond padding and alphas_cumprod downcast through txt2img on
the tiny SD1 model: checked before any work, a changed value changes the image and is written under A1111's key,
the infotext read back reproduces the image bit for bit, and the defaults run as before."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.infotext import parse_infotext
from pipelines.params import GenerationLimits, Txt2ImgParams, check_txt2img_params
from pipelines.sampler_parameters import SamplerParameters, from_infotext, parameters_from_values

SMALL = dict(prompt="a red circle", width=64, height=64, steps=4, seed=9)
LONG = dict(SMALL, prompt="a red circle on a blue square, " * 12, negative_prompt="blurry, lowres")  # two chunks vs one


def _pixels(result) -> np.ndarray:
    return np.asarray(result.images[0])


@pytest.mark.parametrize("sampler, schedule, settings, written, call", [
    ("Euler", "Beta", {"beta_dist_alpha": 0.3, "beta_dist_beta": 0.9},
     {"Beta schedule alpha": "0.3", "Beta schedule beta": "0.9"}, SMALL),
    ("Euler", "Automatic", {"sd_noise_schedule": "Zero Terminal SNR"}, {"Noise Schedule": "Zero Terminal SNR"}, SMALL),
    ("DDIM", "Automatic", {"sd_noise_schedule": "Zero Terminal SNR"}, {"Noise Schedule": "Zero Terminal SNR"}, SMALL),
    ("DPM++ 2M", "Karras", {"use_downcasted_alpha_bar": True}, {"Downcast alphas_cumprod": "True"}, SMALL),
    ("UniPC", "Automatic", {"uni_pc_variant": "bh2"}, {"UniPC variant": "bh2"}, SMALL),
    ("UniPC", "Automatic", {"uni_pc_variant": "vary_coeff"}, {"UniPC variant": "vary_coeff"}, SMALL),
    ("UniPC", "Automatic", {"uni_pc_skip_type": "logSNR"}, {"UniPC skip type": "logSNR"}, SMALL),
    ("UniPC", "Automatic", {"uni_pc_skip_type": "time_quadratic", "uni_pc_order": 2},
     {"UniPC skip type": "time_quadratic", "UniPC order": "2"}, SMALL),
    ("UniPC", "Automatic", {"uni_pc_lower_order_final": False}, {"UniPC lower order final": "False"}, SMALL),
    ("Euler", "Automatic", {"pad_cond_uncond": True}, {"Pad conds": "True"}, LONG),
    ("Euler", "Automatic", {"pad_cond_uncond_v0": True}, {"Pad conds v0": "True"}, LONG),
])
def test_a_changed_setting_changes_the_image_and_its_infotext_reproduces_it(sd1_pipe, sampler, schedule, settings,
                                                                            written, call):
    parameters = SamplerParameters(**settings)
    plain = sd1_pipe(**call, sampler=sampler, schedule_type=schedule)
    changed = sd1_pipe(**call, sampler=sampler, schedule_type=schedule, sampler_parameters=parameters)
    assert not np.array_equal(_pixels(plain), _pixels(changed))
    recorded = parse_infotext(changed.infotexts[0], defaults=False)
    assert {key: recorded.get(key) for key in written} == written
    pasted = parameters_from_values(from_infotext(recorded))
    assert pasted == parameters
    again = sd1_pipe(**call, sampler=sampler, schedule_type=schedule, sampler_parameters=pasted)
    assert np.array_equal(_pixels(changed), _pixels(again))


@pytest.mark.parametrize("sampler, schedule, settings", [
    ("Euler", "Beta", {"beta_dist_alpha": 0.6, "beta_dist_beta": 0.6}),
    ("UniPC", "Automatic", {"uni_pc_variant": "bh1", "uni_pc_order": 3, "uni_pc_skip_type": "time_uniform"}),
    ("Euler", "Karras", {"uni_pc_variant": "bh2", "uni_pc_order": 1}),  # UniPC's settings leave others alone
    ("Euler", "Automatic", {"pad_cond_uncond": True}),  # prompt and negative of one length: nothing to pad
    ("Euler", "Automatic", {"sd_noise_schedule": "Default"}),
])
def test_values_that_change_nothing_give_the_very_same_image_and_no_key(sd1_pipe, sampler, schedule, settings):
    plain = sd1_pipe(**SMALL, sampler=sampler, schedule_type=schedule)
    same = sd1_pipe(**SMALL, sampler=sampler, schedule_type=schedule, sampler_parameters=SamplerParameters(**settings))
    assert np.array_equal(_pixels(plain), _pixels(same))
    assert same.infotexts[0] == plain.infotexts[0]


def test_beta_records_its_shape_always_as_a1111():
    assert parameters_from_values(from_infotext({"Beta scheduler alpha": "0.4", "Beta scheduler beta": "0.5"})) == \
        SamplerParameters(beta_dist_alpha=0.4, beta_dist_beta=0.5)  # the option's own infotext name, A1111's paste


def _check(sampler: str = "Euler", **settings) -> None:
    params = Txt2ImgParams(sampler=sampler, sampler_parameters=SamplerParameters(**settings))
    check_txt2img_params(params, GenerationLimits())


@pytest.mark.parametrize("sampler, settings, error, message", [
    ("Euler", {"beta_dist_alpha": 0.0}, ValueError, r"beta_dist_alpha must be a number in \[0\.01, 1\] .* got 0\.0"),
    ("Euler", {"beta_dist_beta": -1.0}, ValueError, r"beta_dist_beta must be a number in \[0\.01, 1\]"),
    ("Euler", {"uni_pc_variant": "bh3"}, ValueError, r"uni_pc_variant must be one of 'bh1', 'bh2', 'vary_coeff'"),
    ("Euler", {"uni_pc_skip_type": "uniform"}, ValueError, r"uni_pc_skip_type must be one of 'time_uniform'"),
    ("Euler", {"uni_pc_order": 0}, ValueError, r"uni_pc_order must be a whole number in \[1, 50\] .* got 0"),
    ("Euler", {"uni_pc_order": 2.5}, ValueError, r"uni_pc_order must be a whole number"),
    ("Euler", {"sd_noise_schedule": "ZTSNR"}, ValueError, r"sd_noise_schedule must be one of 'Default', 'Zero Terminal SNR'"),
    ("Euler", {"pad_cond_uncond": "yes"}, TypeError, r"pad_cond_uncond must be True or False"),
])
def test_bad_values_are_refused_naming_the_setting(sampler, settings, error, message):
    with pytest.raises(error, match=message):
        _check(sampler, **settings)


def test_infotext_text_values_are_read_as_their_types():
    assert parameters_from_values({"uni_pc_order": "4", "uni_pc_lower_order_final": "False",
                                   "uni_pc_skip_type": " logSNR", "beta_dist_alpha": "0.5"}) == \
        SamplerParameters(uni_pc_order=4, uni_pc_lower_order_final=False, uni_pc_skip_type="logSNR",
                          beta_dist_alpha=0.5)
    assert parameters_from_values({"uni_pc_order": 5.0}).uni_pc_order == 5
    with pytest.raises(ValueError, match="uni_pc_order must be a whole number, got 'three'"):
        parameters_from_values({"uni_pc_order": "three"})


@pytest.mark.parametrize("sampler, settings, written", [
    ("UniPC", {"uni_pc_skip_type": "logSNR", "uni_pc_variant": "vary_coeff"},
     {"UniPC skip type": "logSNR", "UniPC variant": "vary_coeff"}),
    ("DPM++ 2M", {"sd_noise_schedule": "Zero Terminal SNR"}, {"Noise Schedule": "Zero Terminal SNR"}),
])
def test_img2img_takes_the_settings_too(sd1_pipe, sampler, settings, written):
    from pipelines.img2img import ImageToImage

    edit = ImageToImage.from_pipeline(sd1_pipe)
    call = dict(prompt="a blue circle", init_images=[sd1_pipe(**SMALL).images[0]], denoising_strength=0.6, steps=8,
                seed=2, width=64, height=64, sampler=sampler)
    plain = edit(**call)
    changed = edit(**call, sampler_parameters=SamplerParameters(**settings))
    assert not np.array_equal(_pixels(plain), _pixels(changed))
    recorded = parse_infotext(changed.infotexts[0], defaults=False)
    assert {key: recorded.get(key) for key in written} == written
