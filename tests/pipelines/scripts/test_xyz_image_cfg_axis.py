"""The X/Y/Z "Image CFG Scale" axis: each cell runs an instruct-pix2pix checkpoint at its Image CFG scale (as A1111's
`apply_field("image_cfg_scale")`), and the axis is refused before any cell on a model that ignores the value."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from pipelines.img2img import Img2ImgParams, ImageToImage
from pipelines.infotext import parse_infotext
from pipelines.params import Txt2ImgParams
from pipelines.scripts import xyz_plot

TINY = dict(prompt="make it red", width=64, height=64, steps=2, seed=5, sampler="Euler")


@pytest.fixture(scope="module")
def photo():
    return Image.fromarray(np.random.default_rng(2).integers(0, 256, (64, 64, 3), dtype=np.uint8))


def test_each_cell_runs_and_records_its_image_cfg_scale(tiny_ip2p_dir, photo):
    pipe = ImageToImage.from_pretrained(tiny_ip2p_dir)
    config = xyz_plot.xyz_config(("Image CFG Scale", "1, 2.5"), kind="img2img", include_lone_images=True)
    result = xyz_plot.run(pipe, Img2ImgParams(init_images=[photo], **TINY), config, kind="img2img")
    cells = result.images[1:]
    assert [parse_infotext(text)["Image CFG scale"] for text in result.infotexts[1:]] == ["1", "2.5"]
    single = pipe(Img2ImgParams(init_images=[photo], image_cfg_scale=2.5, **TINY))
    assert np.array_equal(np.asarray(cells[1]), np.asarray(single.images[0]))
    assert not np.array_equal(np.asarray(cells[0]), np.asarray(cells[1]))


def test_a_model_that_is_not_instruct_pix2pix_is_refused_before_any_cell(sd1_model, photo):
    pipe = ImageToImage(sd1_model)
    config = xyz_plot.xyz_config(("Image CFG Scale", "1, 2"), kind="img2img")
    with pytest.raises(ValueError, match=r"^X axis: Image CFG Scale applies to instruct-pix2pix checkpoints only .* "
                                         r"is not one; load an instruct-pix2pix model"):
        xyz_plot.run(pipe, Img2ImgParams(init_images=[photo], **TINY), config, kind="img2img")


def test_the_axis_is_img2img_only_as_in_a1111():
    with pytest.raises(ValueError, match="unknown txt2img axis type 'Image CFG Scale'"):
        xyz_plot.xyz_config(("Image CFG Scale", "1"))


def test_txt2img_params_are_refused_as_the_axis_needs_img2img(sd1_model):
    from pipelines.txt2img import TextToImage

    config = xyz_plot.xyz_config(("Image CFG Scale", "1"), kind="img2img")
    with pytest.raises(ValueError, match="X axis 'Image CFG Scale' needs img2img"):
        xyz_plot.run(TextToImage(sd1_model), Txt2ImgParams(**TINY), config)
