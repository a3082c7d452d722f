"""SwinIR, DAT, HAT and ScuNET files as named pixel upscalers: A1111's names, the native-scale run, tiling, and the listing."""

from dataclasses import replace

import numpy as np
from PIL import Image

import pytest

from mixkit.testing.tiny_upscalers import TINY_DAT, TINY_HAT, TINY_SCUNET, TINY_SWINIR, save_upscaler, tiny_upscaler
from pipelines.model_upscale import LOADED, ModelUpscaler
from pipelines.model_upscale_listing import upscaler_listing
from pipelines.upscale import UPSCALERS, upscale_image
from tests.pipelines.test_model_upscale import random_image, run_network


def test_swinir_files_register_under_a1111s_names_and_upscale_at_their_native_scale(tmp_path, registered):
    real = tiny_upscaler(replace(TINY_SWINIR, upsampler="nearest+conv", upscale=4, resi_connection="3conv"), seed=1)
    classical = tiny_upscaler(TINY_SWINIR, seed=2)  # pixelshuffle x2
    save_upscaler(real, tmp_path / "SwinIR_4x.pth", "swinir", wrapper="params_ema")
    save_upscaler(classical, tmp_path / "001_classicalSR_DF2K_s64w8_SwinIR-M_x2.safetensors", "swinir")
    scan = registered(tmp_path, tile_size=0)
    assert scan.refused == {} and scan.names == ["001_classicalSR_DF2K_s64w8_SwinIR-M_x2", "SwinIR_4x"]
    image = random_image(13, 10)  # not whole windows of 4: padded inside the network, cropped back
    out = UPSCALERS.get("SwinIR 4x").upscale(image, 52, 40)
    assert out.size == (52, 40) and np.array_equal(np.asarray(out), np.asarray(run_network(real, image)))
    # x4 from an x2 model: two passes, as A1111 runs ESRGAN files
    image = random_image(16, 8)
    twice = run_network(classical, run_network(classical, image))
    assert np.array_equal(np.asarray(upscale_image(image, 4, upscaler="001_classicalSR_DF2K_s64w8_SwinIR-M_x2")),
                          np.asarray(twice))
    listing = upscaler_listing("SwinIR 4x")
    assert (listing["model_name"], listing["scale"], listing["model_path"]) == ("SwinIR", 4, str(tmp_path / "SwinIR_4x.pth"))
    # listed and written in infotexts by its stem, as A1111 once the file is downloaded; "SwinIR 4x" still finds it
    assert repr(UPSCALERS.get("SwinIR 4x")).startswith("ModelUpscaler('SwinIR_4x', SwinIR x4")


def test_dat_files_register_under_a1111s_names_and_upscale_at_their_native_scale(tmp_path, registered):
    dat = tiny_upscaler(replace(TINY_DAT, upscale=3), seed=1)
    save_upscaler(dat, tmp_path / "DAT_x3.pth", "dat", wrapper="params")
    save_upscaler(tiny_upscaler(TINY_DAT, seed=2), tmp_path / "4xNomos8kDAT.safetensors", "dat")
    scan = registered(tmp_path, tile_size=0)
    assert scan.refused == {} and scan.names == ["4xNomos8kDAT", "DAT x3"]
    image = random_image(13, 10)
    out = UPSCALERS.get("DAT x3").upscale(image, 39, 30)
    assert out.size == (39, 30) and np.array_equal(np.asarray(out), np.asarray(run_network(dat, image)))
    listing = upscaler_listing("DAT x3")
    assert (listing["model_name"], listing["scale"]) == ("DAT", 3)


@pytest.mark.parametrize("layout, config", [("swinir", TINY_SWINIR), ("dat", TINY_DAT), ("hat", TINY_HAT)])
def test_tiled_and_untiled_runs_agree_within_a_tolerance(tmp_path, layout, config):
    # attention windows (and SwinIR's mirror padding, HAT's reflect padding) differ per tile, so tiles agree only
    # approximately: measured on these seeds, the mean difference is about 1 of 255 and 99% of the values within 6
    path = save_upscaler(tiny_upscaler(config, seed=0), tmp_path / "x2.pth", layout)
    image = random_image(45, 37, seed=0)
    whole = np.asarray(ModelUpscaler(path, tile_size=0).upscale(image, 90, 74)).astype(int)
    tiled = np.asarray(ModelUpscaler(path, tile_size=22, tile_overlap=6).upscale(image, 90, 74)).astype(int)
    difference = np.abs(whole - tiled)
    assert difference.mean() < 1.5 and np.percentile(difference, 99) <= 8
    # what a misplaced tile would look like: the network's output differs from a plain resize by far more
    lanczos = np.asarray(image.resize((90, 74), Image.Resampling.LANCZOS)).astype(int)
    assert np.abs(whole - lanczos).mean() > 20
    LOADED.clear()


