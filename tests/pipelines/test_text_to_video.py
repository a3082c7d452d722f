"""`TextToVideo`: diffusers' text-to-video model run with A1111 samplers, seeds, step callbacks and Interrupt.

The oracle is diffusers' own `TextToVideoSDPipeline` on the same folder: without a sampler the frames are equal to
its frames, value for value."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.control import GenerationControl

SMALL = {"num_frames": 3, "steps": 2, "width": 32, "height": 32}


@pytest.fixture(scope="module")
def video_model(tiny_text_to_video_dir):
    from pipelines.text_to_video import TextToVideo

    return TextToVideo.from_pretrained(str(tiny_text_to_video_dir))


def arrays(frames) -> np.ndarray:
    return np.stack([np.asarray(frame) for frame in frames])


def test_frames_equal_diffusers_text_to_video_pipeline(video_model, tiny_text_to_video_dir):
    import torch
    from diffusers import DPMSolverMultistepScheduler, TextToVideoSDPipeline

    ours = video_model("a cat surfing", negative_prompt="blurry", seed=5, **SMALL)
    pipe = TextToVideoSDPipeline.from_pretrained(str(tiny_text_to_video_dir))
    pipe.set_progress_bar_config(disable=True)
    pipe.scheduler = DPMSolverMultistepScheduler.from_config(pipe.scheduler.config)  # PaddleMIX's / the model card's
    theirs = pipe("a cat surfing", negative_prompt="blurry", num_frames=3, num_inference_steps=2, height=32, width=32,
                  generator=torch.Generator().manual_seed(5), output_type="pil").frames[0]
    assert ours.seed == 5 and not ours.interrupted
    assert np.array_equal(arrays(ours.frames), arrays(theirs))


def test_frame_count_size_and_native_size(video_model):
    result = video_model("a dog", num_frames=2, steps=1, width=48, height=24, seed=1)
    assert len(result.frames) == 2 and {frame.size for frame in result.frames} == {(48, 24)}
    assert video_model.native_size == 64  # sample_size 8 x the VAE's 8: the size used when none is given
    assert video_model("a dog", num_frames=1, steps=1, seed=1).frames[0].size == (64, 64)


@pytest.mark.parametrize("sampler", [None, "Euler a", "DPM++ 2M", "DDIM", "Heun", "DPM++ SDE"])
def test_a_seed_makes_the_same_video_and_another_seed_another(video_model, sampler):
    first = arrays(video_model("a cat", seed=7, sampler=sampler, **SMALL).frames)
    again = arrays(video_model("a cat", seed=7, sampler=sampler, **SMALL).frames)
    other = arrays(video_model("a cat", seed=8, sampler=sampler, **SMALL).frames)
    assert np.array_equal(first, again) and not np.array_equal(first, other)


def test_seed_minus_one_draws_a_seed_that_makes_the_video_again(video_model):
    drawn = video_model("a cat", seed=-1, **SMALL)
    assert 0 <= drawn.seed < 2**32
    assert np.array_equal(arrays(drawn.frames), arrays(video_model("a cat", seed=drawn.seed, **SMALL).frames))


def test_a_generator_draws_the_noise_as_the_same_seed_does(video_model):
    import torch

    by_generator = video_model("a cat", generator=torch.Generator().manual_seed(11), **SMALL)
    assert by_generator.seed == -1  # the generator's state, not a seed, made it
    assert np.array_equal(arrays(by_generator.frames), arrays(video_model("a cat", seed=11, **SMALL).frames))


def test_callback_sees_every_step_and_interrupt_returns_the_denoised_estimate(video_model):
    seen = []
    video_model("a cat", seed=3, num_frames=2, steps=3, width=32, height=32,
                callback=lambda progress: seen.append((progress.step, progress.total_steps,
                                                       tuple(progress.latents.shape))))
    assert seen == [(1, 3, (1, 4, 2, 4, 4)), (2, 3, (1, 4, 2, 4, 4)), (3, 3, (1, 4, 2, 4, 4))]

    control, steps = GenerationControl(), []

    def stop_after_first(progress):
        steps.append(progress.step)
        control.interrupt()

    stopped = video_model("a cat", seed=3, num_frames=2, steps=3, width=32, height=32, callback=stop_after_first,
                          control=control)
    full = video_model("a cat", seed=3, num_frames=2, steps=3, width=32, height=32)
    assert steps == [1] and stopped.interrupted and len(stopped.frames) == 2
    assert not np.array_equal(arrays(stopped.frames), arrays(full.frames))


def test_the_loaded_pipeline_scheduler_is_left_as_it_was(video_model):
    before = type(video_model.pipeline.scheduler), dict(video_model.pipeline.scheduler.config)
    video_model("a cat", seed=1, sampler="Euler a", **SMALL)
    assert (type(video_model.pipeline.scheduler), dict(video_model.pipeline.scheduler.config)) == before


@pytest.mark.parametrize("options, error, fragment", [
    ({"num_frames": 0}, ValueError, r"num_frames must be an integer in \[1, 256\]"),
    ({"num_frames": 2.0}, ValueError, "num_frames must be an integer"),
    ({"steps": 0}, ValueError, r"steps must be an integer in \[1, 1000\]"),
    ({"cfg_scale": float("nan")}, ValueError, r"cfg_scale must be a number in \[0, 100\]"),
    ({"width": 36}, ValueError, "width must be a multiple of 8 .*try 32"),
    ({"height": 4096}, ValueError, r"height must be an integer in \[8, 2048\]"),
    ({"seed": -2}, ValueError, "seed must be an integer"),
    ({"negative_prompt": None}, TypeError, "negative_prompt must be a string"),
    ({"sampler": "Eulr a"}, ValueError, "Eulr a"),
    ({"sampler": "DPM adaptive"}, ValueError, "not available for video"),
    ({"schedule_type": "Karras"}, ValueError, "needs a sampler"),
    ({"generator": 5}, TypeError, "torch.Generator"),
])
def test_bad_settings_are_refused_naming_the_value_and_its_range(options, error, fragment):
    from pipelines.text_to_video import check_video_settings

    with pytest.raises(error, match=fragment):
        check_video_settings(prompt="a cat", **options)


def test_seed_and_generator_together_are_refused(video_model):
    import torch

    with pytest.raises(ValueError, match="Pass seed= or generator=, not both"):
        video_model("a cat", seed=3, generator=torch.Generator(), **SMALL)


def test_interrupt_with_the_default_sampler_decodes_its_clean_estimate_not_the_noisy_sample(video_model, monkeypatch):
    """diffusers' DPM-Solver++ reports no `pred_original_sample`; its own x0 (the multistep's stored model output)
    is the oracle for what an interrupted video decodes."""
    import torch

    schedulers, decoded = [], []
    make_scheduler, decode = video_model.make_scheduler, video_model.pipeline.decode_latents
    monkeypatch.setattr(video_model, "make_scheduler",
                        lambda *args: schedulers.append(make_scheduler(*args)) or schedulers[-1])
    monkeypatch.setattr(video_model.pipeline, "decode_latents",
                        lambda latents: decoded.append(latents) or decode(latents))
    control = GenerationControl()
    stopped = video_model("a cat", seed=3, num_frames=2, steps=3, width=32, height=32, control=control,
                          callback=lambda progress: control.interrupt())
    assert stopped.interrupted
    x0 = schedulers[0].model_outputs[-1]  # [frames, C, h, w]: DPM-Solver++ keeps the clean estimate it stepped with
    assert torch.allclose(decoded[0][0].permute(1, 0, 2, 3), x0, atol=1e-5)


@pytest.mark.parametrize("sampler", ["DPM++ SDE", "DPM++ 2M SDE"])
def test_a_generator_makes_a_brownian_sampler_video_again(video_model, sampler):
    """The SDE samplers' Brownian tree is seeded from the caller's generator too, not from torch's global RNG."""
    import torch

    def run():
        return arrays(video_model("a cat", generator=torch.Generator().manual_seed(11), sampler=sampler, **SMALL).frames)

    assert np.array_equal(run(), run())
