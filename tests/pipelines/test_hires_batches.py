"""Hires fix with batch count > 1: each batch's second pass right after its first pass, as A1111
(modules/processing.py: process_images_inner loops over n_iter, and each StableDiffusionProcessingTxt2Img.sample
runs the first pass, then sample_hr_pass), so progress only rises and an interrupt keeps finished batches."""

import numpy as np
import pytest

from pipelines.control import GenerationControl
from pipelines.hires import HiresFix
from pipelines.hires_progress import HiresJobProgress
from pipelines.infotext import parse_infotext

BASE = dict(prompt="a castle", seed=21, width=32, height=32, steps=3, sampler="Euler", hr_scale=2.0,
            hr_upscaler="Latent", hr_second_pass_steps=2, denoising_strength=0.5)
HIRES_KEYS = ("Denoising strength", "Hires upscale", "Hires steps", "Hires upscaler")


@pytest.fixture(scope="module")
def hires(sd1_pipe):
    return HiresFix(sd1_pipe)


def test_each_batch_is_refined_before_the_next_batch_starts_and_progress_only_rises(hires):
    seen = []
    hires(**BASE, batch_count=2, callback=lambda p: seen.append(
        (p.batch_index, p.batch_count, p.step, p.total_steps, p.pass_index, p.pass_count, p.fraction)))
    order = [row[:6] for row in seen]
    assert order == [(0, 2, 1, 3, 0, 4), (0, 2, 2, 3, 0, 4), (0, 2, 3, 3, 0, 4),  # batch 1, first pass
                     (0, 2, 1, 2, 1, 4), (0, 2, 2, 2, 1, 4),  # batch 1, hires pass
                     (1, 2, 1, 3, 2, 4), (1, 2, 2, 3, 2, 4), (1, 2, 3, 3, 2, 4),
                     (1, 2, 1, 2, 3, 4), (1, 2, 2, 2, 3, 4)]
    # A1111's total: (steps + hires steps) x batch count = 10 steps, counted across both passes of both batches
    assert [row[6] for row in seen] == pytest.approx([k / 10 for k in range(1, 11)])


def test_batch_n_is_the_image_a1111_makes_from_its_own_seeds(hires):
    both = hires(**BASE, batch_count=2)
    alone = hires(**{**BASE, "seed": 22})  # A1111: batch 2 of seed 21 (batch size 1) uses seed 22
    assert both.seeds == [21, 22]
    assert both.images[1].tobytes() == alone.images[0].tobytes()
    assert both.infotexts[1] == alone.infotexts[0]


def test_a_generator_list_seeds_each_images_second_pass_from_its_own_seed(hires):
    """A1111's sample_hr_pass draws from each image's seed (`ImageRNG(shape, self.seeds)`); a `generator=` list can
    give seeds that are not consecutive, and image 1's recorded seed 99 must reproduce its second pass too (it was
    drawn from 5 + 1 = 6). An ancestral sampler draws noise in every step, so a wrong generator shows."""
    import torch

    recipe = {key: value for key, value in BASE.items() if key != "seed"} | {"sampler": "Euler a"}
    both = hires(**recipe, batch_size=2, generator=[torch.Generator().manual_seed(5), torch.Generator().manual_seed(99)])
    alone = hires(**recipe, seed=99)
    assert both.seeds == [5, 99]
    difference = np.asarray(both.images[1], dtype=np.int16) - np.asarray(alone.images[0], dtype=np.int16)
    assert np.abs(difference).max() <= 2  # a batch of 2 and a batch of 1 differ by float rounding only


def test_an_interrupt_in_batch_2s_first_pass_keeps_batch_1s_hires_image(hires):
    full = hires(**BASE, batch_count=2)
    control = GenerationControl()

    def interrupt_in_batch_2(progress):
        if progress.pass_index == 2 and progress.step == 1:
            control.interrupt()

    result = hires(**BASE, batch_count=2, callback=interrupt_in_batch_2, control=control)
    assert result.interrupted and result.seeds == [21, 22]
    # batch 1 finished both passes: the same hires image and infotext as an uninterrupted call
    assert result.images[0].size == (64, 64)
    assert result.images[0].tobytes() == full.images[0].tobytes() and result.infotexts[0] == full.infotexts[0]
    # batch 2 stopped in its first pass (A1111's sample_hr_pass returns the first pass's samples): its infotext is
    # a txt2img one, so pasting it does not claim a hires image
    assert result.images[1].size == (32, 32)
    fields = parse_infotext(result.infotexts[1])
    assert not [key for key in HIRES_KEYS if key in fields]
    assert (fields["Size-1"], fields["Seed"], fields["Steps"]) == ("32", "22", "3")


def test_an_interrupt_in_a_hires_pass_returns_that_batch_at_the_hires_size_and_stops(hires):
    control = GenerationControl()

    def interrupt_in_first_hires_pass(progress):
        if progress.pass_index == 1 and progress.step == 1:
            control.interrupt()

    result = hires(**BASE, batch_count=2, batch_size=2, callback=interrupt_in_first_hires_pass, control=control)
    # A1111 decodes what the interrupted hires pass made and breaks out of the n_iter loop
    assert result.interrupted and result.seeds == [21, 22]
    assert [image.size for image in result.images] == [(64, 64)] * 2
    assert parse_infotext(result.infotexts[0])["Hires upscale"] == "2"


def test_job_progress_counts_the_steps_a_pass_really_runs():
    """A pass may run more steps than planned (a sampler walking its own grid); the job's total follows it."""
    from pipelines.control import StepProgress

    seen = []
    job = HiresJobProgress(seen.append, batch_count=1, first_steps=4, second_steps=2)
    first = job.next_pass()
    for step in (1, 2, 3, 4, 5):
        first(StepProgress(step, 5, 0, 1, None, None))
    second = job.next_pass()
    second(StepProgress(1, 2, 0, 1, None, None))
    assert [p.fraction for p in seen] == pytest.approx([1 / 7, 2 / 7, 3 / 7, 4 / 7, 5 / 7, 6 / 7])
    assert HiresJobProgress(None, 1, 4, 2).next_pass() is None  # no callback: the passes get none
