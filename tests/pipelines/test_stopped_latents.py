"""An interrupted or skipped batch decodes the latest denoised estimate (A1111's `last_latent`), not the noisy sample."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import pipelines.base
from pipelines.control import GenerationControl
from pipelines.inpaint_blend import output_denoising_to
from pipelines.stopped_latents import denoised_from_output

from .samplers.kdiffusion_reference import GaussianDataModel

SMALL = dict(prompt="a red circle", width=64, height=64, seed=5)
CLEAN = 0.5  # what the stand-in UNet denoises every input to


class _CleanImageUNet:
    """A UNet stand-in that is the exact denoiser for data that is always CLEAN (a Gaussian of width ~0): every
    sampler's clean-image estimate at every call is then CLEAN, while its sample is still noisy early on."""

    device, dtype = torch.device("cpu"), torch.float32

    def __init__(self, scheduler_config) -> None:
        self.model = GaussianDataModel(dict(scheduler_config), mean=CLEAN, std=1e-4)

    def __call__(self, model_input, t, **_):
        return SimpleNamespace(sample=self.model(model_input, t).expand_as(model_input).clone())


def _stopped_run(pipe, monkeypatch, stop_at: int, how: str, **kwargs):
    """(latents the sampler handed back, the sample the last progress callback saw, result) for a run stopped at
    step `stop_at` by Interrupt (`how="interrupt"`) or Skip."""
    returned = []
    real_run = pipelines.base.run_sampler

    def run_with_clean_unet(request):
        request.unet = _CleanImageUNet(request.schedulers[0].config)
        returned.append(real_run(request))
        return returned[-1]

    monkeypatch.setattr(pipelines.base, "run_sampler", run_with_clean_unet)
    control, seen = GenerationControl(), []

    def stop(progress):
        seen.append(progress.latents)
        if progress.step >= stop_at and len(seen) == stop_at:
            getattr(control, how)()

    result = pipe(**SMALL, control=control, callback=stop, **kwargs)
    return returned[0], seen[-1], result


@pytest.mark.parametrize("sampler", ["Euler", "Euler a", "DPM++ 2M", "Heun", "DDIM", "UniPC", "LMS", "DPM adaptive"])
def test_an_interrupt_hands_back_the_denoised_estimate_not_the_noisy_sample(sd1_pipe, monkeypatch, sampler):
    latents, noisy, result = _stopped_run(sd1_pipe, monkeypatch, 1, "interrupt", sampler=sampler, steps=10)
    assert result.interrupted and len(result.images) == 1
    # stopped at step 1 of 10 the sample is far from clean; what is decoded is the model's estimate of the clean image
    assert (noisy - CLEAN).abs().mean() > 0.2
    torch.testing.assert_close(latents, torch.full_like(latents, CLEAN), rtol=0, atol=2e-2)


def test_a_skip_also_hands_back_the_denoised_estimate(sd1_pipe, monkeypatch):
    latents, noisy, result = _stopped_run(sd1_pipe, monkeypatch, 1, "skip", sampler="DPM++ 2M", steps=10)
    assert not result.interrupted and len(result.images) == 1
    assert (noisy - CLEAN).abs().mean() > 0.2
    torch.testing.assert_close(latents, torch.full_like(latents, CLEAN), rtol=0, atol=2e-2)


def test_a_run_that_is_not_stopped_keeps_its_final_sample(sd1_pipe, monkeypatch):
    """The last step's sample is the result; the estimate is only for runs that stop early."""
    real_run = pipelines.base.run_sampler
    returned = []

    def run_with_clean_unet(request):
        request.unet = _CleanImageUNet(request.schedulers[0].config)
        returned.append(real_run(request))
        return returned[-1]

    monkeypatch.setattr(pipelines.base, "run_sampler", run_with_clean_unet)
    seen = []
    sd1_pipe(**SMALL, sampler="Euler", steps=4, callback=lambda p: seen.append(p.latents))
    assert torch.equal(returned[0], seen[-1])


@pytest.mark.parametrize("prediction_type", ["epsilon", "v_prediction"])
def test_denoised_from_output_inverts_the_output_that_denoises_to_a_target(prediction_type):
    generator = torch.Generator().manual_seed(0)
    target, model_input = torch.randn(1, 4, 8, 8, generator=generator), torch.randn(1, 4, 8, 8, generator=generator)
    for alpha in (0.003, 0.3, 0.97):
        output = output_denoising_to(target, model_input, alpha, prediction_type)
        torch.testing.assert_close(denoised_from_output(output, model_input, alpha, prediction_type), target,
                                   rtol=0, atol=1e-4)


def test_denoised_from_output_refuses_an_unknown_parameterisation():
    with pytest.raises(ValueError, match="'flow'.*epsilon, v_prediction and sample"):
        denoised_from_output(torch.zeros(1), torch.zeros(1), 0.5, "flow")
