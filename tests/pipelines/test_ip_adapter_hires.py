"""IP-Adapter with hires fix: the adapters guide both passes, as sd-webui-controlnet's IP-Adapter units do.

References: sd-webui-controlnet `scripts/ipadapter/plugable_ipadapter.py` (`PlugableIPAdapter.hook` computes the image
embeddings once; its attention patch runs in every UNet call, the hires pass's too, checking the guidance window
against the running pass's `current_sampling_percent`, and resizes the effective-region mask to each layer).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import pipelines.hires as hires_module
import pipelines.ip_adapter_embeds as embeds_module
import pipelines.ip_adapter_files as files_module
import pipelines.ip_adapter_layers as layers_module
from pipelines.hires import HiresFix, HiresParams, _SecondPass
from pipelines.ip_adapter_hires import (
    ControlIPAdapterHiresParams, IPAdapterFirstPass, IPAdapterHiresParams, hires_params_class,
)
from pipelines.ip_adapter_masks import hires_pass_masks

from .ip_adapter_helpers import pixels, reference, unet_as_found
from .tiny_images import box_mask

SMALL = dict(prompt="a cat", width=64, height=64, steps=3, seed=1, sampler="Euler", hr_scale=2.0,
             hr_upscaler="Latent", denoising_strength=0.6)
BLACK = Image.new("L", (64, 64), 0)


@pytest.fixture(scope="module")
def hires(ip_pipe):
    return HiresFix(ip_pipe)


@pytest.fixture(scope="module")
def plain_hires(hires):
    return pixels(hires(HiresParams(**SMALL)))


def adapter(adapter_file, scale=0.8, **more):
    return dict(ip_adapter=str(adapter_file), ip_adapter_image=reference(0), ip_adapter_scale=scale, **more)


@pytest.fixture
def unet_extras(monkeypatch):
    """Every IP-Adapter `unet_extra` built during the test, recording per UNet call the latent size it was given,
    whether image embeddings went in and the masks' sizes."""
    calls = []
    original = embeds_module.ip_adapter_unet_extra

    def recording(*args, **kwargs):
        inner = original(*args, **kwargs)

        def unet_extra(model_input, *rest):
            out = inner(model_input, *rest)
            masks = (out.get("cross_attention_kwargs") or {}).get("ip_adapter_masks")
            calls.append((tuple(model_input.shape[-2:]), "image_embeds" in out["added_cond_kwargs"],
                          None if masks is None else [None if m is None else tuple(m.shape[-2:]) for m in masks]))
            return out

        return unet_extra

    monkeypatch.setattr(embeds_module, "ip_adapter_unet_extra", recording)
    return calls


def test_the_adapter_guides_both_passes_and_the_unet_is_left_as_found(hires, ip_pipe, adapter_file, unet_extras):
    processors = dict(ip_pipe.model.unet.attn_processors)
    result = hires(IPAdapterHiresParams(**SMALL, **adapter(adapter_file)))
    assert result.images[0].size == (128, 128)
    latent = 64 // ip_pipe.model.vae_scale_factor
    sizes = sorted({size for size, embeds, _ in unet_extras if embeds})
    assert sizes == [(latent, latent), (2 * latent, 2 * latent)]
    unet_as_found(ip_pipe, processors)


def test_a_plus_adapter_and_an_sdxl_adapter_guide_both_passes(hires, plus_adapter_file, plain_hires, sdxl_pipe,
                                                             tmp_path, unet_extras):
    from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter
    from pipelines.ip_adapter import IPAdapterTextToImage

    plus = hires(IPAdapterHiresParams(**SMALL, **adapter(plus_adapter_file)))
    assert np.abs(pixels(plus) - plain_hires).mean() > 1
    sdxl = IPAdapterTextToImage.from_pipeline(sdxl_pipe)
    processors = dict(sdxl.model.unet.attn_processors)
    file = save_tiny_ip_adapter(tmp_path, sdxl.model.unet)
    plain = pixels(HiresFix(sdxl)(HiresParams(**SMALL)))
    unet_extras.clear()
    guided = HiresFix(sdxl)(IPAdapterHiresParams(**SMALL, **adapter(file)))
    latent = 64 // sdxl.model.vae_scale_factor
    assert sorted({size for size, embeds, _ in unet_extras if embeds}) == [(latent, latent), (2 * latent, 2 * latent)]
    assert guided.images[0].size == (128, 128) and np.abs(pixels(guided) - plain).mean() > 1
    unet_as_found(sdxl, processors)


