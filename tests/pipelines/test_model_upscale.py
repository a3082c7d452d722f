"""Model upscaler files as named pixel upscalers: A1111's passes and final resize, tiling, limits, registration."""

import numpy as np
import pytest
import torch
from PIL import Image

from mixkit.models.upscalers.rrdbnet import RRDBNetConfig
from mixkit.models.upscalers.srvgg import SRVGGConfig
from mixkit.testing.tiny_upscalers import TINY_RRDB, TINY_SRVGG, save_upscaler, tiny_upscaler
from pipelines.model_upscale import LOADED, ModelUpscaler, check_tiling, register_model_upscalers
from pipelines.upscale import UPSCALERS, UpscaleLimits, upscale_image


def random_image(width, height, seed=0):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8))


def run_network(model, image):
    x = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255).permute(2, 0, 1)[None]
    with torch.no_grad():
        out = model(x)[0].clamp(0, 1).permute(1, 2, 0) * 255
    return Image.fromarray(out.round().to(torch.uint8).numpy())


def test_old_and_basicsr_files_of_the_same_weights_upscale_identically(tmp_path, registered):
    model = tiny_upscaler(TINY_RRDB, seed=5)
    (tmp_path / "ESRGAN").mkdir(), (tmp_path / "RealESRGAN").mkdir()
    save_upscaler(model, tmp_path / "ESRGAN" / "4x-UltraSharp.pth", "esrgan")
    save_upscaler(model, tmp_path / "RealESRGAN" / "RealESRGAN_x4plus.pth", "basicsr", wrapper="params_ema")
    scan = registered([tmp_path / "ESRGAN", tmp_path / "RealESRGAN"])
    # A1111 shows Real-ESRGAN's release files by its own names, the others by their stems
    assert scan.names == ["4x-UltraSharp", "R-ESRGAN 4x+"] and scan.refused == {}
    image = random_image(24, 16)
    old = upscale_image(image, 4, upscaler="4x-UltraSharp")
    new = upscale_image(image, 4, upscaler="R-ESRGAN 4x+")
    assert old.size == (96, 64) and np.array_equal(np.asarray(old), np.asarray(new))
    assert np.array_equal(np.asarray(old), np.asarray(run_network(model, image)))  # native scale: no resize


