"""Soft injection: control mode "My prompt is more important", and hires fix's forced soft weights for canny/mlsd.

Reference: sd-webui-controlnet `scripts/hook.py`: with `soft_injection` (My prompt is more important), or in the
hires-fix pass when the module name contains "canny" or "mlsd" (`high_res_fix_forced_soft_injection`),
`control_scales = [weight * 0.825 ** float(12 - i) for i in range(13)]` (SDXL: the first 10), applied to the
residuals of every row; only `cfg_injection` (ControlNet is more important) drops the unconditional rows.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import pipelines.controlnet.pipelines as control_pipelines
from pipelines.controlnet import (
    ControlHiresParams, ControlNetTextToImage, ControlNetUnit, controlnet_unet_extra,
    prepare_control_images,
)
from pipelines.controlnet.residuals import soft_injection_scales
from pipelines.hires import HiresFix
from pipelines.txt2img import TextToImage

from .tiny_images import noise_picture


@pytest.fixture(scope="module")
def control_image():
    return noise_picture(0)


def step_cond(batch: int):
    generator = torch.Generator().manual_seed(0)
    return SimpleNamespace(embeds=torch.randn(2 * batch, 77, 32, generator=generator), pooled=None,
                           uncond_rows=list(range(batch)), cond_rows=[[(batch + i, 1.0)] for i in range(batch)])


def test_soft_injection_scales_are_the_extensions():
    assert soft_injection_scales(1.0, 13) == [0.825 ** (12 - i) for i in range(13)]
    assert soft_injection_scales(0.5, 13)[12] == 0.5 and soft_injection_scales(2.0, 13)[0] == 2.0 * 0.825 ** 12
    assert soft_injection_scales(1.0, 10)[-1] == 0.825 ** 3  # SDXL: the first 10 of the 13 scales


def test_my_prompt_is_more_important_scales_every_row(controlnet, control_image):
    unit = ControlNetUnit(controlnet, control_image, weight=0.7, soft_injection=True)
    controls = prepare_control_images([unit], 64, 64)
    cond = step_cond(batch=2)
    sample = torch.randn(4, 4, 8, 8, generator=torch.Generator().manual_seed(2))
    t = torch.tensor(300)
    ours = controlnet_unet_extra(controls, total_steps=10)(sample, t, cond, 0, [0, 1, 0, 1])
    with torch.inference_mode():
        down, mid = controlnet(sample, t, cond.embeds, controlnet_cond=controls[0].tensor.expand(4, -1, -1, -1),
                               conditioning_scale=1.0, return_dict=False)
    scales = [0.7 * 0.825 ** (12 - i) for i in range(len(down) + 1)]
    for ours_down, full, scale in zip(ours["down_block_additional_residuals"], down, scales):
        assert torch.count_nonzero(ours_down[:2]) > 0  # the negative prompt's rows keep their control
        torch.testing.assert_close(ours_down, full * scale)
    torch.testing.assert_close(ours["mid_block_additional_residual"], mid * scales[-1])


def test_soft_injection_and_guess_mode_together_are_refused(tiny_sd1_dir, controlnet, control_image):
    pipe = ControlNetTextToImage.from_pretrained(tiny_sd1_dir)
    unit = ControlNetUnit(controlnet, control_image, guess_mode=True, soft_injection=True)
    with pytest.raises(ValueError, match="two different control modes"):
        pipe(prompt="x", width=64, height=64, steps=1, controlnets=[unit])


def test_infotext_records_my_prompt_is_more_important(tiny_sd1_dir, controlnet, control_image):
    pipe = ControlNetTextToImage.from_pretrained(tiny_sd1_dir)
    result = pipe(prompt="x", seed=1, width=64, height=64, steps=1,
                  controlnets=[ControlNetUnit(controlnet, control_image, soft_injection=True, model_name="tiny")])
    assert "Control Mode: My prompt is more important" in result.infotexts[0]


@pytest.mark.parametrize("preprocessor, soft_second_pass", [("canny", True), ("none", False)])
def test_hires_second_pass_forces_soft_weights_on_canny_units(tiny_sd1_dir, controlnet, control_image, monkeypatch,
                                                               preprocessor, soft_second_pass):
    seen = []
    original = control_pipelines.controlnet_unet_extra

    def recording(controls, total, time_ids=None):
        seen.append([c.soft_injection for c in controls])
        return original(controls, total, time_ids)

    monkeypatch.setattr(control_pipelines, "controlnet_unet_extra", recording)
    scales = []
    handle = controlnet.register_forward_pre_hook(
        lambda module, args, kwargs: scales.append(kwargs["conditioning_scale"]), with_kwargs=True)
    try:
        HiresFix(TextToImage.from_pretrained(tiny_sd1_dir))(ControlHiresParams(
            prompt="x", seed=3, width=64, height=64, steps=2, sampler="Euler", hr_scale=2.0, hr_upscaler="Latent",
            denoising_strength=0.6, controlnets=[ControlNetUnit(controlnet, control_image, preprocessor=preprocessor)]))
    finally:
        handle.remove()
    assert seen == [[False], [soft_second_pass]]  # the first pass keeps the unit's own (balanced) mode
    assert scales and all(s == 1.0 for s in scales)  # weight 1: full scale, soft scales applied after the model


def test_hires_forced_soft_weights_scale_the_residuals(controlnet, control_image):
    from pipelines.controlnet.residuals import hires_second_pass_controls

    first = prepare_control_images([ControlNetUnit(controlnet, control_image, preprocessor="canny", weight=0.5)], 64, 64)
    second = hires_second_pass_controls(first, 128, 128)
    cond = step_cond(batch=1)
    sample = torch.randn(2, 4, 16, 16, generator=torch.Generator().manual_seed(5))
    t = torch.tensor(200)
    ours = controlnet_unet_extra(second, total_steps=4)(sample, t, cond, 0, [0, 0])
    with torch.inference_mode():
        down, mid = controlnet(sample, t, cond.embeds, controlnet_cond=second[0].tensor.expand(2, -1, -1, -1),
                               conditioning_scale=1.0, return_dict=False)
    for ours_down, full, i in zip(ours["down_block_additional_residuals"], down, range(len(down))):
        torch.testing.assert_close(ours_down, full * (0.5 * 0.825 ** (12 - i)))
    torch.testing.assert_close(ours["mid_block_additional_residual"], mid * (0.5 * 0.825 ** (12 - len(down))))
