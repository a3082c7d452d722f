"""A script's grid size, known before generating (pipelines/scripts/grid_budget.py)."""

import pytest

from pipelines.hires import HiresParams
from pipelines.params import Txt2ImgParams
from pipelines.scripts.grid_budget import batch_grid_size, check_grid_size, output_size


def test_output_size_is_the_hires_upscaled_size():
    assert output_size(Txt2ImgParams(width=512, height=768)) == (512, 768)
    assert output_size(HiresParams(width=512, height=768, hr_scale=2.0)) == (1024, 1536)


@pytest.mark.parametrize("scale", [1e308, float("nan")])
def test_a_bad_hires_scale_is_left_to_the_hires_check(scale):
    # the hires size of 1e308 is an OverflowError; check_hires_params refuses it by name right after
    assert output_size(HiresParams(width=64, height=32, hr_scale=scale)) == (64, 32)


def test_a_batch_cell_is_its_batch_grid():
    # 6 images: A1111's rows = round(sqrt(6)) = 2, so 2 rows of 3
    assert batch_grid_size(Txt2ImgParams(width=64, height=32, batch_size=3, batch_count=2)) == (192, 64)


def test_cells_count_at_the_largest_width_and_height():
    check_grid_size("x", [(10_000, 10)] * 3, "advice")  # 0.3 MP
    check_grid_size("x", [(10_000, 10), (10, 10_000)], "advice")  # each drawn at 10000x10000: 200 MP, the cap
    with pytest.raises(ValueError, match=r"about 300 megapixels, more than 200 .*: 3 cells of 10000x10000; advice\."):
        check_grid_size("The plot's", [(10_000, 10), (10, 10_000), (10, 10)], "advice")
