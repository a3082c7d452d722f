"""A1111's DPM++ 3M SDE, Restart, DPM fast, DPM adaptive and DDIM CFG++ end to end on the tiny SD1 model: txt2img,
img2img, hires fix, progress, model-call counts and the infotext round trip."""

import numpy as np
import pytest
from PIL import Image

from pipelines.hires import HiresFix
from pipelines.img2img import ImageToImage
from pipelines.infotext import parse_infotext
from pipelines.infotext_samplers import sampler_and_schedule

from .unet_spy import recorded_unet_contexts

NEW = ["DPM++ 3M SDE", "Restart", "DPM fast", "DPM adaptive", "DDIM CFG++"]
SMALL = dict(prompt="a red circle", width=64, height=64, seed=5)
DEFAULT_SCHEDULES = {"DPM++ 3M SDE": "Exponential", "Restart": "Karras", "DPM fast": "Uniform",
                     "DPM adaptive": "Uniform", "DDIM CFG++": "Automatic"}


def px(image):
    return np.asarray(image).astype(np.int16)


def model_calls(pipe, call, **kwargs):
    with recorded_unet_contexts(pipe) as seen:
        result = call(**kwargs)
    return result, len(seen)


@pytest.mark.parametrize("sampler", NEW)
def test_txt2img_infotext_pasted_back_gives_the_same_image(sd1_pipe, sampler):
    first = sd1_pipe(**SMALL, sampler=sampler, steps=5, cfg_scale=6.0)
    fields = parse_infotext(first.infotexts[0])
    pasted_sampler, pasted_schedule = sampler_and_schedule(fields)
    assert (pasted_sampler, pasted_schedule) == (sampler, DEFAULT_SCHEDULES[sampler])
    again = sd1_pipe(prompt=fields["Prompt"], width=int(fields["Size-1"]), height=int(fields["Size-2"]),
                     seed=int(fields["Seed"]), steps=int(fields["Steps"]), cfg_scale=float(fields["CFG scale"]),
                     sampler=pasted_sampler, schedule_type=pasted_schedule)
    assert np.array_equal(px(first.images[0]), px(again.images[0]))


@pytest.mark.parametrize("sampler, steps, calls", [("DPM++ 3M SDE", 5, 5), ("DPM fast", 7, 7), ("Restart", 5, 9),
                                                   ("Restart", 20, 39)])
def test_model_calls_and_progress_count_a1111s_steps(sd1_pipe, sampler, steps, calls):
    progress = []
    result, seen = model_calls(sd1_pipe, sd1_pipe, **SMALL, sampler=sampler, steps=steps,
                               callback=lambda p: progress.append((p.step, p.total_steps)))
    assert seen == calls  # one UNet call per model call (the prompt and negative prompt batched)
    assert progress[-1] == (steps, steps) and [done for done, _ in progress] == sorted({d for d, _ in progress})
    assert np.isfinite(px(result.images[0])).all()


@pytest.mark.parametrize("sampler, strength, calls", [("DPM++ 3M SDE", 0.5, 6), ("DPM fast", 0.5, 6),
                                                      ("Restart", 0.5, 11), ("DDIM CFG++", 0.5, 4)])
def test_img2img_runs_a1111s_tail_of_the_schedule(sd1_pipe, sampler, strength, calls):
    i2i = ImageToImage.from_pipeline(sd1_pipe)
    init = Image.fromarray(np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8))
    # 10 steps at strength 0.5: A1111's t_enc = 5, 6 steps from sigmas[4] (Restart: Heun's 2 * 6 - 1 calls)
    result, seen = model_calls(i2i, i2i, **SMALL, init_images=[init], sampler=sampler, steps=10,
                               denoising_strength=strength)
    assert seen == calls
    assert f"Sampler: {sampler}," in result.infotexts[0] and "Denoising strength: 0.5" in result.infotexts[0]
    again = i2i(**SMALL, init_images=[init], sampler=sampler, steps=10, denoising_strength=strength)
    assert np.array_equal(px(result.images[0]), px(again.images[0]))


