"""Where inpainting puts the original latents back during sampling, as A1111 does.

A1111 blends inside its model wrapper, at each model call, in one of two ways:
- k-diffusion samplers (Euler, DPM++, LCM, ...) blend the *denoised estimate*: the model's prediction of the
  clean image is replaced by the original latents outside the mask (`denoised * nmask + init_latent * mask`),
  and the sampler steps from that. Outside the mask the sample then stays the original plus the sampler's own
  noise (for ancestral samplers, fresh noise each step), never a reset to the starting noise.
- its timestep samplers (DDIM, PLMS, UniPC: `mask_before_denoising`) blend the *model input*: the model sees
  the clean original latents outside the mask, while the sampler keeps stepping its own unblended sample.
Either way the final latents get the original outside the mask. A blend of the denoised estimate is a blend
of the model output itself (it is affine in the output, with the same coefficients in every cell), so it is
done on the UNet's guided output: the original's cells get the output that denoises to the original.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def output_denoising_to(target, model_input, alpha: float, prediction_type: str):
    """The model output that denoises `model_input` (a variance-preserving sample at cumulative alpha `alpha`)
    to `target`: epsilon = (x - sqrt(a) x0) / sqrt(1 - a), v = sqrt(a) eps - sqrt(1 - a) x0."""
    eps = (model_input - alpha**0.5 * target) / (1.0 - alpha) ** 0.5
    if prediction_type == "epsilon":
        return eps
    if prediction_type == "v_prediction":
        return alpha**0.5 * eps - (1.0 - alpha) ** 0.5 * target
    raise ValueError(f"inpainting cannot blend a {prediction_type!r} model's output; epsilon and v_prediction are supported")


def evaluation_alpha(scheduler, sample, model_input, step_index=None, timestep=None) -> float:
    """The cumulative alpha the scheduler turns this evaluation's output into a denoised estimate with.

    Sigma-space schedulers hand the model x / sqrt(sigma^2 + 1): alpha = (input / sample)^2, read as a least-squares
    ratio (exact up to rounding). Variance-preserving multistep ones (DPM-Solver++) hand over the sample itself
    and convert with their sigma at `step_index` (default: the current one; a caller reading after the step passes
    the one from before it); those without sigmas (A1111's DDIM/PLMS) with `timestep`'s alpha.
    """
    if model_input is not sample:
        ratio = float((model_input * sample).sum() / (sample * sample).sum())
        return min(max(ratio**2, 1e-12), 1.0)
    sigmas = getattr(scheduler, "sigmas", None)
    if sigmas is None and timestep is not None:
        return float(scheduler.alphas_cumprod[int(round(float(timestep)))])
    index = current_step_index(scheduler) if step_index is None else step_index
    sigma = float(sigmas[index])
    return 1.0 / (1.0 + sigma**2)


def current_step_index(scheduler) -> int | None:
    """The sigma index the scheduler's next step uses (diffusers sets `step_index` only at the first step)."""
    if not hasattr(scheduler, "sigmas"):
        return None
    index = getattr(scheduler, "step_index", None)
    return (getattr(scheduler, "begin_index", None) or 0) if index is None else index


@dataclass
class MaskBlend:
    """A1111's inpainting blend for one batch: `init` latents [B, C, h, w], `repaint` mask [B or 1, 1, h, w]
    (1 = repaint, fractional for soft masks), `before_denoising` for the timestep samplers."""

    init: Any
    repaint: Any
    before_denoising: bool
    prediction_type: str = "epsilon"

    def model_input(self, scaled, row: int, sample=None, scheduler=None, timestep=None):
        """What the model sees for image `row` (its scaled sample `scaled`, [1, C, h, w]); the unscaled `sample`,
        `scheduler` and `timestep` locate the noise level, which only the soft blend (SoftMaskBlend) needs."""
        if not self.before_denoising:
            return scaled
        mask = self.repaint[row % len(self.repaint)]
        return scaled * mask + self.init[row:row + 1] * (1 - mask)

    def guided_output(self, guided, sample, scaled, scheduler, row: int, timestep=None):
        """Image `row`'s guided output with the original's cells turned into the output denoising to the original
        (`timestep`, the model's, is not needed: the alpha is read from the sample and its scaled input)."""
        if self.before_denoising:
            return guided
        mask = self.repaint[row % len(self.repaint)]
        alpha = evaluation_alpha(scheduler, sample, scaled)
        keep = output_denoising_to(self.init[row:row + 1], scaled, alpha, self.prediction_type)
        return guided * mask + keep.to(guided) * (1 - mask)

    def final(self, latents):
        """The finished latents with the original outside the mask."""
        return latents * self.repaint + self.init * (1 - self.repaint)
