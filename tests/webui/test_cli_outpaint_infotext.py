"""`mixkit outpaint --infotext`: which keys an outpaint takes (the script's mask blur divided back from the pass's)
and which it names as unused, per --method."""

import argparse

import pytest

from webui.cli.outpaint_infotext import OutpaintInfotextKeys, script_mask_blur


def test_the_pass_mask_blur_is_divided_back_to_the_scripts():
    assert script_mask_blur(2)("8") == 4 and script_mask_blur(4)("32") == 8 and script_mask_blur(4)("0") == 0
    with pytest.raises(ValueError):
        script_mask_blur(4)("6")  # no mk2 run records 6: not the script's blur times 4
    with pytest.raises(ValueError):
        script_mask_blur(2)("wide")


def test_poor_mans_takes_masked_content_and_mk2_names_it_unused():
    poor, mk2 = argparse.Namespace(method="poor"), argparse.Namespace(method="mk2")
    assert set(OutpaintInfotextKeys.flag_keys(poor)) == {"denoising_strength", "mask_blur", "masked_content"}
    assert set(OutpaintInfotextKeys.flag_keys(mk2)) == {"denoising_strength", "mask_blur"}
    written = {"Masked content": "fill", "Mask mode": "Inpaint not masked", "Hires steps": "4", "Steps": "20"}
    assert OutpaintInfotextKeys.unused(mk2, written) == {
        "Masked content": " (Outpainting mk2 always paints from 'original')",
        "Mask mode": " (not an outpainting setting)", "Hires steps": " (outpainting has no hires fix)"}
    assert "Masked content" not in OutpaintInfotextKeys.unused(poor, written)