def test_hat_files_register_by_stem_tile_with_the_esrgan_pair_and_upscale_at_their_native_scale(tmp_path, registered):
    hat = tiny_upscaler(replace(TINY_HAT, upscale=4), seed=1)
    save_upscaler(hat, tmp_path / "4xNomos8kHAT-L.pth", "hat", wrapper="params_ema")
    save_upscaler(tiny_upscaler(TINY_HAT, seed=2), tmp_path / "HAT-S_SRx2.safetensors", "hat")
    scan = registered(tmp_path, tiling={"ESRGAN": (0, 0), "SWIN": (32, 4), "DAT": (48, 2), "SCUNET": (64, 8)})
    assert scan.refused == {} and scan.names == ["4xNomos8kHAT-L", "HAT-S_SRx2"]
    entry = UPSCALERS.get("4xNomos8kHAT-L")
    assert (entry.architecture, entry.scale, entry.tile_size, entry.tile_overlap) == ("HAT", 4, 0, 0)
    image = random_image(13, 10)
    out = entry.upscale(image, 52, 40)
    assert out.size == (52, 40) and np.array_equal(np.asarray(out), np.asarray(run_network(hat, image)))
    listing = upscaler_listing("4xNomos8kHAT-L")
    assert (listing["model_name"], listing["scale"]) == ("HAT", 4)


def test_scunet_release_files_register_under_a1111s_names_and_denoise_once_then_resize(tmp_path, registered):
    gan, psnr = tiny_upscaler(TINY_SCUNET, seed=1), tiny_upscaler(TINY_SCUNET, seed=2)
    save_upscaler(gan, tmp_path / "scunet_color_real_gan.pth", "scunet")
    save_upscaler(psnr, tmp_path / "scunet_color_real_psnr.safetensors", "scunet")
    scan = registered(tmp_path, tiling={"SCUNET": (0, 0)})
    assert scan.refused == {} and scan.names == ["ScuNET GAN", "ScuNET PSNR"]
    assert UPSCALERS.resolve("scunet_color_real_psnr") == "ScuNET PSNR"  # the stem A1111 lists the file by
    image = random_image(16, 8)
    denoised = run_network(gan, image)
    # x1: A1111 runs the network once (at any scale), then Lanczos-resizes to the target
    assert np.array_equal(np.asarray(upscale_image(image, 1, upscaler="ScuNET GAN")), np.asarray(denoised))
    twice_as_large = denoised.resize((32, 16), Image.Resampling.LANCZOS)
    assert np.array_equal(np.asarray(UPSCALERS.get("ScuNET GAN").upscale(image, 32, 16)), np.asarray(twice_as_large))
    listing = upscaler_listing("ScuNET PSNR")
    assert (listing["model_name"], listing["scale"], listing["model_path"]) == \
        ("ScuNET", 1, str(tmp_path / "scunet_color_real_psnr.safetensors"))


def test_a1111s_own_scunet_download_keeps_its_stem_and_answers_to_scunet_gan(tmp_path, registered):
    # A1111 saves the "ScuNET GAN" download as models/ScuNET/ScuNET.pth and then lists it by that stem
    save_upscaler(tiny_upscaler(TINY_SCUNET, seed=1), tmp_path / "ScuNET.pth", "scunet")
    scan = registered(tmp_path)
    assert scan.names == ["ScuNET"] and UPSCALERS.resolve("ScuNET GAN") == "ScuNET"
    assert (UPSCALERS.get("ScuNET").tile_size, UPSCALERS.get("ScuNET").tile_overlap) == (192, 8)  # the API default


def test_scunet_tiles_agree_with_the_whole_image_within_a_tolerance(tmp_path):
    # a UNet whose deepest windows span 32 pixels (4-pixel windows after three halvings) sees across a whole tile, and
    # every tile is reflect-padded to whole deep windows, so tiles agree only approximately; measured on this seed
    # (random weights, which amplify it) the mean difference is 2.5 of 255 and 99% of the values within 22
    path = save_upscaler(tiny_upscaler(TINY_SCUNET, seed=0), tmp_path / "ScuNET.pth", "scunet")
    image = random_image(70, 45, seed=0)
    whole = np.asarray(ModelUpscaler(path, tile_size=0).upscale(image, 70, 45, scale=1)).astype(int)
    tiled = np.asarray(ModelUpscaler(path, tile_size=48, tile_overlap=16).upscale(image, 70, 45, scale=1)).astype(int)
    one_tile = np.asarray(ModelUpscaler(path, tile_size=96, tile_overlap=8).upscale(image, 70, 45, scale=1)).astype(int)
    assert np.array_equal(one_tile, whole)  # a tile larger than the image: one piece, the whole-image result
    difference = np.abs(whole - tiled)
    assert difference.mean() < 4 and np.percentile(difference, 99) <= 24
    # what a misplaced tile would look like: the network's output differs from its input by far more
    assert np.abs(whole - np.asarray(image).astype(int)).mean() > 50
    LOADED.clear()
