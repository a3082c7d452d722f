"""The hires fix's size rules as pure functions: A1111's upscale size, latent crop and final size, exact values."""

from __future__ import annotations

import pytest

from pipelines.hires import HiresParams, hires_target_size
from pipelines.hires_size import plan_hires_size


@pytest.mark.parametrize("width, scale, upscaled, final", [
    (512, 1.3, 665, 664), (512, 1.35, 691, 688), (512, 1.7, 870, 864), (512, 2.0, 1024, 1024),
    (64, 1.3, 83, 80), (64, 1.35, 86, 80), (64, 1.7, 108, 104), (64, 1.5, 96, 96),
])
def test_any_scale_is_accepted_and_snapped_down_to_whole_latent_cells(width, scale, upscaled, final):
    size = plan_hires_size(width, width, scale, 0, 0, 8)
    assert (size.upscale_width, size.upscale_height, size.crop) == (upscaled, upscaled, (0, 0, final // 8, final // 8))
    assert size.size == hires_target_size(HiresParams(width=width, height=width, hr_scale=scale)) == (final, final)


@pytest.mark.parametrize("first, resize, upscaled, crop, final", [
    ((64, 64), (128, 64), (128, 128), (0, 4, 16, 12), (128, 64)),  # wider target: cover, cut rows
    ((64, 64), (64, 128), (128, 128), (4, 0, 12, 16), (64, 128)),  # taller target: cut columns
    ((512, 768), (1024, 1024), (1024, 1536), (0, 32, 128, 160), (1024, 1024)),
    ((512, 512), (1000, 700), (1000, 1000), (0, 18, 125, 106), (1000, 704)),  # odd surplus: one more cell off the bottom
    ((512, 512), (700, 1000), (1000, 1000), (18, 0, 106, 125), (704, 1000)),
    ((64, 32), (128, 64), (128, 64), (0, 0, 16, 8), (128, 64)),  # same aspect ratio: nothing to cut
    ((32, 48), (64, 0), (64, 96), (0, 0, 8, 12), (64, 96)),  # one side given: the other keeps the aspect ratio
    ((64, 48), (0, 100), (133, 100), (0, 0, 16, 12), (128, 96)),
    ((32, 32), (60, 0), (60, 60), (0, 0, 7, 7), (56, 56)),
])
def test_resize_covers_the_target_keeping_the_aspect_ratio_then_crops_latents(first, resize, upscaled, crop, final):
    size = plan_hires_size(*first, 2.0, *resize, 8)
    assert ((size.upscale_width, size.upscale_height), size.crop, size.size) == (upscaled, crop, final)
