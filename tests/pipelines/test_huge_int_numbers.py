"""A 400-digit int where a bounded number is expected (a JSON request or a command line can carry one) is refused
naming the value's range, like any number out of it, never an OverflowError from math.isfinite (a 500 / traceback)."""

from __future__ import annotations

import pytest

HUGE = 10 ** 400


def _strength():
    from pipelines.img2img import _checked_strength

    _checked_strength(HUGE)


def _sd_upscale_scale():
    from pipelines.scripts.sd_upscale import _scale

    _scale(HUGE)


def _refiner_switch():
    from pipelines.refiner import check_refiner_params

    check_refiner_params("some/refiner", HUGE)


def _codeformer_weight():
    from pipelines.face_restoration import check_face_restoration_weight

    check_face_restoration_weight(-HUGE)


def _upscale_factor():
    from pipelines.upscale import UpscaleLimits, check_upscale

    check_upscale(64, 64, HUGE, UpscaleLimits())


def _controlnet_guidance():
    from pipelines.controlnet.units import _number

    _number("unit 0", HUGE, 0.0, 1.0)


def _tome_ratio():
    from pipelines.approx.tome_unet import check_tome_ratio

    check_tome_ratio(HUGE)


def _freeu_factor():
    from pipelines.approx.freeu import FreeU

    FreeU(b1=HUGE)


def _ngms():
    from pipelines.uncond_skip import check_uncond_skip

    check_uncond_skip(HUGE, False, 0)


def _skip_early_cond():
    from pipelines.uncond_skip import check_uncond_skip

    check_uncond_skip(0, False, HUGE)


def _api_controlnet_guidance():
    from webui.api_controlnet import _number

    _number("unit 0", HUGE, 0.0, 1.0)


def _controlnet_weight():
    from pipelines.controlnet.units import check_weight

    check_weight("unit 0 weight", HUGE)


def _api_controlnet_processor_res():
    from webui.api_controlnet import _processor_res

    _processor_res("unit 0", HUGE)


def _api_controlnet_threshold():
    from webui.api_controlnet import _threshold

    _threshold("unit 0 threshold_a", HUGE)


def _outpaint_script_pixels():
    from webui.api_scripts import outpaint_script_params

    outpaint_script_params(None, [HUGE])


def _mk2_script_falloff():
    from webui.api_scripts import mk2_script_params

    mk2_script_params(None, ["", 16, 2, ["left"], HUGE])


def _img2img_extra_noise():
    from pipelines.img2img_noise import check_img2img_noise

    check_img2img_noise(1.0, HUGE)


def _sampler_s_tmax():
    from pipelines.sampler_parameters import SamplerParameters, check_sampler_parameters

    check_sampler_parameters(SamplerParameters(s_tmax=HUGE))


def _preprocessor_threshold():
    """tile_resample's rate accepts any number >= its low bound (high bound infinity): infinity stays refused, and
    a huge int, which no float holds, is refused the same way."""
    from pipelines.preprocessors.registry import get_preprocessor

    get_preprocessor("tile_resample").resolve_thresholds(HUGE, None)


def _detect_threshold():
    from pipelines.controlnet.detect import check_detect_inputs

    check_detect_inputs("canny", 512, HUGE, None)


@pytest.mark.parametrize("check, message", [
    (_strength, r"denoising_strength must be a number in \[0, 1\]"),
    (_sd_upscale_scale, r"Scale Factor\) must be a number in"),
    (_refiner_switch, "refiner_switch_at must be a number strictly between 0 and 1"),
    (_codeformer_weight, r"codeformer_weight must be a number in \[0, 1\]"),
    (_upscale_factor, r"Upscale factor must be a number in \(0, "),
    (_controlnet_guidance, r"unit 0 must be a number in \[0.0, 1.0\]"),
    (_tome_ratio, "ToMe ratio must be a number in"),
    (_freeu_factor, "FreeU b1 must be a number in"),
    (_ngms, r"s_min_uncond \(NGMS\) must be a sigma in"),
    (_skip_early_cond, r"skip_early_cond must be a fraction of the steps in \[0, 1\]"),
    (_api_controlnet_guidance, r"unit 0 must be a number in \[0.0, 1.0\]"),
    (_controlnet_weight, "unit 0 weight must be a finite number >= 0"),
    (_api_controlnet_processor_res, r"unit 0 processor_res must be an integer in \["),
    (_api_controlnet_threshold, r"unit 0 threshold_a must be a number \(-1 for the preprocessor's default\)"),
    (_outpaint_script_pixels, "script_args pixels: must be a whole number"),
    (_mk2_script_falloff, "script_args falloff_exponent: must be a number"),
    (_img2img_extra_noise, r"img2img_extra_noise must be a number in \[0, 1\]"),
    (_sampler_s_tmax, r"s_tmax must be a number in \["),
    (_detect_threshold, "threshold_a must be a finite number or None"),
    (_preprocessor_threshold, r"Preprocessor 'tile_resample': threshold_a .* must be a number >= "),
], ids=lambda value: getattr(value, "__name__", "")[:30])
def test_a_huge_int_is_refused_naming_the_range(check, message):
    with pytest.raises(ValueError, match=message):
        check()