@pytest.mark.parametrize("config, scale, passes", [
    (TINY_RRDB, 2, 1),  # x4 model, x2 target: one pass, then Lanczos down to 48x32
    (RRDBNetConfig(in_channels=12, features=8, growth=4, blocks=1), 4, 2),  # x2 model run twice for x4
    (RRDBNetConfig(in_channels=48, features=8, growth=4, blocks=1), 2, 1),  # x1 model: once, then Lanczos up
    (TINY_SRVGG, 3, 1),
    (TINY_RRDB, 1, 1),  # scale 1: A1111 still runs the network once, then resizes back
    (TINY_RRDB, 0.5, 0),  # below 1: a plain Lanczos resize
    (TINY_RRDB, 1.1, 0),  # just above 1: 26x17 floors to 24x16, which the image covers, so no network (A1111's loop)
    (TINY_RRDB, 1.5, 1),  # 36x24 floors to 32x24: one pass to 96x64, then Lanczos down
])
def test_other_scales_run_the_network_as_a1111_then_resize_with_lanczos(tmp_path, registered, config, scale, passes):
    model = tiny_upscaler(config, seed=2)
    save_upscaler(model, tmp_path / "m.pth", "srvgg" if isinstance(config, SRVGGConfig) else "basicsr")
    registered(tmp_path, tile_size=0)
    image = random_image(24, 16)
    expected = image
    for _ in range(passes):
        expected = run_network(model, expected)
    expected = expected.resize((int(24 * scale) // 8 * 8, int(16 * scale) // 8 * 8), Image.Resampling.LANCZOS)
    assert np.array_equal(np.asarray(upscale_image(image, scale, upscaler="m")), np.asarray(expected))


@pytest.mark.parametrize("size, passes", [
    ((24, 16), 0),  # the image's own size (hires fix at scale 1): A1111's resize_image asks no upscaler
    ((25, 16), 0),  # scale 25/24: its floored size 24x16 is covered already, so only the Lanczos resize
    ((34, 16), 1),  # scale 34/24: floored 32x16 is not covered, one pass, then Lanczos to 34x16
])
def test_an_upscale_to_a_size_runs_the_network_as_a1111s_resize_image(tmp_path, registered, size, passes):
    model = tiny_upscaler(TINY_RRDB, seed=2)
    save_upscaler(model, tmp_path / "m.pth", "basicsr")
    registered(tmp_path, tile_size=0)
    image = random_image(24, 16)
    expected = run_network(model, image) if passes else image
    if expected.size != size:
        expected = expected.resize(size, Image.Resampling.LANCZOS)
    result = upscale_image(image, width=size[0], height=size[1], upscaler="m")
    assert np.array_equal(np.asarray(result), np.asarray(expected))


def test_tiled_and_untiled_runs_agree_away_from_the_seams(tmp_path):
    model = tiny_upscaler(TINY_SRVGG, seed=7)  # 3 convolutions: each output pixel sees 3 input pixels each way
    path = save_upscaler(model, tmp_path / "realesr-general-x4v3.pth", "srvgg")
    image = random_image(48, 40, seed=3)
    whole = np.asarray(ModelUpscaler(path, tile_size=0).upscale(image, 192, 160)).astype(int)
    tiled = np.asarray(ModelUpscaler(path, tile_size=24, tile_overlap=8).upscale(image, 192, 160)).astype(int)
    # tiles start at 0, 12, 24 (x) and 0, 8, 16 (y); within 3 input pixels of a tile's inner edge the tile lacks context
    near_seam = np.zeros((40, 48), bool)
    for edge in (12, 24, 36):
        near_seam[:, edge - 3:edge + 3] = True
    for edge in (8, 16, 24, 32):
        near_seam[edge - 3:edge + 3, :] = True
    near_seam = near_seam.repeat(4, 0).repeat(4, 1)
    assert np.abs(whole - tiled)[~near_seam].max() <= 1  # float rounding of a convolution on a different crop
    assert np.abs(whole - tiled)[near_seam].max() > 1  # the comparison would see a seam


def test_an_image_too_large_is_refused_before_the_network_loads(tmp_path, monkeypatch):
    path = save_upscaler(tiny_upscaler(TINY_RRDB), tmp_path / "big.pth", "esrgan")
    upscaler = ModelUpscaler(path, limits=UpscaleLimits(max_pixels=100 * 100))
    monkeypatch.setattr(LOADED, "get", lambda *a: pytest.fail("the network was loaded"))
    # x2 target (80x80) is within the budget, the x4 pass (160x160) on the way is not
    with pytest.raises(ValueError, match=r"'big' \(x4\) would make a 160x160 image on the way to 80x80"):
        upscaler.upscale(random_image(40, 40), 80, 80)


def test_the_callers_budget_reaches_the_networks_passes(tmp_path):
    # hires fix passes upscale_image a budget larger than an upscaler's own: its x4 pass on the way must use it
    from pipelines.upscale import check_upscale

    upscaler = ModelUpscaler(save_upscaler(tiny_upscaler(TINY_RRDB), tmp_path / "big.pth", "esrgan"),
                             limits=UpscaleLimits(max_pixels=100 * 100))
    larger, smaller = UpscaleLimits(max_pixels=160 * 160), UpscaleLimits(max_pixels=159 * 160)
    image = random_image(40, 40)
    assert upscale_image(image, width=80, height=80, upscaler=upscaler, limits=larger).size == (80, 80)
    assert upscale_image(image, 2, upscaler=upscaler, limits=larger).size == (80, 80)
    assert check_upscale(40, 40, 2, larger, upscaler) == (80, 80)
    for call in (lambda: upscale_image(image, width=80, height=80, upscaler=upscaler, limits=smaller),
                 lambda: check_upscale(40, 40, 2, smaller, upscaler)):
        with pytest.raises(ValueError, match=r"would make a 160x160 image on the way to 80x80, over the budget of "
                                             r"25440 pixels"):
            call()
    with pytest.raises(ValueError, match="over the budget of 10000"):  # no budget given: the upscaler's own
        upscale_image(image, width=80, height=80, upscaler=upscaler)
    LOADED.clear()


def test_one_network_stays_loaded(tmp_path):
    a = ModelUpscaler(save_upscaler(tiny_upscaler(TINY_RRDB), tmp_path / "a.pth", "esrgan"), tile_size=0)
    b = ModelUpscaler(save_upscaler(tiny_upscaler(TINY_SRVGG), tmp_path / "b.pth", "srvgg"), tile_size=0)
    a.upscale(random_image(8, 8), 32, 32)
    first = LOADED.model
    a.upscale(random_image(8, 8), 32, 32)
    assert LOADED.model is first
    b.upscale(random_image(8, 8), 32, 32)
    assert LOADED.model is not first and LOADED.key[0] == str(b.path.resolve())
    LOADED.clear()


def test_scan_refuses_unknown_files_and_names_taken_by_resamplers(tmp_path, registered):
    save_upscaler(tiny_upscaler(TINY_RRDB), tmp_path / "Lanczos.pth", "esrgan")
    torch.save({"weight": torch.zeros(2)}, tmp_path / "notes.pth")
    (tmp_path / "sub").mkdir()
    save_upscaler(tiny_upscaler(TINY_SRVGG), tmp_path / "sub" / "animevideov3.safetensors", "srvgg")
    scan = registered(tmp_path)
    assert scan.names == ["animevideov3"]
    assert "already the upscaler" in scan.refused[str(tmp_path / "Lanczos.pth")]
    assert "not a known upscaler layout" in scan.refused[str(tmp_path / "notes.pth")]
    assert UPSCALERS.get("Lanczos") is not None and not isinstance(UPSCALERS.get("Lanczos"), ModelUpscaler)


def test_a_missing_folder_and_bad_tiling_are_refused(tmp_path):
    with pytest.raises(NotADirectoryError, match="nowhere"):
        register_model_upscalers(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="tile_overlap must be an integer in \\[0, 95\\] for tile_size 192"):
        check_tiling(192, 96)
    with pytest.raises(ValueError, match="tile_size must be 0"):
        check_tiling(4, 0)


def test_check_upscale_checks_a_named_model_upscalers_passes(tmp_path, registered):
    from pipelines.upscale import check_upscale

    save_upscaler(tiny_upscaler(TINY_RRDB), tmp_path / "4x.pth", "esrgan")
    registered(tmp_path)
    assert check_upscale(1100, 1100, 2, UpscaleLimits()) == (2200, 2200)  # a resampler goes straight to 2200x2200
    with pytest.raises(ValueError, match="would make a 4400x4400 image on the way to 2200x2200"):
        check_upscale(1100, 1100, 2, UpscaleLimits(), "4x")
