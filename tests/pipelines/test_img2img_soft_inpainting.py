"""Soft inpainting in ImageToImage (pipelines/soft_inpainting_blend.py and its hooks in pipelines/img2img.py)."""

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from pipelines.img2img import ImageToImage
from pipelines.infotext import parse_infotext
from pipelines.soft_inpainting import SoftInpainting
from pipelines.soft_inpainting_blend import SoftMaskBlend, denoised_from_output, sigma_of
from pipelines.inpaint_blend import output_denoising_to

# 128 pixels: the difference filters reach 4 latent cells (32 pixels) around what moved, so a small box blurred by 4
# leaves the picture's first rows fully unmasked and unchanged
RUN = dict(steps=4, seed=5, prompt="a red circle", denoising_strength=0.75, width=128, height=128, mask_blur=4)


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


@pytest.fixture(scope="module")
def picture(picture):
    return picture.resize((128, 128))


def box_mask(box=(56, 56, 71, 71)):
    mask = Image.new("L", (128, 128), 0)
    ImageDraw.Draw(mask).rectangle(box, fill=255)
    return mask


def px(image):
    return np.asarray(image).astype(np.int16)


@pytest.mark.parametrize("prediction_type", ["epsilon", "v_prediction"])
def test_denoised_from_output_inverts_output_denoising_to(prediction_type):
    target, model_input = torch.randn(1, 4, 3, 3, dtype=torch.float64), torch.randn(1, 4, 3, 3, dtype=torch.float64)
    output = output_denoising_to(target, model_input, 0.3, prediction_type)
    assert torch.allclose(denoised_from_output(output, model_input, 0.3, prediction_type), target, atol=1e-12)


def test_sigma_of_a_variance_preserving_level():
    assert sigma_of(0.2) == pytest.approx(2.0, rel=1e-15)


def test_soft_blend_keeps_unmasked_cells_and_skips_the_final_blend():
    init = torch.randn(1, 4, 2, 2)
    repaint = torch.tensor([[[[0.0, 1.0], [0.5, 1.0]]]])
    finished = []
    blend = SoftMaskBlend(init=init, repaint=repaint, before_denoising=False, settings=SoftInpainting(),
                          on_finish=finished.append)
    sample = torch.randn(1, 4, 2, 2) * 2.0
    scaled = sample / (2.0**2 + 1) ** 0.5  # sigma 2
    guided = torch.randn(1, 4, 2, 2)
    denoised = denoised_from_output(blend.guided_output(guided, sample, scaled, object(), 0), scaled, 0.2, "epsilon")
    plain = denoised_from_output(guided, scaled, 0.2, "epsilon")
    assert torch.allclose(denoised[..., 0, 0], init[..., 0, 0] * (init[..., 0, 0].norm() / (init[..., 0, 0].norm()
                                                                                            + 1e-5)), atol=1e-5)
    assert torch.allclose(denoised[..., :, 1], plain[..., :, 1], atol=1e-5)  # fully repainted: the model's own
    latents = torch.randn(1, 4, 2, 2)
    assert blend.final(latents) is latents and finished == [latents]


def test_soft_inpainting_changes_the_result_and_keeps_the_far_unmasked_area(i2i, picture):
    hard = i2i(init_images=[picture], mask=box_mask(), **RUN)
    soft = i2i(init_images=[picture], mask=box_mask(), soft_inpainting=SoftInpainting(), **RUN)
    assert np.abs(px(hard.images[0]) - px(soft.images[0])).max() > 0
    # far from the blurred mask nothing moved: the difference mask is 0 and the original comes back bit for bit
    assert np.array_equal(px(soft.images[0])[:4], px(picture.convert("RGB"))[:4])
    assert np.array_equal(px(soft.images[0])[:, :4], px(picture.convert("RGB"))[:, :4])


