"""Upscaling: sizes, tiled equals untiled for resamplers, the pixel budget, and the tiny SD x4 upscaler."""

import numpy as np
import pytest
from PIL import Image, ImageFilter

from mixkit.errors import UnknownNameError
from pipelines.upscale import SDx4Upscaler, UpscaleLimits, tile_starts, tiled_upscale, upscale_image


@pytest.fixture(scope="module")
def picture():
    noise = np.random.default_rng(0).integers(0, 255, (90, 120, 3), dtype=np.uint8)
    return Image.fromarray(noise).filter(ImageFilter.GaussianBlur(2))


# A1111's `Upscaler.upscale`: dest = int((side * scale) // 8 * 8); its Lanczos/Nearest `do_upscale` resizes to
# int(side * scale) first, and a result of another size is then Lanczos-resized to dest.
@pytest.mark.parametrize("upscaler, method", [("Lanczos", Image.Resampling.LANCZOS), ("Nearest", Image.Resampling.NEAREST)])
@pytest.mark.parametrize("scale, native, size", [(2, (240, 180), (240, 176)), (1.5, (180, 135), (176, 128)),
                                                 (0.5, (60, 45), (56, 40)), (3, (360, 270), (360, 264)),
                                                 (4, (480, 360), (480, 360))])
def test_sizes_and_pixels_are_a1111s_floored_to_multiples_of_8(picture, upscaler, method, scale, native, size):
    out = upscale_image(picture, scale, upscaler=upscaler)
    assert out.size == size
    expected = picture.resize(native, method)
    if native != size:
        expected = expected.resize(size, Image.Resampling.LANCZOS)
    assert np.array_equal(np.asarray(out), np.asarray(expected))


def test_the_report_sizes_of_a_100x75_image():
    source = Image.new("RGB", (100, 75), (9, 99, 199))
    assert upscale_image(source, 2).size == (200, 144)
    assert upscale_image(source, 1.5).size == (144, 112)


def test_explicit_target_size(picture):
    assert upscale_image(picture, width=200, height=100, upscaler="Nearest").size == (200, 100)


@pytest.mark.parametrize("scale", [2, 1.5, 3])
def test_tiled_lanczos_equals_untiled_within_one_level(picture, scale):
    full = np.asarray(upscale_image(picture, scale)).astype(int)
    tiled = np.asarray(upscale_image(picture, scale, tile_size=32, tile_overlap=8)).astype(int)
    assert tiled.shape == full.shape
    assert np.abs(full - tiled).max() <= 1
    assert np.abs(full - tiled).mean() < 0.01


def test_tiled_nearest_is_exact_so_blending_weights_normalise(picture):
    full = np.asarray(upscale_image(picture, 2, upscaler="Nearest"))
    tiled = np.asarray(upscale_image(picture, 2, upscaler="Nearest", tile_size=24, tile_overlap=6))
    assert np.array_equal(full, tiled)


@pytest.mark.parametrize("length, tile, overlap", [(120, 64, 16), (90, 64, 16), (64, 64, 8), (1000, 128, 16), (129, 128, 0)])
def test_tile_starts_cover_the_axis_with_at_least_the_overlap(length, tile, overlap):
    starts = tile_starts(length, tile, overlap)
    assert starts[0] == 0 and starts[-1] + tile >= length and starts[-1] + tile <= max(length, tile)
    assert all(b - a <= tile - overlap for a, b in zip(starts, starts[1:]))
    assert tile_starts(120, 64, 16) == [0, 28, 56]


def test_every_tile_is_upscaled_at_the_tile_size(picture):
    sizes = []

    def record(tile, width, height):
        sizes.append((tile.size, (width, height)))
        return tile.resize((width, height))

    tiled_upscale(picture, 240, 180, record, tile=64, overlap=16)
    assert sizes == [((64, 64), (128, 128))] * 6  # x at 0, 28, 56; y at 0, 26


