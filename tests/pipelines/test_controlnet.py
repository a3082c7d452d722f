"""ControlNet units on tiny SD 1.x / SDXL models: exact no-op at weight 0, the guidance window,
several units summing (diffusers' MultiControlNetModel as oracle), guess mode, diffusers'
ControlNet pipeline as end-to-end oracle, infotext, loading, and errors before any work."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from pipelines.controlnet import (
    ControlNetLimits, ControlNetTextToImage, ControlNetUnit, controlnet_unet_extra, controlnet_units_from_infotext,
    load_controlnet, prepare_control_images,
)
from pipelines.infotext import parse_infotext

from .tiny_images import noise_picture
from .unet_spy import fail_if_called

SMALL = dict(prompt="a red circle", negative_prompt="blurry", seed=3, width=64, height=64, steps=5, sampler="Euler")


def pixels(image):
    return np.asarray(image).astype(np.int16)


@pytest.fixture(scope="module")
def pipe(tiny_sd1_dir):
    return ControlNetTextToImage.from_pretrained(tiny_sd1_dir)


@pytest.fixture(scope="module")
def control_image():
    return noise_picture(0)


@pytest.fixture(scope="module")
def plain(pipe):
    return pipe(**SMALL)


def test_weight_zero_is_exactly_no_controlnet_and_weight_one_is_not(pipe, controlnet, control_image, plain):
    off = pipe(controlnets=[ControlNetUnit(controlnet, control_image, weight=0.0)], **SMALL)
    on = pipe(controlnets=[ControlNetUnit(controlnet, control_image, weight=1.0)], **SMALL)
    assert np.array_equal(pixels(off.images[0]), pixels(plain.images[0]))
    assert np.abs(pixels(on.images[0]) - pixels(plain.images[0])).mean() > 1


def test_guidance_window_runs_the_controlnet_on_the_right_steps(pipe, controlnet, control_image):
    """Euler evaluates once per step, so the timesteps the ControlNet saw tell the steps it ran on.
    With 5 steps and window [0.2, 0.6]: step/5 in {0.2, 0.4, 0.6} -> steps 1, 2, 3 (A1111 rule)."""
    seen, unet_steps = [], []
    handles = [controlnet.register_forward_pre_hook(lambda module, args: seen.append(float(args[1]))),
               pipe.model.unet.register_forward_pre_hook(lambda module, args: unet_steps.append(float(args[1])))]
    try:
        pipe(controlnets=[ControlNetUnit(controlnet, control_image, guidance_start=0.2, guidance_end=0.6)], **SMALL)
    finally:
        for handle in handles:
            handle.remove()
    assert len(unet_steps) == 5
    assert seen == [unet_steps[s] for s in (1, 2, 3)]


def _step_cond(batch: int, width: int = 32, pooled: bool = False):
    generator = torch.Generator().manual_seed(0)
    rows = 2 * batch
    return SimpleNamespace(
        embeds=torch.randn(rows, 77, width, generator=generator),
        pooled=torch.randn(rows, 64, generator=generator) if pooled else None,
        uncond_rows=list(range(batch)), cond_rows=[[(batch + i, 1.0)] for i in range(batch)],
    )


def test_two_units_sum_like_diffusers_multicontrolnet(controlnet, tmp_path, control_image):
    from diffusers.models.controlnets.multicontrolnet import MultiControlNetModel

    from mixkit.testing.tiny_controlnet import build_tiny_controlnet

    second = load_controlnet(build_tiny_controlnet(tmp_path / "cn2", seed=7))
    other_image = Image.fromarray(255 - np.asarray(control_image))
    units = [ControlNetUnit(controlnet, control_image, weight=0.7, preprocessor="none"),
             ControlNetUnit(second, other_image, weight=1.3, preprocessor="invert")]
    controls = prepare_control_images(units, 64, 64)
    cond = _step_cond(batch=1)
    sample = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(1))
    t = torch.tensor(500)
    ours = controlnet_unet_extra(controls, total_steps=10)(sample, t, cond, 0, [0, 0])
    images = [c.tensor.expand(2, -1, -1, -1) for c in controls]
    with torch.inference_mode():
        down, mid = MultiControlNetModel([controlnet, second])(
            sample, t, cond.embeds, controlnet_cond=images, conditioning_scale=[0.7, 1.3], return_dict=False)
    assert len(ours["down_block_additional_residuals"]) == len(down)
    for a, b in zip(ours["down_block_additional_residuals"], down):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(ours["mid_block_additional_residual"], mid)
    # the preprocessed image of unit 2 is the inverted input again
    assert np.array_equal(np.asarray(controls[1].image), np.asarray(control_image))


def test_guess_mode_controls_only_conditional_rows_with_diffusers_scales(controlnet, control_image):
    controls = prepare_control_images([ControlNetUnit(controlnet, control_image, guess_mode=True)], 64, 64)
    cond = _step_cond(batch=2)
    sample = torch.randn(4, 4, 8, 8, generator=torch.Generator().manual_seed(2))
    t = torch.tensor(300)
    ours = controlnet_unet_extra(controls, total_steps=10)(sample, t, cond, 0, [0, 1, 0, 1])
    with torch.inference_mode():
        down, mid = controlnet(sample[2:], t, cond.embeds[2:], controlnet_cond=controls[0].tensor.expand(2, -1, -1, -1),
                               guess_mode=True, return_dict=False)
    for a, b in zip(ours["down_block_additional_residuals"], down):
        assert torch.count_nonzero(a[:2]) == 0
        torch.testing.assert_close(a[2:], b)
    torch.testing.assert_close(ours["mid_block_additional_residual"][2:], mid)


# 2.5: above the UI slider's 2, as sd-webui-controlnet's API and diffusers' controlnet_conditioning_scale take it
@pytest.mark.parametrize("weight", [0.8, 2.5])
def test_matches_diffusers_controlnet_pipeline(pipe, controlnet, control_image, tiny_sd1_dir, weight):
    from diffusers import StableDiffusionControlNetPipeline

    from pipelines.seeds import image_generators, initial_noise

    ours = pipe(controlnets=[ControlNetUnit(controlnet, control_image, weight=weight)], cfg_scale=5.0, **SMALL)
    m = pipe.model
    # the very scheduler our "Euler" uses, so the comparison isolates the ControlNet integration
    scheduler = pipe.session.resolve_sampler("Euler", "Automatic").make_schedulers([torch.Generator()], 5, "cpu")[0]
    reference = StableDiffusionControlNetPipeline(
        vae=m.vae, text_encoder=m.text_encoders[0], tokenizer=m.tokenizers[0], unet=m.unet, controlnet=controlnet,
        scheduler=scheduler, safety_checker=None, feature_extractor=None,
        requires_safety_checker=False,
    )
    reference.set_progress_bar_config(disable=True)
    theirs = reference(prompt=SMALL["prompt"], negative_prompt=SMALL["negative_prompt"], image=control_image,
                       latents=initial_noise(image_generators([3]), (4, 8, 8)), guidance_scale=5.0,
                       num_inference_steps=5, width=64, height=64, controlnet_conditioning_scale=weight,
                       output_type="np").images[0]
    assert np.abs(pixels(ours.images[0]) - (theirs * 255).round().astype(np.int16)).max() <= 1
    assert ours.infotexts[0].count("ControlNet 0") == 1


def test_control_image_of_another_size_is_resized_by_its_resize_mode(pipe, controlnet, control_image):
    """Fitted as sd-webui-controlnet's detectmap_proc fits maps (pipelines.controlnet.map_fit), by the unit's mode."""
    from pipelines.controlnet.map_fit import fit_control_map

    big = control_image.resize((160, 96))
    for mode in ("just resize", "crop and resize", "resize and fill"):
        given = pipe(controlnets=[ControlNetUnit(controlnet, big, resize_mode=mode)], **{**SMALL, "steps": 2})
        manual = pipe(controlnets=[ControlNetUnit(controlnet, fit_control_map(big, 64, 64, mode))], **{**SMALL, "steps": 2})
        assert np.array_equal(pixels(given.images[0]), pixels(manual.images[0])), mode


def test_infotext_writes_units_as_sd_webui_controlnet_and_reads_back(pipe, controlnet, control_image):
    unit = ControlNetUnit(controlnet, control_image, weight=0.5, guidance_start=0.1, guidance_end=0.9,
                          preprocessor="canny", threshold_a=80, model_name="control_tiny_canny")
    result = pipe(controlnets=[unit, ControlNetUnit(controlnet, control_image, guess_mode=True)], **{**SMALL, "steps": 2})
    text = result.infotexts[0]
    # processor_res None: detected at the generation size, whose short side (64) is written as the extension writes it
    assert ('ControlNet 0: "Module: canny, Model: control_tiny_canny, Weight: 0.5, Resize Mode: Crop and Resize, '
            'Processor Res: 64, Threshold A: 80, Threshold B: 200, Guidance Start: 0.1, Guidance End: 0.9, '
            'Pixel Perfect: False, Control Mode: Balanced"') in text
    units = controlnet_units_from_infotext(parse_infotext(text))
    assert len(units) == 2
    assert units[0] == {"module": "canny", "model": "control_tiny_canny", "weight": 0.5, "resize_mode": "Crop and Resize",
                        "processor_res": 64, "threshold_a": 80, "threshold_b": 200, "guidance_start": 0.1,
                        "guidance_end": 0.9, "pixel_perfect": False, "control_mode": "Balanced"}
    assert units[1]["model"] == controlnet_dir_name(controlnet) and units[1]["control_mode"] == "ControlNet is more important"


def controlnet_dir_name(model):
    return str(model.config._name_or_path).rstrip("/").rsplit("/", 1)[-1]


def test_single_file_loads_with_a_config_derived_from_the_base_unet(pipe, controlnet, tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "control_tiny.safetensors"
    save_file({k: v.contiguous() for k, v in controlnet.state_dict().items()}, path)
    loaded = load_controlnet(path, base_unet=pipe.model.unet)
    assert ControlNetUnit(loaded).display_name == "control_tiny"
    for key, value in controlnet.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    with pytest.raises(ValueError, match="base_unet"):
        load_controlnet(path)


def test_missing_controlnet_path_is_a_clear_error(tmp_path):
    from mixkit.errors import ModelNotFoundError

    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_controlnet(tmp_path / "nope")


def test_sdxl_controlnet_on_sd1_model_is_refused_before_running(pipe, control_image, tmp_path, monkeypatch):
    from mixkit.testing.tiny_controlnet import tiny_controlnet

    xl = tiny_controlnet(seed=0, sdxl=True)
    fail_if_called(monkeypatch, pipe.model.unet)
    with pytest.raises(ValueError, match=r"ControlNet 0 \(controlnet\) does not fit this model: it is a "
                       r"ControlNet for SDXL-like \(cross-attention width 64\) models and the model is SD-like "
                       r"\(cross-attention width 32\)"):
        pipe(controlnets=[ControlNetUnit(xl, control_image)], **SMALL)


def test_a_controlnet_of_another_downsampling_is_refused_before_running(pipe, control_image, monkeypatch):
    # Same UNet family, but its conditioning embedding brings images to a grid the VAE does not use: this used to
    # pass the fit check and fail inside diffusers with a shape error.
    from diffusers import ControlNetModel

    from mixkit.testing.tiny_controlnet import TINY_CONDITIONING_CHANNELS

    channels = (*TINY_CONDITIONING_CHANNELS, TINY_CONDITIONING_CHANNELS[-1])  # one more stride-2 step
    other = ControlNetModel(block_out_channels=(32, 64), layers_per_block=1, in_channels=4,
                            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), cross_attention_dim=32,
                            norm_num_groups=8, attention_head_dim=4, conditioning_embedding_out_channels=channels)
    fail_if_called(monkeypatch, pipe.model.unet)
    factor = 2 ** len(TINY_CONDITIONING_CHANNELS)
    with pytest.raises(ValueError, match=f"downsamples images by {factor}, the model's VAE by "
                                         f"{pipe.model.vae_scale_factor}"):
        pipe(controlnets=[ControlNetUnit(other, control_image)], **SMALL)


def test_more_units_than_the_limit_is_refused(pipe, controlnet, control_image):
    units = [ControlNetUnit(controlnet, control_image)] * (ControlNetLimits().max_units + 1)
    with pytest.raises(ValueError, match="limit is 4"):
        pipe(controlnets=units, **SMALL)


@pytest.mark.parametrize("change, message", [
    (dict(weight=float("nan")), "weight"), (dict(weight=-0.1), "weight must be a finite number >= 0"),
    (dict(weight=True), "weight"), (dict(guidance_start=0.8, guidance_end=0.2), "guidance_start"),
    (dict(resize_mode="stretch"), "resize mode"), (dict(preprocessor="cany"), "canny"), (dict(image=None), "no image"),
])
def test_bad_unit_fields_are_refused(pipe, controlnet, control_image, change, message):
    unit = ControlNetUnit(controlnet, control_image)
    for key, value in change.items():
        setattr(unit, key, value)
    with pytest.raises(ValueError, match=message):
        pipe(controlnets=[unit], **SMALL)


@pytest.mark.parametrize("model_name", ["tiny, v2", "tiny:v2", None])
def test_a_model_name_the_infotext_cannot_hold_is_refused_before_running(pipe, control_image, tmp_path, model_name,
                                                                          monkeypatch):
    # The infotext is written after sampling; this name used to be refused only there, with every step lost.
    from mixkit.testing.tiny_controlnet import build_tiny_controlnet

    model = load_controlnet(build_tiny_controlnet(tmp_path / "control_tiny:v2", seed=0))  # None: named by its folder
    unit = ControlNetUnit(model, control_image, model_name=model_name)
    fail_if_called(monkeypatch, pipe.model.unet)
    with pytest.raises(ValueError, match=r"ControlNet 0: model name .*(,|:).* contains ',' or ':'"):
        pipe(controlnets=[unit], **SMALL)


def test_sdxl_controlnet_runs_on_sdxl(tiny_sdxl_dir, control_image):
    from mixkit.testing.tiny_controlnet import tiny_controlnet

    xl_pipe = ControlNetTextToImage.from_pretrained(tiny_sdxl_dir)
    xl = tiny_controlnet(seed=0, sdxl=True)
    small = {**SMALL, "steps": 2}
    plain = xl_pipe(**small)
    off = xl_pipe(controlnets=[ControlNetUnit(xl, control_image, weight=0.0)], **small)
    on = xl_pipe(controlnets=[ControlNetUnit(xl, control_image)], **small)
    assert np.array_equal(pixels(plain.images[0]), pixels(off.images[0]))
    assert not np.array_equal(pixels(plain.images[0]), pixels(on.images[0]))
