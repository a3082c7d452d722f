"""TAESD decode swap: equals diffusers' AutoencoderTiny decode, refuses the wrong family, undoes cleanly."""

import numpy as np
import pytest
import torch
from diffusers import AutoencoderTiny
from diffusers.image_processor import VaeImageProcessor

from mixkit.errors import ModelNotFoundError
from mixkit.models.diffusion import ModelFamily
from mixkit.runtime import install_vae_guard, remove_vae_guard
from pipelines.approx.taesd import (default_taesd_source, install_taesd_decode, installed_taesd, load_taesd,
                                    preview_images, remove_taesd_decode, taesd_suspended)
from pipelines.txt2img import TextToImage
from pipelines.vae_decode import decode_latents

from .conftest import build_tiny_taesd


@pytest.fixture(scope="module")
def pipe(tiny_sd1_dir):
    return TextToImage.from_pretrained(tiny_sd1_dir)


def test_decode_equals_diffusers_autoencoder_tiny_with_its_image_processor(pipe, tiny_taesd_dir):
    """Oracle: diffusers' own pipeline path, `AutoencoderTiny.decode(latents / 1.0)` + VaeImageProcessor."""
    vae = pipe.model.vae
    taesd = load_taesd(tiny_taesd_dir, ModelFamily.SD1)
    latents = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(5))
    full = [np.asarray(image) for image in decode_latents(vae, latents)]
    install_taesd_decode(vae, taesd)
    try:
        ours = [np.asarray(image) for image in decode_latents(vae, latents)]
    finally:
        remove_taesd_decode(vae)
    oracle = AutoencoderTiny.from_pretrained(tiny_taesd_dir)
    with torch.no_grad():
        pixels = oracle.decode(latents / oracle.config.scaling_factor).sample
    expected = [np.asarray(image) for image in VaeImageProcessor().postprocess(pixels, output_type="pil")]
    for mine, theirs in zip(ours, expected):
        assert mine.shape == (64, 64, 3)
        # decode_latents divides by the SD VAE's scaling factor and the swap multiplies back: 1 ulp, at most 1 level
        assert np.abs(mine.astype(int) - theirs.astype(int)).max() <= 1
    assert not np.array_equal(ours[0], full[0])
    assert [np.asarray(image) for image in decode_latents(vae, latents)][0].tobytes() == full[0].tobytes()


@pytest.mark.parametrize("family, wrong_fixture, wanted", [
    (ModelFamily.SD1, "tiny_taesdxl_dir", "madebyollin/taesd"),
    (ModelFamily.SDXL, "tiny_taesd_dir", "madebyollin/taesdxl"),
])
def test_family_mismatch_is_refused(request, family, wrong_fixture, wanted):
    folder = request.getfixturevalue(wrong_fixture)
    with pytest.raises(ValueError, match=f"but the model is {family.label}; use '{wanted}' instead"):
        load_taesd(folder, family)


def test_unnamed_folder_needs_an_explicit_variant(tmp_path):
    folder = build_tiny_taesd(tmp_path / "my-decoder")
    with pytest.raises(ValueError, match="neither 'taesd' nor 'taesdxl'. Pass variant="):
        load_taesd(folder, ModelFamily.SD1)
    assert load_taesd(folder, ModelFamily.SDXL, variant="taesdxl").mixkit_variant == "taesdxl"
    with pytest.raises(ValueError, match="decodes SD 1.x, SD 2.x latents, but the model is SDXL"):
        load_taesd(folder, ModelFamily.SDXL, variant="taesd")


def test_other_latent_spaces_and_channel_counts_are_refused(tmp_path):
    with pytest.raises(ValueError, match="looks like 'taesd3'"):
        load_taesd("madebyollin/taesd3", ModelFamily.SD1)
    folder = build_tiny_taesd(tmp_path / "taesd", latent_channels=16)
    with pytest.raises(ValueError, match="has 16 latent channels, the model's VAE 4"):
        load_taesd(folder, ModelFamily.SD1)


def test_missing_folder_and_offline_hub_id_are_clear_errors(tmp_path):
    with pytest.raises(ModelNotFoundError, match="TAESD folder .*taesd-missing.* does not exist"):
        load_taesd(tmp_path / "taesd-missing", ModelFamily.SD1)
    with pytest.raises(ModelNotFoundError, match="Could not load TAESD from hub id 'madebyollin/taesd'.*Download"):
        load_taesd("madebyollin/taesd", ModelFamily.SD1)  # tests run with HF_HUB_OFFLINE=1