def test_hires_with_the_adapter_is_neither_hires_alone_nor_the_adapter_alone(hires, ip_pipe, adapter_file,
                                                                            plain_hires, monkeypatch):
    both = pixels(hires(IPAdapterHiresParams(**SMALL, **adapter(adapter_file))))
    assert np.abs(both - plain_hires).mean() > 1
    # the adapter alone: the same first pass upscaled and refined without it (the first pass's image prompt only)
    monkeypatch.setattr(hires_module, "hires_passes", lambda params: (IPAdapterFirstPass, _SecondPass))
    first_pass_only = pixels(hires(IPAdapterHiresParams(**SMALL, **adapter(adapter_file))))
    assert np.abs(both - first_pass_only).mean() > 1 and np.abs(first_pass_only - plain_hires).mean() > 1
    # and the plain IP-Adapter txt2img image at the first pass's size, brought to the hires size
    txt2img = {k: v for k, v in SMALL.items() if not k.startswith("hr_") and k != "denoising_strength"}
    alone = ip_pipe(**txt2img, **adapter(adapter_file)).images[0].resize((128, 128), Image.LANCZOS)
    assert np.abs(both - np.asarray(alone).astype(int)).mean() > 1


def test_scale_zero_is_exactly_hires_alone_and_keeps_both_recipes(hires, adapter_file, plain_hires, unet_extras):
    result = hires(IPAdapterHiresParams(**SMALL, **adapter(adapter_file, scale=0.0)))
    assert np.array_equal(pixels(result), plain_hires)
    assert unet_extras == []  # nothing attached, nothing encoded
    infotext = result.infotexts[0]
    assert "Hires upscale: 2" in infotext and "Denoising strength: 0.6" in infotext
    assert 'IP-Adapter: "ip-adapter_tiny: 0"' in infotext


def test_infotext_has_the_hires_and_the_ip_adapter_keys(hires, adapter_file):
    from pipelines.infotext import split_infotext

    result = hires(IPAdapterHiresParams(**SMALL, hr_second_pass_steps=2,
                                        **adapter(adapter_file, ip_adapter_guidance=(0.0, 0.5))))
    values = split_infotext(result.infotexts[0])[2]
    assert values["Size"] == "64x64"  # A1111's: the first pass's
    assert values["Hires upscale"] == "2" and values["Hires steps"] == "2" and values["Hires upscaler"] == "Latent"
    assert values["IP-Adapter"] == "ip-adapter_tiny: 0.8" and values["IP-Adapter Guidance"] == "0-0.5"


def test_the_image_encoder_is_loaded_and_run_once_per_job(sd1_pipe, adapter_file, monkeypatch):
    """Two batches, two passes each: one encoder load and one encoding, even from a pipeline without IP-Adapter
    state of its own (a plain TextToImage, as the server wraps)."""
    from pipelines.txt2img import TextToImage

    loads, encodings = [], []
    load, encode = files_module.load_image_encoder, embeds_module.encode_ip_images
    monkeypatch.setattr(files_module, "load_image_encoder", lambda *a: loads.append(a) or load(*a))
    monkeypatch.setattr(embeds_module, "encode_ip_images", lambda *a: encodings.append(a) or encode(*a))
    result = HiresFix(TextToImage.from_pipeline(sd1_pipe))(
        IPAdapterHiresParams(**SMALL, batch_count=2, **adapter(adapter_file)))
    assert len(result.images) == 2 and len(loads) == 1 and len(encodings) == 1


def test_the_second_pass_uses_the_first_pass_embeddings(hires, adapter_file, monkeypatch):
    """Precomputed embeddings give the picture images give: the second pass does not encode anything itself."""
    embeds = hires.pipe.encode_ip_adapter_image(reference(0), ip_adapter=str(adapter_file))
    by_images = pixels(hires(IPAdapterHiresParams(**SMALL, **adapter(adapter_file))))
    monkeypatch.setattr(embeds_module, "encode_ip_images", lambda *a: pytest.fail("encoded again"))
    by_embeds = hires(IPAdapterHiresParams(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image_embeds=embeds,
                                           ip_adapter_scale=0.8))
    assert np.array_equal(pixels(by_embeds), by_images)


