"""Inpainting puts the original back where A1111 does: into the denoised estimate for k-diffusion samplers, into
the model input for its timestep samplers (DDIM, PLMS, UniPC), and into the final latents for both.

The UNet is replaced by the exact denoiser of Gaussian data (its output forced through a forward hook), so the
whole img2img path runs and its final latents can be compared with a float64 restatement of A1111's loops.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

import pipelines.base
from pipelines.img2img import ImageToImage
from pipelines.inpaint_blend import MaskBlend, evaluation_alpha, output_denoising_to

from .samplers.kdiffusion_reference import GaussianDataModel

BOX = (16, 16, 48, 48)
CALL = dict(width=64, height=64, seed=5, prompt="a red circle", mask_blur=0, inpainting_fill="original",
            denoising_strength=0.75, inpaint_full_res=False, cfg_scale=1.0)


def _init_image():
    rng = np.random.default_rng(1)
    return Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))


def _mask():
    mask = Image.new("L", (64, 64), 0)
    mask.paste(255, BOX)
    return mask


@pytest.fixture
def gaussian_run(sd1_pipe, monkeypatch):
    """Run img2img with the Gaussian-data denoiser in place of the UNet; returns (request, final latents, model)."""
    pipe = ImageToImage.from_pipeline(sd1_pipe)
    model = GaussianDataModel(dict(pipe.model.scheduler_config))
    captured = {}

    def exact_output(module, args, kwargs, output):
        sample, timestep = args[0], args[1]
        output.sample = model(sample.double(), float(timestep)).to(sample.dtype)
        return output

    real_run = pipelines.base.run_sampler

    def recording_run(request):
        captured["request"] = request
        captured["states"] = [g.get_state() for g in request.generators]
        captured["start"] = request.latents.clone()
        captured["final"] = real_run(request)
        return captured["final"]

    monkeypatch.setattr(pipelines.base, "run_sampler", recording_run)
    handle = pipe.model.unet.register_forward_hook(exact_output, with_kwargs=True)

    def run(**kwargs):
        pipe(init_images=[_init_image()], mask=_mask(), **{**CALL, **kwargs})
        return captured, model

    yield run
    handle.remove()


def _k_diffusion_inpaint(x, sigmas, init, repaint, model, ancestral: bool, generator=None):
    """A1111's k-diffusion loop with its CFGDenoiser blend: denoised * nmask + init_latent * mask, Euler (a) steps."""
    x, init, repaint = x.double(), init.double(), repaint.double()
    for i in range(len(sigmas) - 1):
        s, s_next = float(sigmas[i]), float(sigmas[i + 1])
        alpha = 1.0 / (1.0 + s * s)
        t = _timestep_of(s, model)
        eps = model(x * alpha**0.5, t)
        denoised = (x - s * eps) * repaint + init * (1 - repaint)
        if ancestral:
            s_up = min(s_next, (s_next**2 * (s**2 - s_next**2) / s**2) ** 0.5)
            s_down = (s_next**2 - s_up**2) ** 0.5
        else:
            s_up, s_down = 0.0, s_next
        x = x + (x - denoised) / s * (s_down - s)
        if ancestral:
            noise = torch.randn(x.shape, generator=generator, dtype=torch.float32).double()
            if s_next > 0:
                x = x + noise * s_up
    return x * repaint + init * (1 - repaint)


def _timestep_of(sigma: float, model) -> float:
    """The fractional training timestep of `sigma` (log-sigma interpolation, as diffusers' Euler computes it)."""
    sigmas = ((1 - model.ac.double()) / model.ac.double()).sqrt().log().numpy()
    return float(np.interp(math.log(sigma), sigmas, np.arange(len(sigmas))))


@pytest.mark.parametrize("sampler", ["Euler", "Euler a"])
def test_k_diffusion_samplers_blend_the_denoised_estimate_as_a1111(gaussian_run, sampler):
    captured, model = gaussian_run(sampler=sampler, steps=6)
    request = captured["request"]
    blend, scheduler = request.mask_blend, request.schedulers[0]
    assert blend is not None and not blend.before_denoising
    begin = len(scheduler.timesteps) - len(request.timesteps)
    sigmas = scheduler.sigmas[begin:].double()
    generator = torch.Generator()
    generator.set_state(captured["states"][0])
    expected = _k_diffusion_inpaint(captured["start"], sigmas, blend.init, blend.repaint, model,
                                    ancestral=sampler == "Euler a", generator=generator)
    torch.testing.assert_close(captured["final"].double(), expected, rtol=0, atol=2e-3)


def test_outside_the_mask_the_final_latents_are_the_original(gaussian_run):
    captured, _ = gaussian_run(sampler="Euler a", steps=4)
    blend = captured["request"].mask_blend
    keep = blend.repaint == 0
    assert torch.equal(captured["final"].expand_as(blend.init)[keep.expand_as(blend.init)],
                       blend.init[keep.expand_as(blend.init)])


@pytest.mark.parametrize("sampler", ["DDIM", "PLMS", "UniPC"])
def test_timestep_samplers_show_the_model_the_clean_original_outside_the_mask(gaussian_run, sd1_pipe, sampler):
    seen = []
    handle = sd1_pipe.model.unet.register_forward_pre_hook(lambda module, args: seen.append(args[0].clone()))
    try:
        captured, _ = gaussian_run(sampler=sampler, steps=6)
    finally:
        handle.remove()
    blend = captured["request"].mask_blend
    assert blend.before_denoising
    keep = (blend.repaint == 0).expand_as(blend.init)
    for model_input in seen:  # every call, cond and uncond rows alike (A1111's apply_blend(x) before denoising)
        for row in model_input:
            assert torch.equal(row[None][keep], blend.init[keep])


def test_output_denoising_to_the_target_inverts_the_denoiser():
    x0, noise = torch.randn(1, 4, 8, 8, dtype=torch.float64), torch.randn(1, 4, 8, 8, dtype=torch.float64)
    alpha = 0.3
    x = alpha**0.5 * x0 + (1 - alpha) ** 0.5 * noise
    torch.testing.assert_close(output_denoising_to(x0, x, alpha, "epsilon"), noise)
    v = output_denoising_to(x0, x, alpha, "v_prediction")
    torch.testing.assert_close(alpha**0.5 * x - (1 - alpha) ** 0.5 * v, x0)  # v-prediction's denoised estimate


def test_evaluation_alpha_reads_sigma_space_scaling_and_vp_schedulers_sigmas():
    class VPScheduler:
        step_index, begin_index = None, 2
        sigmas = torch.tensor([10.0, 5.0, 3.0, 0.0])

    sample = torch.randn(1, 4, 8, 8)
    assert evaluation_alpha(None, sample, sample / (1 + 4.0**2) ** 0.5) == pytest.approx(1 / 17, rel=1e-5)
    assert evaluation_alpha(VPScheduler(), sample, sample) == pytest.approx(1 / 10)


def test_soft_masks_blend_in_proportion():
    blend = MaskBlend(init=torch.zeros(1, 1, 1, 2), repaint=torch.tensor([[[[1.0, 0.25]]]]), before_denoising=False)
    assert blend.final(torch.ones(1, 1, 1, 2)).tolist() == [[[[1.0, 0.25]]]]
