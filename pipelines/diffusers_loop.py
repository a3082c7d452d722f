"""What mixkit's own runs of diffusers' denoising loops share (text to audio, text to video).

Those pipelines keep diffusers' weights, prompt encoding and decoding but run the loop here, so that a clip or a
video takes what an SD image takes: a seed or a torch generator, a step callback with `StepProgress` and Interrupt
through `GenerationControl`. The checks of those inputs and the progress/Interrupt bookkeeping are the same for
both; what a step computes (and which denoised estimate an interrupted run hands back) is each pipeline's own.
"""

from __future__ import annotations

import numbers
import random
from typing import Any, Callable

from pipelines.control import GenerationControl, StepProgress


def check_int(name: str, value: Any, low: int, high: int) -> None:
    """Raise ValueError unless `value` is an integer (not a bool) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}.")


def check_prompts(prompt: Any, negative_prompt: Any) -> None:
    for name, value in (("prompt", prompt), ("negative_prompt", negative_prompt)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {type(value).__name__}.")


def check_cfg_scale(cfg_scale: Any, high: float) -> None:
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(cfg_scale, bool) or not isinstance(cfg_scale, numbers.Real) or not 0 <= cfg_scale <= high:
        raise ValueError(f"cfg_scale must be a number in [0, {high:g}], got {cfg_scale!r} (1 or less: no "
                         "classifier-free guidance).")


def check_generator(generator: Any, seed: Any) -> None:
    """A caller's generator replaces the seed: both at once would leave the seed silently unused."""
    if generator is None:
        return
    import torch

    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}.")
    if seed != -1:
        raise ValueError("Pass seed= or generator=, not both: the generator's state would decide the noise and "
                         f"seed={seed} would be ignored.")


def seeded_generator(seed: int, generator: Any) -> tuple[int, Any]:
    """(seed, generator) for one call: -1 draws a seed, as A1111 does; a caller's generator is used as it is."""
    if generator is not None:
        return seed, generator
    import torch

    from pipelines.params import RANDOM_SEED_MAX

    seed = random.randint(0, RANDOM_SEED_MAX) if seed == -1 else int(seed)
    return seed, torch.Generator("cpu").manual_seed(seed)


def guided_prediction(noise_pred, cfg_scale: float, guided: bool, step: int, made: str):
    """The UNet's output after classifier-free guidance (its batch: unconditional, conditional), refused when not
    finite; `made` names what would have been made ("audio", "video")."""
    import torch

    if guided:
        uncond, cond = noise_pred.chunk(2)
        noise_pred = uncond + cfg_scale * (cond - uncond)
    if not torch.isfinite(noise_pred).all():
        raise ValueError(f"The UNet produced NaN/inf at step {step}: an fp16 overflow (load the model in float32 or "
                         f"bf16) or broken weights; no {made} was made.")
    return noise_pred


class LoopProgress:
    """Reports the user's steps over a loop's model calls and says when Interrupt stops it.

    A scheduler may take more model calls than steps (PNDM's warm-up, Heun's two per step): progress counts the
    user's steps, and Interrupt is honoured when a step completes, never after the last call (the run is done)."""

    def __init__(self, steps: int, calls: int, callback: Callable[[StepProgress], Any] | None,
                 control: GenerationControl) -> None:
        self.steps, self.calls, self.callback, self.control = steps, calls, callback, control
        self.done = 0

    def stop_after(self, index: int, latents) -> bool:
        """Call after model call `index` (0-based) made `latents`; True when the loop must stop there."""
        completed = (index + 1) * self.steps // self.calls
        if completed <= self.done:
            return False
        self.done = completed
        if self.callback is not None:
            self.callback(StepProgress(completed, self.steps, 0, 1, latents, self.control))
        return self.control.interrupted and index < self.calls - 1
