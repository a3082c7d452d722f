"""Skipping the negative prompt's UNet pass on some steps: A1111's NGMS and "Skip Early CFG".

Classifier-free guidance runs the UNet on the negative prompt (uncond) and the prompt (cond) at
every step, so half of every UNet batch is the negative prompt. A1111 offers two ways to leave it
out where it matters least, both approximate (the image changes) and both recorded in the infotext:

- **NGMS** (Settings > Optimizations > "Negative Guidance minimum sigma", API `s_min_uncond`): at
  noise levels below that sigma, on every other model evaluation (every one with "NGMS all steps",
  `s_min_uncond_all`), the step uses the prompt's prediction alone. Late steps refine detail the
  guidance has already laid out, and alternating keeps most of its effect.
- **Skip Early CFG** (`skip_early_cond`, "Ignore negative prompt during early sampling"): the first
  fraction of the evaluations use the prompt alone, as some newer models are sampled.

When a step skips, the UNet runs on the prompt rows only (a smaller batch: the speed-up), and
each image's first prompt part stands in for its negative prediction before guidance is combined
at scale 1, exactly as A1111 does (`combine_denoised(..., cond_scale=1.0)` with the cond output
copied into the uncond slot), so AND prompts keep their relative weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mixkit.prompts.conditioning import StepConditioning

MAX_S_MIN_UNCOND = 15.0  # A1111's slider ends at 15 (SD's largest sigma is 14.6)


@dataclass(frozen=True)
class UncondSkip:
    """When a step may leave out the negative prompt (A1111's names; 0 / False is off)."""

    s_min_uncond: float = 0.0  # NGMS: skip below this sigma, on odd evaluations
    s_min_uncond_all: bool = False  # NGMS on every evaluation below that sigma, not every other one
    skip_early_cond: float = 0.0  # skip while evaluation / evaluations <= this fraction

    @property
    def active(self) -> bool:
        return self.s_min_uncond > 0 or self.skip_early_cond > 0

    def skips(self, evaluation: int, evaluations: int, sigma: float) -> bool:
        """Whether model evaluation `evaluation` (0-based, of `evaluations`) at noise level `sigma` skips uncond.

        A1111 counts evaluations (its CFG denoiser's calls), not WebUI steps, for both rules; its
        total for second-order samplers is their evaluation count too.
        """
        if self.skip_early_cond > 0 and evaluation / evaluations <= self.skip_early_cond:
            return True
        alternate = evaluation % 2 == 1 or self.s_min_uncond_all
        return self.s_min_uncond > 0 and alternate and sigma < self.s_min_uncond

    def infotext_values(self) -> dict[str, object]:
        """A1111's infotext keys for these settings (none when off)."""
        values: dict[str, object] = {}
        if self.skip_early_cond > 0:
            values["Skip Early CFG"] = self.skip_early_cond
        if self.s_min_uncond > 0:
            values["NGMS"] = self.s_min_uncond
            if self.s_min_uncond_all:
                values["NGMS all steps"] = True
        return values


def check_uncond_skip(s_min_uncond, s_min_uncond_all, skip_early_cond) -> None:
    """Raise ValueError/TypeError naming the first bad value; used by every pipeline's check_inputs."""
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(s_min_uncond, bool) or not isinstance(s_min_uncond, (int, float)) \
            or not 0 <= s_min_uncond <= MAX_S_MIN_UNCOND:
        raise ValueError(f"s_min_uncond (NGMS) must be a sigma in [0, {MAX_S_MIN_UNCOND}] (0 is off), got {s_min_uncond!r}.")
    if not isinstance(s_min_uncond_all, bool):
        raise TypeError(f"s_min_uncond_all (NGMS all steps) must be True or False, got {s_min_uncond_all!r}.")
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(skip_early_cond, bool) or not isinstance(skip_early_cond, (int, float)) \
            or not 0 <= skip_early_cond <= 1:
        raise ValueError(f"skip_early_cond must be a fraction of the steps in [0, 1] (0 is off), got {skip_early_cond!r}.")
    if s_min_uncond_all and not s_min_uncond:
        raise ValueError("s_min_uncond_all (NGMS all steps) needs s_min_uncond > 0: it says how often NGMS skips, "
                         "s_min_uncond below which sigma.")


def timestep_sigmas(alphas_cumprod: torch.Tensor, timesteps: torch.Tensor) -> list[float]:
    """The noise level sigma = sqrt((1 - alpha_bar) / alpha_bar) of each (possibly fractional) timestep.

    Computed from the training schedule rather than read from a scheduler, because not every
    scheduler keeps sigmas (DDIM does not) and img2img runs only the tail of a schedule. Between
    integer timesteps log sigma is interpolated, as k-diffusion's `t_to_sigma` does.
    """
    alphas = alphas_cumprod.to(torch.float64)
    log_sigmas = ((1 - alphas) / alphas).sqrt().log()
    t = timesteps.detach().to("cpu", torch.float64).clamp(0, len(alphas) - 1)
    low = t.floor().long()
    high = t.ceil().long()
    weight = t - low
    return ((1 - weight) * log_sigmas[low] + weight * log_sigmas[high]).exp().tolist()


def without_uncond(step_cond: StepConditioning) -> StepConditioning:
    """The step's conditioning with the negative-prompt rows removed, for a step that skips them.

    Rows are renumbered; each image's first prompt part takes the place of its negative prediction,
    so `combine_cfg(prediction, result, 1.0)` gives A1111's skipped-step result.
    """
    keep = sorted({row for parts in step_cond.cond_rows for row, _ in parts})
    renumbered = {row: index for index, row in enumerate(keep)}
    tokens = step_cond.embeds.shape[1] if step_cond.row_tokens is None else step_cond.row_tokens[keep[0]]
    return StepConditioning(
        embeds=step_cond.embeds[keep, :tokens],
        pooled=None if step_cond.pooled is None else step_cond.pooled[keep],
        uncond_rows=[renumbered[parts[0][0]] for parts in step_cond.cond_rows],
        cond_rows=[[(renumbered[row], weight) for row, weight in parts] for parts in step_cond.cond_rows],
        row_image=[step_cond.row_image[row] for row in keep],
    )