def test_pixel_budget_and_bad_scales_are_refused(picture):
    limits = UpscaleLimits(max_pixels=200 * 200)
    with pytest.raises(ValueError, match="over the budget of 40000"):
        upscale_image(picture, 2, limits=limits)
    for scale in (0, -1, float("nan"), 9, True):
        with pytest.raises(ValueError, match="Upscale factor"):
            upscale_image(picture, scale)
    with pytest.raises(ValueError, match="either scale or width"):
        upscale_image(picture, 2, width=10, height=10)
    with pytest.raises(UnknownNameError, match="Lanczos"):
        upscale_image(picture, 2, upscaler="lanczoz")
    with pytest.raises(ValueError, match=r"tile_overlap must be an integer in \[0, 7\] for tile_size 16, got 8"):
        upscale_image(picture, 2, tile_size=16, tile_overlap=8)
    # Without tile_overlap a small tile gets an overlap that fits it (the default 32 would not).
    assert upscale_image(picture, 2, tile_size=16).size == (240, 176)


@pytest.fixture(scope="module")
def x4(tmp_path_factory):
    from mixkit.testing.tiny_controlnet import build_tiny_x4_upscaler

    folder = build_tiny_x4_upscaler(tmp_path_factory.mktemp("tiny-x4"), seed=0)
    return SDx4Upscaler.from_pretrained(folder, steps=2, tile_size=16, tile_overlap=4, seed=1)


def test_sd_x4_upscaler_single_tile_and_tiled(x4):
    small = Image.fromarray(np.random.default_rng(1).integers(0, 255, (16, 16, 3), dtype=np.uint8))
    first, again = upscale_image(small, 4, upscaler=x4), upscale_image(small, 4, upscaler=x4)
    assert first.size == (64, 64)
    assert np.array_equal(np.asarray(first), np.asarray(again))
    wide = Image.fromarray(np.random.default_rng(2).integers(0, 255, (16, 24, 3), dtype=np.uint8))
    tiled = upscale_image(wide, 4, upscaler=x4)  # 24 > tile 16: two tiles blended
    assert tiled.size == (96, 64)
    assert np.asarray(tiled).std() > 1


def test_sd_x4_checks_budget_and_noise_level_before_running(x4, monkeypatch):
    monkeypatch.setattr(x4, "_upscale_tile", lambda *a: pytest.fail("the model ran"))
    huge = Image.new("RGB", (1100, 1100))
    with pytest.raises(ValueError, match="over the budget"):
        x4.upscale(huge, 4400, 4400)
    with pytest.raises(ValueError, match="noise_level"):
        SDx4Upscaler(x4.pipeline, noise_level=1000)


def test_sd_x4_sees_every_pixel_of_sides_that_are_no_multiple_of_its_vae_factor(x4):
    """diffusers floors the input to a multiple of 4: a 7x6 image was squeezed into 4x4 and a 1x1 or 3x5 one failed
    with "height and width must be > 0". Edge-padded to 8x8, upscaled, and the padding's output cut off instead."""
    import torch

    assert x4.pipeline.vae_scale_factor == 4
    odd = Image.fromarray(np.random.default_rng(3).integers(0, 255, (6, 7, 3), dtype=np.uint8))
    padded = Image.fromarray(np.pad(np.asarray(odd), ((0, 2), (0, 1), (0, 0)), mode="edge"))
    by_hand = x4.pipeline(prompt="", image=padded, num_inference_steps=2, guidance_scale=9.0, noise_level=20,
                          generator=torch.Generator("cpu").manual_seed(1)).images[0]
    assert by_hand.size == (32, 32)
    assert np.array_equal(np.asarray(x4.upscale(odd, 28, 24)), np.asarray(by_hand.crop((0, 0, 28, 24))))
    for size in ((1, 1), (3, 5)):
        assert x4.upscale(Image.new("RGB", size, (200, 30, 30)), 4 * size[0], 4 * size[1]).size == (4 * size[0], 4 * size[1])
