"""ControlNet units with a refiner, as sd-webui-controlnet runs them: its `controlnet_main_entry` hooks the UNet of the
model loaded when the generation starts (`p.sd_model.model.diffusion_model`), and A1111's refiner loads another model
mid-sampling whose UNet carries no hook, so the units guide the base model's calls only and the refiner's calls run
unguided (`RefinerSwitch.applied_to` leaves the residuals out)."""

from __future__ import annotations

from .tiny_images import noise_picture

SMALL = dict(prompt="a red circle", seed=3, width=64, height=64, steps=4, sampler="Euler", refiner_switch_at=0.6)


def _residuals_per_call(unet, name: str, log: list):
    original = unet.forward

    def spy(*args, **kwargs):
        log.append((name, kwargs.get("down_block_additional_residuals") is not None))
        return original(*args, **kwargs)

    unet.forward = spy
    return original


def test_units_guide_the_base_models_calls_and_not_the_refiners(tiny_sd1_dir, tmp_path, controlnet):
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.testing.tiny_models import build_tiny_sd1
    from pipelines.controlnet import ControlNetTextToImage, ControlNetUnit

    refiner = load_diffusion_model(build_tiny_sd1(tmp_path / "sd1-refiner", seed=7))
    pipe = ControlNetTextToImage.from_pretrained(tiny_sd1_dir)
    image = noise_picture(0)
    unit = ControlNetUnit(controlnet, image, preprocessor="none", model_name="tiny")
    log = []
    base_forward = _residuals_per_call(pipe.model.unet, "base", log)
    refiner_forward = _residuals_per_call(refiner.unet, "refiner", log)
    try:
        result = pipe(**SMALL, controlnets=[unit], refiner=refiner)
    finally:
        pipe.model.unet.forward, refiner.unet.forward = base_forward, refiner_forward
    # Euler 4 steps, t = 999, 666, 333, 0: (999 - t) / 1000 reaches 0.6 at t = 333
    assert log == [("base", True), ("base", True), ("refiner", False), ("refiner", False)]
    assert "ControlNet 0: " in result.infotexts[0] and "Refiner: " in result.infotexts[0]
