"""SwinIR and DAT files as named pixel upscalers: A1111's names, the native-scale run, tiling, and the listing."""

from dataclasses import replace

import numpy as np
from PIL import Image

import pytest

from mixkit.testing.tiny_upscalers import TINY_DAT, TINY_SWINIR, save_upscaler, tiny_upscaler
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


@pytest.mark.parametrize("layout, config", [("swinir", TINY_SWINIR), ("dat", TINY_DAT)])
def test_tiled_and_untiled_runs_agree_within_a_tolerance(tmp_path, layout, config):
    # attention windows (and SwinIR's mirror padding) differ per tile, so tiles agree only approximately: measured
    # on these seeds, the mean difference is about 1 of 255 and 99% of the values within 6
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
