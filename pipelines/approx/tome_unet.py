"""Token merging (ToMe for SD) installed on a diffusers UNet: approximate, opt-in, removable.

Per the paper, only self-attention is merged, and only in the transformer blocks at the UNet's
full latent resolution (`max_downsample=1`): that is where the token count (and attention's
quadratic cost) is highest, and merging deeper levels costs quality for little time. Tokens are
matched on each transformer block's input; attention runs on the merged tokens and its output is
unmerged before the residual add, so the block's shape and everything after it are unchanged.

The destination token of each 2x2 window is drawn at random (the paper's choice; a fixed corner
leaves grid artefacts) from a generator seeded with the timestep, so a generation is
reproducible no matter what ran before it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pipelines.approx.token_merging import TokenMerge, plan_token_merge, tokens_to_merge

MAX_RATIO = 0.75  # with stride 2 at most 3 of every 4 tokens are sources: more cannot be merged
_STATE = "_mixkit_tome"


@dataclass(frozen=True)
class TokenMergingSettings:
    """ToMe parameters: `ratio` of self-attention tokens removed, in [0, 0.75]."""

    ratio: float
    max_downsample: int = 1  # merge at latent size / 1 only (1, 2, 4 or 8)
    stride: int = 2
    random_destinations: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        check_tome_ratio(self.ratio)
        if self.max_downsample not in (1, 2, 4, 8):
            raise ValueError(f"max_downsample must be 1, 2, 4 or 8, got {self.max_downsample!r}")
        if not isinstance(self.stride, int) or self.stride < 2:
            raise ValueError(f"stride must be an integer >= 2, got {self.stride!r}")


def check_tome_ratio(ratio: object) -> float:
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) \
            or not 0 <= ratio <= MAX_RATIO:
        raise ValueError(f"ToMe ratio must be a number in [0, {MAX_RATIO}] (share of self-attention tokens merged), "
                         f"got {ratio!r}")
    return float(ratio)


class _RunState:
    """What the UNet-level hook learns once per call and every block needs: latent size, generator."""

    def __init__(self, settings: TokenMergingSettings) -> None:
        self.settings = settings
        self.latent_size: tuple[int, int] | None = None
        self.generator: torch.Generator | None = None
        self.merged_layers = 0  # how many attention calls ran on merged tokens (tests, benchmarks)


class TokenMergingAttnProcessor:
    """Wraps a self-attention processor: merge -> the original processor -> unmerge."""

    def __init__(self, inner, run: _RunState) -> None:
        self.inner = inner
        self.run = run
        self.pending: TokenMerge | None = None  # set by the block's pre-hook, used once

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, **kwargs):
        plan, self.pending = self.pending, None
        if plan is None or encoder_hidden_states is not None or hidden_states.ndim != 3:
            return self.inner(attn, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **kwargs)
        self.run.merged_layers += 1
        output = self.inner(attn, plan.merge(hidden_states), attention_mask=attention_mask, **kwargs)
        return plan.unmerge(output)


def apply_token_merging(unet: torch.nn.Module, settings: TokenMergingSettings) -> int:
    """Install ToMe on every transformer block of `unet` (replacing an earlier install).

    Returns the number of self-attention layers wrapped. Undo with `remove_token_merging`.
    Attention processors set on the UNet afterwards would replace the wrappers, so `optimize` refuses
    a model with approximations installed: apply optimisations first, approximations last.
    """
    from diffusers.models.attention import BasicTransformerBlock

    remove_token_merging(unet)
    run = _RunState(settings)
    handles = [unet.register_forward_pre_hook(lambda module, args, kwargs: _start_call(run, args, kwargs),
                                              with_kwargs=True)]
    wrapped = []
    unet.__dict__[_STATE] = (run, handles, wrapped)  # filled below; what is there is undone if the loop fails
    try:
        for block in unet.modules():
            if not isinstance(block, BasicTransformerBlock) or block.attn1 is None or block.only_cross_attention:
                continue
            processor = TokenMergingAttnProcessor(block.attn1.processor, run)
            wrapped.append((block.attn1, processor))
            block.attn1.set_processor(processor)
            handles.append(block.register_forward_pre_hook(
                lambda module, args, kwargs, processor=processor: _plan_block(run, processor, args, kwargs),
                with_kwargs=True))
    except BaseException:
        remove_token_merging(unet)  # an interruption half way leaves no block wrapped or hooked
        raise
    return len(wrapped)


def remove_token_merging(unet: torch.nn.Module) -> bool:
    """Restore the original attention processors and drop the hooks; False if ToMe was not installed."""
    state = unet.__dict__.pop(_STATE, None)
    if state is None:
        return False
    _run, handles, wrapped = state
    for handle in handles:
        handle.remove()
    for attention, processor in wrapped:
        if attention.processor is processor:
            attention.set_processor(processor.inner)
    return True


def token_merging_state(unet: torch.nn.Module) -> _RunState | None:
    state = unet.__dict__.get(_STATE)
    return None if state is None else state[0]


def _start_call(run: _RunState, args: tuple, kwargs: dict) -> None:
    sample = args[0] if args else kwargs["sample"]
    timestep = args[1] if len(args) > 1 else kwargs.get("timestep", 0)
    run.latent_size = (int(sample.shape[-2]), int(sample.shape[-1]))
    if run.settings.random_destinations:
        steps = torch.as_tensor(timestep).flatten()
        step = int(steps[0].item()) if steps.numel() else 0
        run.generator = torch.Generator().manual_seed(run.settings.seed * 100_003 + step)


def _plan_block(run: _RunState, processor: TokenMergingAttnProcessor, args: tuple, kwargs: dict) -> None:
    hidden_states = args[0] if args else kwargs.get("hidden_states")
    processor.pending = None
    if run.latent_size is None or hidden_states is None or hidden_states.ndim != 3:
        return
    grid = _token_grid(run.latent_size, hidden_states.shape[1], run.settings.max_downsample)
    removed = tokens_to_merge(hidden_states.shape[1], run.settings.ratio)
    if grid is None or removed == 0:
        return
    height, width = grid
    stride = run.settings.stride
    choice = None
    if run.settings.random_destinations:
        choice = torch.randint(stride * stride, (height // stride, width // stride), generator=run.generator)
    processor.pending = plan_token_merge(hidden_states, height, width, removed, stride=stride, choice=choice)


def _token_grid(latent_size: tuple[int, int], tokens: int, max_downsample: int) -> tuple[int, int] | None:
    """The (height, width) grid of a block with `tokens` tokens, or None where ToMe does not apply."""
    latent_h, latent_w = latent_size
    downsample = max(1, math.ceil(math.sqrt(latent_h * latent_w / tokens)))
    if downsample > max_downsample:
        return None
    height, width = math.ceil(latent_h / downsample), math.ceil(latent_w / downsample)
    return (height, width) if height * width == tokens else None
