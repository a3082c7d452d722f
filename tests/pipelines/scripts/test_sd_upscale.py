"""SD upscale on the tiny SD 1.x model: tiles, A1111's seeds per batch and upscale, the blended join, infotext and
refusals before any work (pipelines/scripts/sd_upscale.py)."""

import numpy as np
import pytest
from PIL import Image

from pipelines.control import GenerationControl
from pipelines.img2img import Img2ImgParams, ImageToImage
from pipelines.infotext import parse_infotext
from pipelines.scripts import find_script, sd_upscale
from pipelines.tile_grid import combine_grid, split_grid
from pipelines.upscale import upscale_image

TINY = dict(prompt="a red cat", width=64, height=64, steps=2, seed=10, sampler="Euler", denoising_strength=0.5)


@pytest.fixture(scope="module")
def i2i(sd1_pipe):
    return ImageToImage.from_pipeline(sd1_pipe)


class SpyPipe:
    """The img2img pipeline, recording each call's seed, tile count and images."""

    def __init__(self, pipe):
        self.pipe, self.calls, self.outputs = pipe, [], []

    def check_inputs(self, params):
        self.pipe.check_inputs(params)

    def __call__(self, params, **kwargs):
        result = self.pipe(params, **kwargs)
        self.calls.append((params.seed, len(params.init_images), params.width, params.height))
        self.outputs += result.images
        return result


def picture(size=(48, 48)):
    pixels = np.random.default_rng(3).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    return Image.fromarray(pixels)


def test_tiles_run_in_batches_with_a1111s_seeds_and_join_blended(i2i):
    spy = SpyPipe(i2i)
    params = Img2ImgParams(**TINY, init_images=[picture()], batch_size=2, batch_count=2)
    config = sd_upscale.sd_upscale_config(scale_factor=2, upscaler="Lanczos", overlap=32)
    result = sd_upscale.run(spy, params, config)
    # 48 px x 2 = 96 px in 64 px tiles overlapping by 32: tiles at 0 and 32 on each side, 4 tiles, 2 batches of 2.
    # Upscale n starts at seed + n; each batch takes the previous batch's first seed + 1 (A1111's p.seed).
    assert spy.calls == [(10, 2, 64, 64), (11, 2, 64, 64), (11, 2, 64, 64), (12, 2, 64, 64)]
    assert [image.size for image in result.images] == [(96, 96), (96, 96)] and result.seeds == [10, 11]
    upscaled = upscale_image(picture(), 2, upscaler="Lanczos")
    for n, image in enumerate(result.images):  # the upscale is the tiles' outputs joined as combine_grid joins
        tiles = spy.outputs[n * 4:(n + 1) * 4]
        expected = combine_grid(split_grid(upscaled, 64, 64, 32).with_images(tiles))
        assert np.array_equal(np.asarray(image), np.asarray(expected))
    read = parse_infotext(result.infotexts[1])
    assert (read["Seed"], read["Size-1"], read["Size-2"]) == ("11", "64", "64")
    assert (read["SD upscale overlap"], read["SD upscale upscaler"]) == ("32", "Lanczos")
    assert params.seed == 10 and len(params.init_images) == 1  # the caller's params are left as they were


def test_the_last_short_batch_takes_the_tiles_left(i2i):
    spy = SpyPipe(i2i)
    params = Img2ImgParams(**{**TINY, "steps": 1}, init_images=[picture()], batch_size=3)
    sd_upscale.run(spy, params, sd_upscale.sd_upscale_config(2, "Nearest", 32))
    assert [(seed, count) for seed, count, _, _ in spy.calls] == [(10, 3), (11, 1)]


def test_none_keeps_the_picture_size_and_progress_counts_every_batch(i2i):
    seen = []
    params = Img2ImgParams(**{**TINY, "steps": 1}, init_images=[picture((96, 64))])
    result = sd_upscale.run(i2i, params, sd_upscale.sd_upscale_config(3, "None", 32),
                            callback=lambda state: seen.append((state.batch_index, state.batch_count)))
    assert result.images[0].size == (96, 64)  # A1111's "None": no upscale, whatever the factor
    assert seen == [(0, 2), (1, 2)]


def test_interrupt_keeps_the_upscale_with_unprocessed_tiles_as_upscaled(i2i):
    control = GenerationControl()
    params = Img2ImgParams(**{**TINY, "steps": 1}, init_images=[picture()], batch_count=2)
    result = sd_upscale.run(i2i, params, sd_upscale.sd_upscale_config(2, "Lanczos", 32),
                            callback=lambda state: control.interrupt(), control=control)
    assert result.interrupted and len(result.images) == 1
    upscaled = np.asarray(upscale_image(picture(), 2, upscaler="Lanczos"))
    assert np.array_equal(np.asarray(result.images[0])[64:, 64:], upscaled[64:, 64:])  # tile 4 never ran


def test_script_args_are_a1111s_positions_with_the_upscaler_by_index():
    names = ["None", "Lanczos", "Nearest", "ESRGAN_4x"]
    script = find_script("sd upscale", "img2img")
    config = script.parse(["<p>note</p>", 16, 2, 1.5], "img2img", upscaler_names=names)
    assert config == sd_upscale.SdUpscaleConfig(overlap=16, upscaler="Nearest", scale_factor=1.5)
    assert script.parse([None, None, "lanczos"], "img2img", upscaler_names=names).upscaler == "Lanczos"
    assert script.parse([], "img2img", upscaler_names=names) == sd_upscale.SdUpscaleConfig(64, "None", 2.0)
    info = [arg.info() for arg in script.args("img2img", upscaler_names=names)]
    assert [arg["label"] for arg in info] == [None, "Tile overlap", "Upscaler", "Scale Factor"]
    assert info[2]["choices"] == names and (info[1]["value"], info[3]["value"]) == (64, 2.0)


