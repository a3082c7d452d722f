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
], ids=lambda value: getattr(value, "__name__", "")[:30])
def test_a_huge_int_is_refused_naming_the_range(check, message):
    with pytest.raises(ValueError, match=message):
        check()
