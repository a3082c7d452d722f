"""The X/Y/Z plot's Refiner checkpoint axis next to a call's `refiner_config_dir` (the configs of its single-file
refiners): each cell takes it as its refiner needs (pipelines/scripts/xyz_axes.py `apply_refiner`): "None" has no
refiner, a diffusers folder its own configs, and a single file is read with the call's folder."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.params import Txt2ImgParams
from pipelines.scripts import xyz_plot
from pipelines.scripts.xyz_axes import PlotContext

SMALL = dict(prompt="a red fox", negative_prompt="blurry", width=64, height=64, seed=3, sampler="Euler", steps=4)


@pytest.fixture(scope="module")
def refiners(tmp_path_factory):
    """A tiny SD1 refiner (weights other than the base's) as a diffusers folder and as a single file, which loads
    only with that folder's configs (the tiny architecture is no published one)."""
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
    from mixkit.testing.tiny_models import build_tiny_sd1

    root = tmp_path_factory.mktemp("xyz-refiners")
    folder = build_tiny_sd1(root / "refiner", seed=1)
    save_ldm_checkpoint(load_diffusion_model(folder), root / "refiner.safetensors")
    return {"refiner": str(folder), "refiner.safetensors": str(root / "refiner.safetensors")}


def _context(refiners) -> dict:
    return {"checkpoint_names": list(refiners), "refiner_source": refiners.get}


def test_each_cell_takes_the_config_dir_its_refiner_needs(refiners):
    context = _context(refiners)
    params = Txt2ImgParams(**SMALL, refiner=refiners["refiner.safetensors"], refiner_config_dir=refiners["refiner"])
    config = xyz_plot.xyz_config(("Refiner checkpoint", "None,refiner,refiner.safetensors"), context=context)
    cells = xyz_plot.check_plot(params, config, PlotContext(**context))
    assert [(cell.params.refiner, cell.params.refiner_config_dir) for cell in cells] == [
        (None, None), (refiners["refiner"], None), (refiners["refiner.safetensors"], refiners["refiner"])]
    assert params.refiner_config_dir == refiners["refiner"]  # the call's own params are not changed


def test_none_folder_and_file_cells_run_and_a_file_refines_as_its_folder(sd1_pipe, refiners):
    """Every cell passes the pipeline's check (a None or folder cell was refused for the call's refiner_config_dir),
    the None cell is the unrefined image and the file cell the folder cell's, to the pixel."""
    params = Txt2ImgParams(**SMALL, refiner=refiners["refiner.safetensors"], refiner_config_dir=refiners["refiner"],
                           refiner_switch_at=0.5)
    config = xyz_plot.xyz_config(("Refiner checkpoint", "None,refiner,refiner.safetensors"), draw_legend=False,
                                 include_lone_images=True, context=_context(refiners))
    result = xyz_plot.run(sd1_pipe, params, config, **_context(refiners))
    none, folder, single_file = (np.asarray(image, dtype=np.int16) for image in result.images[1:])
    plain = np.asarray(sd1_pipe(**SMALL).images[0], dtype=np.int16)
    np.testing.assert_array_equal(none, plain)
    np.testing.assert_array_equal(single_file, folder)
    assert np.abs(folder - plain).max() > 0  # the refiner's other weights did run


def test_a_file_cell_the_config_dir_does_not_describe_is_refused_before_anything_runs(sd1_pipe, refiners,
                                                                                     tiny_sdxl_dir):
    params = Txt2ImgParams(**SMALL, refiner=refiners["refiner.safetensors"], refiner_config_dir=str(tiny_sdxl_dir))
    config = xyz_plot.xyz_config(("Refiner checkpoint", "None,refiner.safetensors"), context=_context(refiners))
    calls = []
    with pytest.raises(ValueError, match="describes SDXL base but the refiner .* is SD 1.x"):
        xyz_plot.run(sd1_pipe, params, config, callback=calls.append, **_context(refiners))
    assert calls == []
