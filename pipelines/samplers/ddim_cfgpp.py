"""A1111's "DDIM CFG++" (1.10, `sd_samplers_timesteps_impl.ddim_cfgpp`): DDIM renoised with the unconditional noise.

CFG++ (Chung et al. 2024, "CFG++: Manifold-constrained Classifier Free Guidance for Diffusion Models") keeps DDIM's
denoised estimate from the guided noise prediction but takes the step's direction back to the noise manifold from
the *unconditional* prediction alone, which lets guidance stay on the data manifold at small scales. A1111 maps its
CFG slider onto CFG++'s [0, 1] by multiplying the scale by 1 / 12.5 (`cond_scale_miltiplier`; CFG 7 guides at 0.56),
and walks DDIM's own grid, eta ("Eta DDIM", 0 by default) and img2img start (a1111_timesteps.py).

mixkit's loop hands the scheduler the unconditional prediction as `noise_uncond` (`needs_uncond_prediction`) and
scales the CFG scale by `cfg_scale_multiplier`, as A1111's CFG denoiser does; a step that leaves out the negative
prompt (NGMS, Skip Early CFG) guides at 1 and renoises with the first prompt part's prediction, which stands in for
the negative one there, as in A1111. Called without `noise_uncond` (no classifier-free guidance: the one prediction
is the unguided one) a step is plain DDIM, which is what CFG++ is without guidance.
"""

from __future__ import annotations

from pipelines.samplers.a1111_timesteps import A1111DDIMScheduler

CFG_SCALE_MULTIPLIER = 1 / 12.5  # A1111: "The CFG scale is divided by 12.5 to map CFG from [0.0, 12.5] to [0, 1.0]"


class A1111DDIMCFGPPScheduler(A1111DDIMScheduler):
    """A1111's DDIM CFG++: DDIM's grid and eta; the step renoises with the unconditional prediction."""

    needs_uncond_prediction = True  # run_sampler passes `noise_uncond` to `step`
    cfg_scale_multiplier = CFG_SCALE_MULTIPLIER  # run_sampler guides at cfg_scale times this

    def _direction_eps(self, sample, index: int, noise_uncond=None, **_):
        if noise_uncond is None:
            return None
        return self._eps(noise_uncond.to(sample.dtype), sample, index)