def test_guidance_windows_count_each_pass_steps(hires, adapter_file, monkeypatch):
    totals = []
    original = layers_module.windowed_scales
    monkeypatch.setattr(layers_module, "windowed_scales",
                        lambda unet, scales, windows, total: totals.append(total) or original(unet, scales, windows,
                                                                                            total))
    hires(IPAdapterHiresParams(**dict(SMALL, steps=4), hr_second_pass_steps=2,
                               **adapter(adapter_file, ip_adapter_guidance=(0.0, 0.5))))
    assert totals == [4, 2]


def test_masks_act_in_the_hires_pass(hires, adapter_file, second_adapter, unet_extras):
    """A black mask is exactly the adapter switched off in both passes: were the mask dropped in the second pass,
    the second adapter would act there."""
    two = dict(SMALL, ip_adapter=[str(adapter_file), str(second_adapter)],
               ip_adapter_image=[reference(0), reference(1)])
    masked = pixels(hires(IPAdapterHiresParams(**two, ip_adapter_mask=[None, BLACK])))
    latent = 64 // hires.model.vae_scale_factor
    masks = {(size, tuple(mask)) for size, _, mask in unet_extras}
    assert masks == {((latent, latent), (None, (latent, latent))),
                     ((2 * latent, 2 * latent), (None, (2 * latent, 2 * latent)))}
    second_off = pixels(hires(IPAdapterHiresParams(**two, ip_adapter_scale=[1.0, 0.0])))
    assert np.array_equal(masked, second_off)


def test_a_cropping_resize_cuts_the_mask_as_the_latents(hires, adapter_file, unet_extras):
    """hr_resize 128x64 from a square first pass covers 128x128 and keeps its middle rows: the mask drawn square is
    cut the same way (no aspect-ratio error in the second pass)."""
    top = box_mask((0, 0, 64, 32))
    result = hires(IPAdapterHiresParams(**dict(SMALL, hr_resize_x=128, hr_resize_y=64),
                                        **adapter(adapter_file, ip_adapter_mask=top)))
    assert result.images[0].size == (128, 64)
    latent = 64 // hires.model.vae_scale_factor
    assert {mask[0] for _, _, mask in unet_extras} == {(latent, latent), (latent, 2 * latent)}


def test_hires_pass_masks_stretch_then_crop_exactly():
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0],
                         [0.0, 0.0, 0.0, 0.0]])[None, None]
    # same grid: only the crop (rows 1 and 2)
    (cut,) = hires_pass_masks([mask], (4, 4), (0, 1, 4, 3))
    assert cut.tolist() == [[[[1.0] * 4, [0.0] * 4]]]
    # twice the grid, cut to its left half: 8 rows, 4 columns, white on top and black at the bottom
    (stretched,) = hires_pass_masks([mask], (8, 8), (0, 0, 4, 8))
    assert stretched.shape == (1, 1, 8, 4)
    assert stretched[0, 0, 0].tolist() == [1.0] * 4 and stretched[0, 0, -1].tolist() == [0.0] * 4
    assert hires_pass_masks([None], (8, 8), (0, 0, 8, 8)) == [None]


def test_an_error_in_the_second_pass_leaves_the_unet_as_found(hires, ip_pipe, adapter_file, monkeypatch):
    processors = dict(ip_pipe.model.unet.attn_processors)

    def fail(self, params):
        raise RuntimeError("second pass failed")

    monkeypatch.setattr(_SecondPass, "_prepare", fail)
    with pytest.raises(RuntimeError, match="second pass failed"):
        hires(IPAdapterHiresParams(**SMALL, **adapter(adapter_file)))
    unet_as_found(ip_pipe, processors)


def test_an_interrupted_job_keeps_the_first_pass_image_and_the_adapter_keys(hires, ip_pipe, adapter_file):
    from pipelines.control import GenerationControl

    processors = dict(ip_pipe.model.unet.attn_processors)
    control = GenerationControl()

    def interrupt(progress):
        if progress.step == 1:
            control.interrupt()

    result = hires(IPAdapterHiresParams(**SMALL, **adapter(adapter_file)), callback=interrupt, control=control)
    assert result.interrupted and result.images[0].size == (64, 64)
    assert "IP-Adapter: " in result.infotexts[0] and "Hires upscale" not in result.infotexts[0]
    unet_as_found(ip_pipe, processors)


