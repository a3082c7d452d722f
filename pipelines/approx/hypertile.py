"""HyperTile for one generation: tiled self-attention in the U-Net (and the VAE decoder), installed and removed.

Approximate: tokens attend only to the tokens of their own tile, so the image changes (details, not composition,
when the tiles are large). It is switched on for one call with `hypertile_call(...)` and always switched back, also
when the call fails (as `pipelines.tiling` does for A1111's Tiling), so a model shared by other requests never keeps
it. It wraps the self-attention processors (`attn1` of every transformer block; the VAE decoder's mid-block
attention): the tokens are split into tiles along the batch axis, the original processor runs, and the tiles are put
back, so any attention kernel (mixkit's, diffusers') runs inside.

The tile draws come from a `random.Random` seeded with the call's first image seed, as A1111 seeds its Hypertile RNG
from `p.all_seeds[0]`, so a generation is reproducible from its seed and its infotext.
"""

from __future__ import annotations

import contextlib
import math
import random
from typing import Iterator

from pipelines.approx.hypertile_settings import HyperTile
from pipelines.approx.hypertile_tiles import (LATENT_FACTOR, choose_tile_count, merge_maps, merge_tokens,
                                              min_tile_cells, split_maps, split_tokens)

_STATE = "_mixkit_hypertile"


class _Run:
    """What the U-Net's pre-hook learns at every call (its latent size), and the call's random draws."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.latent_size: tuple[int, int] | None = None
        self.tiled_calls = 0  # attention calls that ran on more than one tile (tests, benchmarks)


class HyperTileUNetProcessor:
    """Wraps a U-Net self-attention processor: split the token grid into tiles -> the processor -> merge."""

    def __init__(self, inner, run: _Run, settings: HyperTile, first_level: int) -> None:
        self.inner = inner
        self.run = run
        self.settings = settings
        self.first_level = first_level  # log2 of the downsampling of the U-Net's first level with attention

    # diffusers passes a processor only the keywords its signature names, so `temb` is named here
    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None, **kwargs):
        if temb is not None:
            kwargs["temb"] = temb
        grid = None
        if encoder_hidden_states is None and attention_mask is None and hidden_states.ndim == 3:
            grid = self._grid(hidden_states.shape[1])
        if grid is None:
            return self.inner(attn, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **kwargs)
        height, width, depth = grid
        latent_h, latent_w = self.run.latent_size
        smallest = min_tile_cells(latent_w * LATENT_FACTOR, latent_h * LATENT_FACTOR, self.settings.unet_max_tile,
                                  depth)
        rows = choose_tile_count(height, smallest, self.settings.unet_swap_size, self.run.rng)
        cols = choose_tile_count(width, smallest, self.settings.unet_swap_size, self.run.rng)
        if rows * cols == 1:
            return self.inner(attn, hidden_states, **kwargs)
        self.run.tiled_calls += 1
        tiles = split_tokens(hidden_states, height, width, rows, cols)
        return merge_tokens(self.inner(attn, tiles, **kwargs), height, width, rows, cols)

    def _grid(self, tokens: int) -> tuple[int, int, int] | None:
        """(height, width, depth) of a level with `tokens` tokens; None when it is not tiled."""
        if self.run.latent_size is None:
            return None
        latent_h, latent_w = self.run.latent_size
        downsample = max(1, round(math.sqrt(latent_h * latent_w / tokens)))
        height, width = math.ceil(latent_h / downsample), math.ceil(latent_w / downsample)
        if height * width != tokens or downsample & (downsample - 1):
            return None
        depth = downsample.bit_length() - 1 - self.first_level
        return (height, width, depth) if 0 <= depth <= self.settings.unet_max_depth else None


class HyperTileVaeProcessor:
    """Wraps the VAE decoder's mid-block attention processor: [B, C, H, W] maps split into tiles along the batch."""

    def __init__(self, inner, run: _Run, settings: HyperTile) -> None:
        self.inner = inner
        self.run = run
        self.settings = settings

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None, **kwargs):
        kwargs.update({name: value for name, value in (("encoder_hidden_states", encoder_hidden_states),
                                                        ("attention_mask", attention_mask), ("temb", temb))
                       if value is not None})
        if hidden_states.ndim != 4 or encoder_hidden_states is not None or attention_mask is not None \
                or temb is not None:  # a spatial norm on temb (not in SD's VAEs) would need the whole map
            return self.inner(attn, hidden_states, **kwargs)
        height, width = hidden_states.shape[-2:]
        smallest = min_tile_cells(width * LATENT_FACTOR, height * LATENT_FACTOR, self.settings.vae_max_tile, 0)
        rows = choose_tile_count(height, smallest, self.settings.vae_swap_size, self.run.rng)
        cols = choose_tile_count(width, smallest, self.settings.vae_swap_size, self.run.rng)
        if rows * cols == 1:
            return self.inner(attn, hidden_states, **kwargs)
        self.run.tiled_calls += 1
        out = self.inner(attn, split_maps(hidden_states, rows, cols), **kwargs)
        return merge_maps(out, rows, cols)


