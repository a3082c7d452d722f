"""A1111's nine "[Hypertile] ..." X/Y/Z axes (pipelines/scripts/xyz_hypertile_axes.py): appended after A1111 1.10's
list in its order, each setting one field of the cell's HyperTile, checked before anything runs."""

import pytest

from pipelines.approx.hypertile_settings import HyperTile
from pipelines.img2img import Img2ImgParams
from pipelines.infotext import parse_infotext
from pipelines.params import Txt2ImgParams
from pipelines.scripts import xyz_plot
from pipelines.scripts.xyz_axes import PlotContext, axes_for
from pipelines.scripts.xyz_config import parse_script_args, xyz_config

TINY = dict(prompt="a red cat", width=64, height=64, steps=1, seed=5, sampler="Euler")
LABELS = ["[Hypertile] Unet First pass Enabled", "[Hypertile] Unet Second pass Enabled", "[Hypertile] Unet Max Depth",
          "[Hypertile] Unet Max Tile Size", "[Hypertile] Unet Swap Size", "[Hypertile] VAE Enabled",
          "[Hypertile] VAE Max Depth", "[Hypertile] VAE Max Tile Size", "[Hypertile] VAE Swap Size"]


def cells(params, x, y=None, kind="txt2img"):
    return [cell.params for cell in xyz_plot.check_plot(params, xyz_config(x, y, kind=kind), PlotContext(kind=kind))]


def test_appended_after_a1111s_own_list_in_its_order():
    for kind, first in (("txt2img", 43), ("img2img", 42)):
        labels = [axis.label for axis in axes_for(kind)]
        assert labels[first - 1] == "Size" and labels[first:] == LABELS
    assert parse_script_args([43, "True,False"], "txt2img").x.label == "[Hypertile] Unet First pass Enabled"
    assert parse_script_args([49, "64"], "img2img").x.label == "[Hypertile] VAE Max Tile Size"


def test_a_size_axis_changes_the_calls_hypertile():
    params = Txt2ImgParams(**TINY, hypertile=HyperTile(unet_max_tile=128))
    planned = cells(params, ("[Hypertile] Unet Max Depth", "0,2"), ("[Hypertile] VAE Swap Size", "1,64"))
    assert [(p.hypertile.unet_max_depth, p.hypertile.vae_swap_size, p.hypertile.unet_max_tile) for p in planned] == [
        (0, 1, 128), (2, 1, 128), (0, 64, 128), (2, 64, 128)]
    assert params.hypertile == HyperTile(unet_max_tile=128)  # the call's own is left alone


def test_switches_start_from_a1111s_defaults_when_the_call_has_none():
    planned = cells(Txt2ImgParams(**TINY), ("[Hypertile] Unet First pass Enabled", "False,True"),
                    ("[Hypertile] Unet Max Depth", "1"))
    assert planned[0].hypertile is None  # nothing switched on: no Hypertile, as the call had
    assert planned[1].hypertile == HyperTile(unet=True, unet_max_depth=1)
    [vae] = cells(Img2ImgParams(**TINY), ("[Hypertile] VAE Enabled", "true"), kind="img2img")
    assert vae.hypertile == HyperTile(unet=False, vae=True)
    [off] = cells(Txt2ImgParams(**TINY, hypertile=HyperTile()), ("[Hypertile] Unet First pass Enabled", "False"))
    assert off.hypertile is None


@pytest.mark.parametrize("axis, values, message", [
    ("[Hypertile] Unet Swap Size", "1,0", r"\[Hypertile\] Unet Swap Size: HyperTile.unet_swap_size must be an integer "
                                         r"in \[1, 64\]"),
    ("[Hypertile] VAE Max Tile Size", "600", r"vae_max_tile must be an integer in \[0, 512\]"),
    ("[Hypertile] Unet Max Depth", "4", r"unet_max_depth must be an integer in \[0, 3\]"),
    ("[Hypertile] VAE Enabled", "maybe", "'maybe' must be True or False"),
])
def test_bad_values_are_refused_before_anything_runs(axis, values, message):
    with pytest.raises(ValueError, match=message):
        cells(Txt2ImgParams(**TINY), (axis, values))


def test_the_cells_infotexts_carry_a1111s_hypertile_keys(sd1_pipe):
    params = Txt2ImgParams(**TINY, hypertile=HyperTile())
    result = xyz_plot.run(sd1_pipe, params, xyz_config(("[Hypertile] Unet Max Depth", "3,1"),
                                                       include_lone_images=True))
    texts = [parse_infotext(text) for text in result.infotexts[1:]]
    assert [(text["Hypertile U-Net"], text.get("Hypertile U-Net max depth")) for text in texts] == [
        ("True", None), ("True", "1")]  # A1111 writes a size only when it is not its default
    assert parse_infotext(result.infotexts[0])["X Type"] == "[Hypertile] Unet Max Depth"