@pytest.mark.parametrize("call, error, match", [
    (dict(ip_adapter_mask=Image.new("L", (128, 64), 0)), ValueError, "aspect ratio is not the first pass's 64x64"),
    (dict(ip_adapter_scale=3.0), ValueError, r"ip_adapter_scale must be a number in \[0, 2\]"),
    (dict(hr_scale=0.5), ValueError, "hr_scale must be a number"),
])
def test_bad_calls_fail_before_any_work(hires, ip_pipe, adapter_file, call, error, match, unet_extras):
    processors = dict(ip_pipe.model.unet.attn_processors)
    with pytest.raises(error, match=match):
        hires(IPAdapterHiresParams(**{**SMALL, **adapter(adapter_file), **call}))
    assert unet_extras == []
    unet_as_found(ip_pipe, processors)


def test_keywords_pick_the_ip_adapter_params(sd1_pipe, adapter_file, hires):
    from pipelines.txt2img import TextToImage

    by_keywords = HiresFix(TextToImage.from_pipeline(sd1_pipe))(**SMALL, **adapter(adapter_file))
    assert np.array_equal(pixels(by_keywords), pixels(hires(IPAdapterHiresParams(**SMALL, **adapter(adapter_file)))))
    assert hires_params_class(False, False) is HiresParams
    assert hires_params_class(True, True) is ControlIPAdapterHiresParams


def test_adapters_set_by_load_ip_adapter_serve_the_hires_job(sd1_pipe, adapter_file, hires, monkeypatch):
    from pipelines.ip_adapter import IPAdapterTextToImage

    pipe = IPAdapterTextToImage.from_pipeline(sd1_pipe)
    pipe.load_ip_adapter(str(adapter_file.parent), weight_name=adapter_file.name)
    pipe.set_ip_adapter_scale(0.8)
    monkeypatch.setattr(files_module, "load_image_encoder", lambda *a: pytest.fail("loaded again"))
    result = HiresFix(pipe)(**SMALL, ip_adapter_image=reference(0))
    assert np.array_equal(pixels(result), pixels(hires(IPAdapterHiresParams(**SMALL, **adapter(adapter_file)))))
    assert 'IP-Adapter: "ip-adapter_tiny: 0.8"' in result.infotexts[0]


# -- with ControlNet units -----------------------------------------------------------------------------------------


def unit(controlnet, weight=1.0):
    from pipelines.controlnet import ControlNetUnit

    from .tiny_images import noise_picture

    return ControlNetUnit(controlnet, noise_picture(0), preprocessor="none", weight=weight, resize_mode="just resize")


def test_units_and_adapter_guide_both_passes_together(hires, ip_pipe, controlnet, adapter_file, unet_extras):
    from pipelines.controlnet import ControlHiresParams

    processors = dict(ip_pipe.model.unet.attn_processors)
    control_only = pixels(hires(ControlHiresParams(**SMALL, controlnets=[unit(controlnet)])))
    both = hires(ControlIPAdapterHiresParams(**SMALL, controlnets=[unit(controlnet)], **adapter(adapter_file)))
    latent = 64 // ip_pipe.model.vae_scale_factor
    assert sorted({size for size, embeds, _ in unet_extras if embeds}) == [(latent, latent), (2 * latent, 2 * latent)]
    assert np.abs(pixels(both) - control_only).mean() > 1
    assert "ControlNet 0: " in both.infotexts[0] and "IP-Adapter: " in both.infotexts[0]
    assert "Hires upscale: 2" in both.infotexts[0]
    adapter_only = pixels(hires(IPAdapterHiresParams(**SMALL, **adapter(adapter_file))))
    assert np.abs(pixels(both) - adapter_only).mean() > 1
    # scale 0: exactly the units' hires image; weight 0: exactly the adapter's
    off = hires(ControlIPAdapterHiresParams(**SMALL, controlnets=[unit(controlnet)], **adapter(adapter_file, 0.0)))
    assert np.array_equal(pixels(off), control_only)
    unit_off = hires(ControlIPAdapterHiresParams(**SMALL, controlnets=[unit(controlnet, 0.0)], **adapter(adapter_file)))
    assert np.array_equal(pixels(unit_off), adapter_only)
    unet_as_found(ip_pipe, processors)