def check_hypertile_model(model, settings: HyperTile) -> None:
    """ValueError before any work when `settings` cannot apply to `model`, saying why and what to do."""
    from diffusers import UNet2DConditionModel

    from pipelines.approx.labels import model_labels
    from pipelines.approx.tome_unet import token_merging_state

    unet = model.unet
    if settings.unet or settings.unet_hires:
        backend = model.extras.get("execution_backend")
        if not isinstance(unet, UNet2DConditionModel) or backend not in (None, "torch", "torch.compile"):
            raise ValueError(f"HyperTile tiles a diffusers U-Net's self-attention; this model's denoiser is "
                             f"{type(unet).__name__} (backend {backend or 'torch'!r}). Use a U-Net model (SD 1.x/2.x, "
                             "SDXL) on backend 'torch', or switch HyperTile's U-Net part off.")
        if "_mixkit_eager_forward" in unet.__dict__:  # mixkit.runtime.compile's marker
            raise ValueError("HyperTile cannot change a compiled U-Net's attention (the graph is fixed); drop compile "
                             "or HyperTile's U-Net part")
        if token_merging_state(unet) is not None:
            raise ValueError("HyperTile and ToMe both rearrange the U-Net's self-attention tokens and cannot be "
                             "combined; remove ToMe (approximate(pipe, tome=None)) or switch HyperTile's U-Net "
                             "part off")
    if settings.vae:
        if model_labels(model).taesd:
            raise ValueError("HyperTile VAE tiles the full VAE decoder's attention, but TAESD decodes this model's "
                             "images; remove TAESD or switch HyperTile's VAE part off")
        if not _vae_attentions(model.vae):
            raise ValueError(f"HyperTile VAE: this model's VAE ({type(model.vae).__name__}) has no decoder mid-block "
                             "attention to tile; switch HyperTile's VAE part off")


@contextlib.contextmanager
def hypertile_call(model, settings: HyperTile | None, seed: int, *,
                   hires_second_pass: bool = False) -> Iterator[_Run | None]:
    """Within the block, `model`'s self-attention runs tiled as `settings` says (None or nothing on: no change).

    `seed`: the call's first image seed (the tile draws' RNG). `hires_second_pass`: this call is a hires fix's second
    pass, where `settings.unet_hires` switches the U-Net part on too. Yields the run's state (None when off)."""
    use_unet = settings is not None and settings.unet_in(hires_second_pass)
    use_vae = settings is not None and settings.vae
    if not (use_unet or use_vae):
        yield None
        return
    check_hypertile_model(model, settings)
    run = _Run(seed)
    wrapped: list[tuple[object, object]] = []
    handles = []
    try:
        if use_unet:
            first_level = _first_attention_level(model.unet)
            handles.append(model.unet.register_forward_pre_hook(
                lambda module, args, kwargs: _start_unet_call(run, args, kwargs), with_kwargs=True))
            for attention in _unet_self_attentions(model.unet):
                wrapped.append((attention, attention.processor))
                attention.set_processor(HyperTileUNetProcessor(attention.processor, run, settings, first_level))
        if use_vae:
            for attention in _vae_attentions(model.vae):
                wrapped.append((attention, attention.processor))
                attention.set_processor(HyperTileVaeProcessor(attention.processor, run, settings))
        yield run
    finally:
        for handle in handles:
            handle.remove()
        for attention, processor in reversed(wrapped):
            attention.set_processor(processor)


def _start_unet_call(run: _Run, args: tuple, kwargs: dict) -> None:
    sample = args[0] if args else kwargs["sample"]
    run.latent_size = (int(sample.shape[-2]), int(sample.shape[-1]))


def _unet_self_attentions(unet) -> list:
    from diffusers.models.attention import BasicTransformerBlock

    return [block.attn1 for block in unet.modules()
            if isinstance(block, BasicTransformerBlock) and block.attn1 is not None and not block.only_cross_attention]


def _vae_attentions(vae) -> list:
    """The VAE decoder's mid-block attention modules (A1111 tiles `decoder.mid_block.attentions.0`)."""
    mid = getattr(getattr(vae, "decoder", None), "mid_block", None)
    return [attention for attention in getattr(mid, "attentions", None) or [] if attention is not None]


def _first_attention_level(unet) -> int:
    """The index of the U-Net's first down level with attention (SD 1.x/2.x: 0; SDXL, whose first level is
    convolution only: 1), so depth 0 is the largest level HyperTile can tile, as in A1111's layer tables."""
    for index, block in enumerate(unet.down_blocks):
        if getattr(block, "attentions", None):
            return index
    return 0
