"""A1111's Refiner with "DPM adaptive", whose model calls are decided as it walks: the refiner takes over at the first
call whose noise level (or, switching by sampling steps, whose call count) reaches `refiner_switch_at`, as A1111's
`apply_refiner` decides it call by call."""

from __future__ import annotations

import torch

from pipelines.refiner import switch_ratio
from .unet_spy import run_base_and_refiner

SMALL = dict(prompt="a red fox", negative_prompt="blurry", width=64, height=64, seed=3, sampler="DPM adaptive",
             steps=8)


def _run(pipe, refiner_model, **values):
    result, log = run_base_and_refiner(pipe, refiner_model, **{**SMALL, **values})
    return result, [(name, t) for name, t, *_ in log]



def test_the_refiner_takes_over_the_walk_where_its_noise_level_reaches_switch_at(base_pipe, refiner_model):
    result, calls = _run(base_pipe, refiner_model, refiner_switch_at=0.5)
    names = [name for name, _ in calls]
    first = names.index("refiner")
    assert 0 < first and set(names[first:]) == {"refiner"} and "Refiner: " in result.infotexts[0]
    # A1111's ratio (T - 1 - t) / T of the training timestep nearest the call's sigma: below 0.5 for every base call,
    # reached at the refiner's first (the UNet sees the call's sigma as a fractional timestep: one step of slack)
    ratios = [(999 - t) / 1000 for _, t in calls]
    assert all(ratio < 0.501 for ratio in ratios[:first]) and ratios[first] >= 0.499


def test_switching_by_sampling_steps_counts_the_walks_calls(base_pipe, refiner_model):
    result, calls = _run(base_pipe, refiner_model, refiner_switch_at=0.5, refiner_switch_by_sample_steps=True)
    names = [name for name, _ in calls]
    # A1111's step / total_steps, total_steps being the step count (8): call 4 is the refiner's first
    assert names[:4] == ["base"] * 4 and set(names[4:]) == {"refiner"} and len(names) > 4
    assert "Refiner: " in result.infotexts[0]


def test_switch_ratio_is_a1111s_nearest_training_timestep():
    alphas = torch.linspace(0.999, 0.01, 1000, dtype=torch.float64)
    sigmas = ((1 - alphas) / alphas).sqrt()
    assert switch_ratio(alphas, float(sigmas[0])) == 0.999
    assert switch_ratio(alphas, float(sigmas[999])) == 0.0
    assert switch_ratio(alphas, float(sigmas[499]) * 1.0000001) == 0.5


def test_a_switch_the_walk_never_reaches_loads_no_refiner(tiny_sdxl_dir, tiny_sdxl_refiner_dir):
    from pipelines.txt2img import TextToImage

    pipe = TextToImage.from_pretrained(tiny_sdxl_dir)  # its own refiner slot, empty
    plain = pipe(**SMALL)
    # the walk ends at sigma_min, A1111's ratio 0.999 at most: a switch above that is never reached
    result = pipe(**SMALL, refiner=str(tiny_sdxl_refiner_dir), refiner_switch_at=0.9995)
    assert result.infotexts == plain.infotexts and "Refiner" not in result.infotexts[0]
    assert pipe.session.refiner_slot._session is None