@pytest.mark.parametrize("strength", [0.0, 0.05])
def test_dpm_adaptive_img2img_below_one_step_calls_no_model_and_keeps_the_noised_input(sd1_pipe, strength):
    # 10 steps at strength < 0.1: A1111's t_enc = 0 hands it sigma_min == sigma_max (sigma_sched[-2] and [0] are one
    # sigma), over which k-diffusion's walk makes no step: the result is the init noised to that sigma
    i2i = ImageToImage.from_pipeline(sd1_pipe)
    init = Image.fromarray(np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8))
    values = dict(SMALL, init_images=[init], sampler="DPM adaptive", steps=10, denoising_strength=strength)
    result, seen = model_calls(i2i, i2i, **values)
    assert seen == 0 and f"Denoising strength: {strength:g}" in result.infotexts[0]
    other_prompt = i2i(**{**values, "prompt": "something else entirely"})
    assert np.array_equal(px(result.images[0]), px(other_prompt.images[0]))
    _, one_step = model_calls(i2i, i2i, **{**values, "denoising_strength": 0.1})  # t_enc = 1: a range to walk
    assert one_step > 0


@pytest.mark.parametrize("sampler", ["Restart", "DPM fast", "DPM adaptive", "DDIM CFG++"])
def test_hires_fix_second_pass(sd1_pipe, sampler):
    result = HiresFix(sd1_pipe)(prompt="a castle", seed=3, width=32, height=32, steps=3, sampler=sampler,
                                hr_scale=2.0, hr_upscaler="Latent", hr_second_pass_steps=3, denoising_strength=0.6)
    assert result.images[0].size == (64, 64)
    assert f"Sampler: {sampler}," in result.infotexts[0]


def test_eta_and_sigma_noise_are_recorded_where_a1111_passes_them(sd1_pipe):
    from pipelines.sampler_parameters import SamplerParameters

    fast = sd1_pipe(**SMALL, sampler="DPM fast", steps=4, eta=0.5)
    assert "Eta: 0.5" in fast.infotexts[0]
    noisy = sd1_pipe(**SMALL, sampler="DPM++ 3M SDE", steps=4, sampler_parameters=SamplerParameters(s_noise=0.9))
    assert "Sigma noise: 0.9" in noisy.infotexts[0]
    default = sd1_pipe(**SMALL, sampler="DPM++ 3M SDE", steps=4)
    assert "Eta" not in default.infotexts[0] and "Sigma noise" not in default.infotexts[0]
    assert px(noisy.images[0]).tolist() != px(default.images[0]).tolist()
    # Restart takes neither in A1111: a client's eta is ignored, not recorded
    restart = sd1_pipe(**SMALL, sampler="Restart", steps=4, eta=0.5)
    assert "Eta" not in restart.infotexts[0]
    assert np.array_equal(px(restart.images[0]), px(sd1_pipe(**SMALL, sampler="Restart", steps=4).images[0]))


def test_dpm_adaptive_progress_counts_the_sigma_range_walked_and_interrupts_at_an_accepted_step(sd1_pipe):
    from pipelines.control import GenerationControl

    progress = []
    result, seen = model_calls(sd1_pipe, sd1_pipe, **SMALL, sampler="DPM adaptive", steps=6,
                               callback=lambda p: progress.append((p.step, p.total_steps)))
    # its calls depend on the sample (several per accepted step); progress still ends at the step count, rising
    assert seen > 6 and progress[-1] == (6, 6) and [done for done, _ in progress] == sorted({d for d, _ in progress})
    control = GenerationControl()
    stopped = sd1_pipe(**SMALL, sampler="DPM adaptive", steps=6, control=control,
                       callback=lambda p: control.interrupt() if p.step >= 2 else None)
    assert stopped.interrupted and len(stopped.images) == 1


def test_ddim_cfgpp_renoises_with_the_negative_prompts_prediction(sd1_pipe):
    # CFG++ at scale 1 still guides (at 1 / 12.5) and renoises with the negative prompt's prediction, so both the
    # negative prompt and the CFG scale change the image; DDIM at scale 1 ignores the negative prompt.
    base = sd1_pipe(**SMALL, sampler="DDIM CFG++", steps=4, cfg_scale=1.0)
    other_negative = sd1_pipe(**SMALL, sampler="DDIM CFG++", steps=4, cfg_scale=1.0, negative_prompt="blue")
    assert not np.array_equal(px(base.images[0]), px(other_negative.images[0]))
    ddim = sd1_pipe(**SMALL, sampler="DDIM", steps=4, cfg_scale=1.0)
    assert np.array_equal(px(ddim.images[0]),
                          px(sd1_pipe(**SMALL, sampler="DDIM", steps=4, cfg_scale=1.0, negative_prompt="blue").images[0]))
    assert "Sampler: DDIM CFG++," in base.infotexts[0] and "CFG scale: 1," in base.infotexts[0]  # as given