@pytest.mark.parametrize("args, message", [
    ([None, 64, 9], r"out of range: 0\.\.3"),
    ([None, 64, "Bogus"], r"upscalers \['None', 'Lanczos', 'Nearest', 'Bicubic'\]"),
    ([None, 64, 1, 0.5], r"Scale Factor\) must be a number in \[1.0, 8.0\]"),
    ([None, -16, 1, 2], r"Tile overlap\) must be a whole number"),
    ([None, 64, 1, 2, 5], "at most 4 values"),
])
def test_bad_script_args_name_the_slot(args, message):
    with pytest.raises(ValueError, match=message):
        sd_upscale.parse_script_args(args, "img2img", upscaler_names=["None", "Lanczos", "Nearest", "Bicubic"])


def test_txt2img_is_refused():
    with pytest.raises(ValueError, match="runs for img2img, not txt2img"):
        find_script("SD upscale", "txt2img")


@pytest.mark.parametrize("fields, config, message", [
    ({}, (2, "Lanczos", 64), "Tile overlap 64 must be at least 0 and less than the tile size 64x64"),
    ({"init_images": [picture((600, 600))]}, (8, "Lanczos", 32), "over the budget"),
    ({"init_images": [picture((16, 16))]}, (2, "Lanczos", 8), r"smaller than one tile \(64x64\)"),
    ({"mask": Image.new("L", (48, 48), 255)}, (2, "Lanczos", 8), "without a mask"),
    ({"init_images": [picture(), picture()]}, (2, "Lanczos", 8), "one init image"),
])
def test_refused_before_any_work(i2i, fields, config, message):
    spy = SpyPipe(i2i)
    params = Img2ImgParams(**{**TINY, "init_images": [picture()], **fields}, batch_size=2)
    with pytest.raises(ValueError, match=message):
        sd_upscale.run(spy, params, sd_upscale.sd_upscale_config(*config))
    assert spy.calls == []


def test_an_upscaler_unregistered_since_parsing_is_named():
    params = Img2ImgParams(**TINY, init_images=[picture()])
    config = sd_upscale.SdUpscaleConfig(32, "Gone_4x", 2.0)
    with pytest.raises(ValueError, match="Unknown upscaler .Gone_4x.. Valid names: .Lanczos."):
        sd_upscale.check_sd_upscale(params, config)


@pytest.mark.parametrize("text, expected", [
    ("a cat\nSteps: 1, Seed: 2, RNG: CPU, Lora hashes: \"x: 1\", Version: v", "Steps: 1, Seed: 2, RNG: CPU, "
     "SD upscale overlap: 32, SD upscale upscaler: ESRGAN_4x, Lora hashes: \"x: 1\", Version: v"),
    ("a cat\nSteps: 1, Seed: 2, Version: v", "Steps: 1, Seed: 2, SD upscale overlap: 32, "
     "SD upscale upscaler: ESRGAN_4x, Version: v"),
    ("a cat\nSteps: 1, Seed: 2, CFG scale: 7", "Steps: 1, Seed: 2, CFG scale: 7, SD upscale overlap: 32, "
     "SD upscale upscaler: ESRGAN_4x"),
])
def test_script_keys_go_first_among_the_extra_params_as_a1111_writes_them(text, expected):
    config = sd_upscale.SdUpscaleConfig(32, "ESRGAN_4x", 2.0)
    assert sd_upscale.script_infotext(text, config) == "a cat\n" + expected


def test_skip_ends_the_current_tile_batch_and_the_upscale_goes_on(i2i):
    control, spy, steps = GenerationControl(), SpyPipe(i2i), []

    def skip_in_the_first_batch(state):
        steps.append((state.batch_index, state.step))
        if state.batch_index == 0 and state.step == 1:
            control.skip()
    params = Img2ImgParams(**{**TINY, "steps": 4, "denoising_strength": 1.0}, init_images=[picture()], batch_size=2)
    result = sd_upscale.run(spy, params, sd_upscale.sd_upscale_config(2, "Lanczos", 32),
                            callback=skip_in_the_first_batch, control=control)
    assert not result.interrupted and len(result.images) == 1 and len(spy.calls) == 2
    assert [step for index, step in steps if index == 0] == [1]  # the first batch ended after its first step
    assert [step for index, step in steps if index == 1] == [1, 2, 3, 4]


def test_a_model_upscaler_by_its_listed_index_upscales_the_picture_first(i2i, tmp_path, registered):
    from mixkit.testing.tiny_upscalers import TINY_RRDB, save_upscaler, tiny_upscaler
    from pipelines.model_upscale_listing import listed_upscaler_names

    save_upscaler(tiny_upscaler(TINY_RRDB), tmp_path / "ESRGAN_4x.pth", "esrgan")
    registered([tmp_path], tile_size=0)
    names = listed_upscaler_names()
    config = sd_upscale.parse_script_args(["", 32, names.index("ESRGAN_4x"), 2], "img2img", upscaler_names=names)
    assert config.upscaler == "ESRGAN_4x"
    spy = SpyPipe(i2i)
    params = Img2ImgParams(**{**TINY, "steps": 1}, init_images=[picture()])
    result = sd_upscale.run(spy, params, config)
    assert result.images[0].size == (96, 96) and len(spy.calls) == 4  # x4 network, resized to 48 * 2 as A1111's
    upscaled = upscale_image(picture(), 2, upscaler="ESRGAN_4x")
    expected = combine_grid(split_grid(upscaled, 64, 64, 32).with_images(spy.outputs))
    assert np.array_equal(np.asarray(result.images[0]), np.asarray(expected))
    assert parse_infotext(result.infotexts[0])["SD upscale upscaler"] == "ESRGAN_4x"