def test_soft_inpainting_infotext_follows_mask_blur_in_a1111s_order(i2i, picture):
    settings = SoftInpainting(mask_blend_power=2.0, composite_difference_contrast=3.5)
    text = i2i(init_images=[picture], mask=box_mask(), soft_inpainting=settings, **RUN).infotexts[0]
    keys = list(parse_infotext(text, defaults=False))
    start = keys.index("Mask blur")
    assert keys[start + 1:start + 8] == list(settings.infotext())
    parsed = parse_infotext(text)  # whole numbers as A1111 writes its sliders' values: "2", not "2.0"
    assert parsed["Soft inpainting schedule bias"] == "2" and parsed["Soft inpainting difference contrast"] == "3.5"


def test_without_a_mask_soft_inpainting_does_nothing_and_is_not_recorded(i2i, picture):
    run = {**RUN, "mask_blur": 4}
    plain = i2i(init_images=[picture], **run)
    soft = i2i(init_images=[picture], soft_inpainting=SoftInpainting(), **run)
    assert np.array_equal(px(plain.images[0]), px(soft.images[0]))
    assert "Soft inpainting" not in soft.infotexts[0]


def test_only_masked_keeps_everything_outside_the_crop(i2i, picture):
    result = i2i(init_images=[picture], mask=box_mask((8, 8, 23, 23)), inpaint_full_res=True,
                 inpaint_full_res_padding=0, soft_inpainting=SoftInpainting(), **RUN)
    assert np.array_equal(px(result.images[0])[40:], px(picture.convert("RGB"))[40:])
    assert "Inpaint area: Only masked" in result.infotexts[0] and "Soft inpainting enabled: True" in result.infotexts[0]


@pytest.mark.parametrize("fill", ["fill", "latent noise", "latent nothing"])
def test_masked_content_modes_run(i2i, picture, fill):
    result = i2i(init_images=[picture], mask=box_mask(), inpainting_fill=fill, soft_inpainting=SoftInpainting(),
                 **RUN)
    assert np.array_equal(px(result.images[0])[:4], px(picture.convert("RGB"))[:4])


def test_timestep_sampler_blends_the_model_input(i2i, picture):
    run = {**RUN, "sampler": "DDIM"}
    hard = i2i(init_images=[picture], mask=box_mask(), **run)
    soft = i2i(init_images=[picture], mask=box_mask(), soft_inpainting=SoftInpainting(), **run)
    assert np.abs(px(hard.images[0]) - px(soft.images[0])).max() > 0


def test_inpainting_unet_runs_soft(inpaint_pipe, picture):
    result = inpaint_pipe(init_images=[picture], mask=box_mask(), soft_inpainting=SoftInpainting(), **RUN)
    assert "Soft inpainting enabled: True" in result.infotexts[0]


def test_bad_setting_is_refused_before_any_work(i2i, picture):
    with pytest.raises(ValueError, match=r"soft_inpainting\.composite_mask_influence \(Mask influence\)"):
        i2i(init_images=[picture], mask=box_mask(), soft_inpainting=SoftInpainting(composite_mask_influence=2),
            **RUN)


@pytest.mark.parametrize("module", ["inpaint_only", "inpaint"])
def test_controlnet_inpaint_units_run_with_the_soft_blend(tiny_sd1_dir, controlnet, picture, module):
    """With an img2img mask, inpaint units run as plain inpaint (pipelines/controlnet/pipelines.py) and the call's
    blend is the soft one, as A1111's extension blends in the denoiser whatever ControlNet does."""
    from pipelines.controlnet import ControlNetImageToImage, ControlNetUnit

    pipe = ControlNetImageToImage.from_pretrained(tiny_sd1_dir)
    unit = ControlNetUnit(controlnet, preprocessor=module)
    hard = pipe(init_images=[picture], mask=box_mask(), controlnets=[unit], **RUN)
    soft = pipe(init_images=[picture], mask=box_mask(), controlnets=[unit], soft_inpainting=SoftInpainting(), **RUN)
    assert np.abs(px(hard.images[0]) - px(soft.images[0])).max() > 0
    assert np.array_equal(px(soft.images[0])[:4], px(picture.convert("RGB"))[:4])
    assert "Soft inpainting enabled: True" in soft.infotexts[0] and "ControlNet 0" in soft.infotexts[0]