def test_default_source_per_family():
    assert default_taesd_source(ModelFamily.SD2) == "madebyollin/taesd"
    assert default_taesd_source(ModelFamily.SDXL) == "madebyollin/taesdxl"


def test_previews_use_taesd_at_full_size_when_installed(pipe, tiny_taesd_dir):
    latents = torch.randn(1, 4, 8, 8)
    assert preview_images(pipe.model, latents)[0].size == (8, 8)  # cheap latent preview
    install_taesd_decode(pipe.model.vae, load_taesd(tiny_taesd_dir, ModelFamily.SD1))
    try:
        preview = preview_images(pipe.model, latents)[0]
        assert preview.size == (64, 64)
        assert np.array_equal(np.asarray(preview), np.asarray(decode_latents(pipe.model.vae, latents)[0]))
    finally:
        remove_taesd_decode(pipe.model.vae)


def test_removal_restores_an_earlier_decode_wrapper(pipe, tiny_taesd_dir):
    vae = pipe.model.vae
    install_vae_guard(vae, torch.bfloat16)
    guard = vae.__dict__["decode"]
    install_taesd_decode(vae, load_taesd(tiny_taesd_dir, ModelFamily.SD1))
    assert installed_taesd(vae) is not None and vae.__dict__["decode"] is not guard
    assert remove_taesd_decode(vae) is True
    assert vae.__dict__["decode"] is guard and installed_taesd(vae) is None
    remove_vae_guard(vae)
    assert "decode" not in vae.__dict__
    assert remove_taesd_decode(vae) is False


def decoded(vae, latents) -> list[np.ndarray]:
    return [np.asarray(image) for image in decode_latents(vae, latents)]


@pytest.mark.parametrize("first, removed_first", [("guard", "guard"), ("guard", "taesd"), ("taesd", "guard"),
                                                  ("taesd", "taesd")])
def test_taesd_and_the_nan_guard_come_off_in_any_order_each_leaving_the_other(pipe, tiny_taesd_dir, first,
                                                                              removed_first):
    vae = pipe.model.vae
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(5))
    full = decoded(vae, latents)
    taesd = load_taesd(tiny_taesd_dir, ModelFamily.SD1)
    install_taesd_decode(vae, taesd)
    tiny = decoded(vae, latents)
    remove_taesd_decode(vae)
    install = {"guard": lambda: install_vae_guard(vae, torch.bfloat16), "taesd": lambda: install_taesd_decode(vae, taesd)}
    remove = {"guard": lambda: remove_vae_guard(vae), "taesd": lambda: remove_taesd_decode(vae)}
    for name in (first, "taesd" if first == "guard" else "guard"):
        install[name]()
    try:
        assert remove[removed_first]() is True
        left = "taesd" if removed_first == "guard" else "guard"
        if left == "taesd":  # TAESD alone again: its exact decode
            assert all(np.array_equal(a, b) for a, b in zip(decoded(vae, latents), tiny))
        else:  # the guard alone again: the VAE's own decode in bf16, a few levels from fp32
            assert max(np.abs(a.astype(int) - b.astype(int)).max() for a, b in zip(decoded(vae, latents), full)) <= 8
        assert remove[left]() is True
    finally:
        remove_taesd_decode(vae)
        remove_vae_guard(vae)
    assert "decode" not in vae.__dict__
    assert all(np.array_equal(a, b) for a, b in zip(decoded(vae, latents), full))


def test_suspending_taesd_keeps_its_place_under_the_guard_and_comes_back_after_an_error(pipe, tiny_taesd_dir):
    vae = pipe.model.vae
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(5))
    full = decoded(vae, latents)
    install_taesd_decode(vae, load_taesd(tiny_taesd_dir, ModelFamily.SD1))
    install_vae_guard(vae, torch.bfloat16)
    guard = vae.__dict__["decode"]
    try:
        tiny = decoded(vae, latents)
        with pytest.raises(RuntimeError, match="calibration failed"):
            with taesd_suspended(vae):
                own = decoded(vae, latents)  # the VAE's own decoder, still under the guard's bf16
                assert vae.__dict__["decode"] is guard
                raise RuntimeError("calibration failed")
        assert max(np.abs(a.astype(int) - b.astype(int)).max() for a, b in zip(own, full)) <= 8
        assert not all(np.array_equal(a, b) for a, b in zip(own, tiny))
        assert all(np.array_equal(a, b) for a, b in zip(decoded(vae, latents), tiny))  # TAESD decodes again
        assert vae.__dict__["decode"] is guard
    finally:
        remove_vae_guard(vae)
        remove_taesd_decode(vae)
    assert "decode" not in vae.__dict__
