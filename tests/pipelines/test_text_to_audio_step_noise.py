"""Random-noise (ancestral / SDE) schedulers in `TextToAudio` batches: clip k's step noise comes from clip k's own
generator (or Brownian tree), so clip k of a batch is the clip of a call with seed + k alone, as its starting noise
already was. The tiny AudioLDM 2 folder (diffusers' test sizes) with its DDIM scheduler swapped for each one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipelines.text_to_audio import TextToAudio

SMALL = {"audio_length_in_s": 0.02, "steps": 3}
# (scheduler class, config overrides): every diffusers scheduler here draws noise at each step
RANDOM_NOISE_SCHEDULERS = [
    ("EulerAncestralDiscreteScheduler", {}),
    ("DDPMScheduler", {}),
    ("KDPM2AncestralDiscreteScheduler", {}),  # two model calls per step
    ("DPMSolverMultistepScheduler", {"algorithm_type": "sde-dpmsolver++"}),
    ("DPMSolverSDEScheduler", {}),  # a Brownian tree, not a generator
]


def _assert_same_clip(actual, expected):
    """Equal up to float32 batching noise, relative to the clip's scale (the tiny vocoder's samples are ~1e-6)."""
    scale = float(np.abs(expected).max())
    assert scale > 0
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-4 * scale)


def _relative_difference(a, b) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _with_scheduler(folder, class_name, overrides):
    import diffusers

    model = TextToAudio.from_pretrained(str(folder))
    config = model.pipeline.scheduler.config
    model.pipeline.scheduler = getattr(diffusers, class_name).from_config(config, **overrides)
    return model


@pytest.mark.parametrize("class_name, overrides", RANDOM_NOISE_SCHEDULERS)
def test_clip_k_of_a_batch_is_the_clip_of_seed_plus_k_with_a_random_noise_scheduler(tiny_audioldm2_dir, class_name,
                                                                                     overrides):
    model = _with_scheduler(tiny_audioldm2_dir, class_name, overrides)
    batch = model("rain", batch_size=3, seed=40, **SMALL)
    alone = [model("rain", seed=seed, **SMALL).waveform for seed in (40, 41, 42)]
    for clip, expected in zip(batch.waveforms, alone):
        _assert_same_clip(clip, expected)
    # the step noise matters: the same starting noise with DDIM (no step noise) gives another clip
    ddim = TextToAudio.from_pretrained(str(tiny_audioldm2_dir))("rain", seed=41, **SMALL).waveform
    assert _relative_difference(alone[1], ddim) > 0.01


@pytest.fixture
def diffusers_keeps_batch_order(monkeypatch):
    """diffusers re-orders a batch by CLAP score when librosa is installed; the oracle keeps the drawn order."""
    import diffusers.pipelines.audioldm2.pipeline_audioldm2 as audioldm2_module

    monkeypatch.setattr(audioldm2_module, "is_librosa_available", lambda: False)


@pytest.mark.parametrize("class_name, overrides", RANDOM_NOISE_SCHEDULERS[:2])
def test_a_callers_generator_draws_the_step_noise_as_diffusers_does(tiny_audioldm2_dir, class_name, overrides,
                                                                     diffusers_keeps_batch_order):
    model = _with_scheduler(tiny_audioldm2_dir, class_name, overrides)
    pipe = type(model.pipeline).from_pretrained(str(tiny_audioldm2_dir))
    pipe.scheduler = type(model.pipeline.scheduler).from_config(model.pipeline.scheduler.config)
    pipe.set_progress_bar_config(disable=True)
    expected = pipe("rain", audio_length_in_s=0.02, num_inference_steps=3, num_waveforms_per_prompt=2,
                    generator=torch.Generator().manual_seed(9)).audios
    result = model("rain", batch_size=2, generator=torch.Generator().manual_seed(9), **SMALL)
    for clip, oracle in zip(result.waveforms, expected):
        _assert_same_clip(clip, oracle)


def test_a_brownian_tree_scheduler_is_reproducible_from_a_callers_generator(tiny_audioldm2_dir):
    model = _with_scheduler(tiny_audioldm2_dir, "DPMSolverSDEScheduler", {})
    first, again = (model("rain", batch_size=2, generator=torch.Generator().manual_seed(5), **SMALL)
                    for _ in range(2))
    np.testing.assert_array_equal(np.stack(first.waveforms), np.stack(again.waveforms))
    assert _relative_difference(first.waveforms[0], first.waveforms[1]) > 0.01
