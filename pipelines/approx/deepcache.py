"""DeepCache (Ma, Fang & Wang 2023): reuse a UNet's deep features across denoising steps.

Adjacent denoising steps change the UNet's deep, low-resolution features very little, while the
shallow, full-resolution path carries the step-to-step detail. So every `interval` UNet calls the
whole UNet runs and the input of the last `shallow_layers` layers of its final up block is kept;
on the calls in between only the shallow branch runs: the time/text embeddings, `conv_in`, the
first layers of the first down block (the skip connections that branch needs), then the final up
block's last layers on the cached feature, and the output head. `shallow_layers=1` is the paper's
cheapest branch (the one its Stable Diffusion results use); `interval=1` is the plain UNet.

Installed as a wrapper around `UNet2DConditionModel.forward` (the module, its weights and LoRA
matching are untouched); `remove_deepcache` restores the plain forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

_STATE = "_mixkit_deepcache"
_COMPILED_MARKER = "_mixkit_eager_forward"  # set by mixkit.runtime.compile on a compiled UNet
_SUPPORTED_BLOCKS = {"CrossAttnDownBlock2D", "DownBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"}


@dataclass(frozen=True)
class DeepCacheSettings:
    """`interval`: run the full UNet every N calls (1 = always, exact). `shallow_layers`: how many
    layers of the final up block are recomputed on cached calls (1 .. layers in that block)."""

    interval: int
    shallow_layers: int = 1

    def __post_init__(self) -> None:
        check_deepcache_interval(self.interval)
        if isinstance(self.shallow_layers, bool) or not isinstance(self.shallow_layers, int) or self.shallow_layers < 1:
            raise ValueError(f"shallow_layers must be an integer >= 1, got {self.shallow_layers!r}")


def check_deepcache_interval(interval: object) -> int:
    if isinstance(interval, bool) or not isinstance(interval, int) or not 1 <= interval <= 50:
        raise ValueError(f"DeepCache interval must be an integer in [1, 50] (full UNet every N steps), got {interval!r}")
    return interval


@dataclass
class DeepCacheState:
    """The cached feature and counters of one installed DeepCache."""

    settings: DeepCacheSettings
    feature: torch.Tensor | None = None
    feature_key: tuple | None = None  # (input shape, dtype, device) the feature belongs to
    position: int = 0  # UNet calls since the start of the current trajectory
    last_timestep: float | None = None
    full_calls: int = 0
    cached_calls: int = 0
    capturing: bool = field(default=False, repr=False)

    def reset(self) -> None:
        """Forget the cached feature: the next call runs the full UNet."""
        self.feature, self.feature_key, self.position, self.last_timestep = None, None, 0, None


def apply_deepcache(unet: torch.nn.Module, settings: DeepCacheSettings) -> DeepCacheState:
    """Wrap `unet.forward` with DeepCache; returns the state (counters, `reset()`).

    Raises ValueError, changing nothing, for a UNet it cannot serve: a compiled or OpenVINO UNet
    (their graphs fix the control flow), or block types whose layers it does not know.
    """
    check_deepcache_unet(unet, settings)
    remove_deepcache(unet)
    state = DeepCacheState(settings)
    plain_forward = unet.forward
    hook = _install_capture_hook(unet, settings.shallow_layers, state)

    def forward(sample, timestep, encoder_hidden_states, *args, **kwargs):
        if args:
            raise TypeError("a DeepCache UNet takes everything after encoder_hidden_states as keyword arguments")
        if _should_run_full(state, sample, timestep):
            state.capturing = True
            try:
                output = plain_forward(sample, timestep, encoder_hidden_states, **kwargs)
            finally:
                state.capturing = False
            state.feature_key = _key(sample)
            state.full_calls += 1
            return output
        state.cached_calls += 1
        result = shallow_forward(unet, state.feature, settings.shallow_layers, sample, timestep,
                                 encoder_hidden_states, **kwargs)
        return result if kwargs.get("return_dict", True) else (result.sample,)

    unet.forward = forward
    unet.__dict__[_STATE] = (state, hook)
    return state


def remove_deepcache(unet: torch.nn.Module) -> bool:
    """Restore the plain forward; False if DeepCache was not installed."""
    installed = unet.__dict__.pop(_STATE, None)
    if installed is None:
        return False
    installed[1].remove()
    unet.__dict__.pop("forward", None)
    return True


def deepcache_state(unet: torch.nn.Module) -> DeepCacheState | None:
    installed = unet.__dict__.get(_STATE)
    return None if installed is None else installed[0]


def check_deepcache_unet(unet: object, settings: DeepCacheSettings) -> None:
    """Refuse UNets DeepCache cannot wrap, naming what to change."""
    from diffusers import UNet2DConditionModel

    if not isinstance(unet, UNet2DConditionModel):
        raise ValueError(f"DeepCache needs a diffusers UNet2DConditionModel, got {type(unet).__name__} "
                         "(the openvino backend replaces the UNet with a compiled graph): use backend 'torch'")
    if _COMPILED_MARKER in unet.__dict__ or ("forward" in unet.__dict__ and _STATE not in unet.__dict__):
        raise ValueError("DeepCache cannot wrap a compiled UNet (torch.compile fixes the control flow it changes); "
                         "drop compile / backend 'torch.compile' or do not use DeepCache")
    first, last = unet.down_blocks[0], unet.up_blocks[-1]
    for block in (first, last):
        if type(block).__name__ not in _SUPPORTED_BLOCKS:
            raise ValueError(f"DeepCache supports UNets whose outer blocks are {sorted(_SUPPORTED_BLOCKS)}; "
                             f"this one has {type(block).__name__}")
    layers = len(last.resnets)
    if last.upsamplers is not None or layers != len(first.resnets) + 1:
        raise ValueError("DeepCache expects the final up block to have one layer more than the first down block "
                         f"and no upsampler (diffusers' SD layout); got {layers} and {len(first.resnets)}")
    if settings.shallow_layers > layers:
        raise ValueError(f"shallow_layers={settings.shallow_layers} exceeds the {layers} layers of the UNet's final "
                         f"up block; use 1 .. {layers}")


def _install_capture_hook(unet, shallow_layers: int, state: DeepCacheState):
    """Record, on full calls, the feature that enters the first recomputed layer of the final up block."""
    last = unet.up_blocks[-1]
    first_recomputed = len(last.resnets) - shallow_layers
    if first_recomputed == 0:
        def keep_block_input(module, args, kwargs):
            if state.capturing:
                state.feature = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        return last.register_forward_pre_hook(keep_block_input, with_kwargs=True)
    layers = last.attentions if hasattr(last, "attentions") else last.resnets

    def keep_layer_output(module, args, output):
        if state.capturing:
            state.feature = output[0] if isinstance(output, tuple) else output
    return layers[first_recomputed - 1].register_forward_hook(keep_layer_output)


def _key(sample: torch.Tensor) -> tuple:
    return tuple(sample.shape), sample.dtype, sample.device


def _should_run_full(state: DeepCacheState, sample: torch.Tensor, timestep) -> bool:
    """Full on every `interval`-th call of a trajectory, and whenever the cache cannot serve this call.

    A timestep above the previous one means a new trajectory (the next image, a hires pass):
    the cached feature belongs to another image. A repeated timestep (second-order samplers
    evaluate twice per step) is the same trajectory.
    """
    t = float(torch.as_tensor(timestep).flatten()[0]) if torch.as_tensor(timestep).numel() else 0.0
    if state.last_timestep is not None and t > state.last_timestep:
        state.reset()
    state.last_timestep = t
    full = (state.position % state.settings.interval == 0 or state.feature is None
            or state.feature_key != _key(sample))
    state.position += 1
    return full


def shallow_forward(unet, feature: torch.Tensor, shallow_layers: int, sample: torch.Tensor, timestep,
                    encoder_hidden_states: torch.Tensor, class_labels=None, timestep_cond=None, attention_mask=None,
                    cross_attention_kwargs=None, added_cond_kwargs=None, down_block_additional_residuals=None,
                    mid_block_additional_residual=None, down_intrablock_additional_residuals=None,
                    encoder_attention_mask=None, return_dict: bool = True):
    """The UNet's output computed from `feature` (cached deep feature) and the shallow branch only.

    Given the feature captured from a full call with the same inputs, this equals that full call.
    """
    from diffusers.models.unets.unet_2d_condition import UNet2DConditionOutput

    del mid_block_additional_residual, return_dict  # the mid block is part of the cached deep path
    if down_intrablock_additional_residuals is not None:
        raise ValueError("DeepCache does not support T2I-Adapter residuals (down_intrablock_additional_residuals); "
                         "turn DeepCache off for adapter generations")
    first, last = unet.down_blocks[0], unet.up_blocks[-1]
    if all(getattr(last, name, None) for name in ("s1", "s2", "b1", "b2")):
        raise ValueError("DeepCache and FreeU cannot be combined (FreeU rescales the skip features DeepCache "
                         "reuses); disable one of them")
    if attention_mask is not None:  # the same mask-to-bias conversion the full forward does
        attention_mask = ((1 - attention_mask.to(sample.dtype)) * -10000.0).unsqueeze(1)
    if encoder_attention_mask is not None:
        encoder_attention_mask = ((1 - encoder_attention_mask.to(sample.dtype)) * -10000.0).unsqueeze(1)
    emb, encoder_hidden_states, sample = _embeddings(unet, sample, timestep, encoder_hidden_states, class_labels,
                                                     timestep_cond, added_cond_kwargs)
    attention = dict(encoder_hidden_states=encoder_hidden_states, cross_attention_kwargs=cross_attention_kwargs,
                     attention_mask=attention_mask, encoder_attention_mask=encoder_attention_mask, return_dict=False)

    # Skip features, shallowest first: conv_in, then the first down block's layers.
    hidden = unet.conv_in(sample)
    skips = [hidden]
    for index in range(shallow_layers - 1):
        hidden = first.resnets[index](hidden, emb)
        if hasattr(first, "attentions"):
            hidden = first.attentions[index](hidden, **attention)[0]
        skips.append(hidden)
    if down_block_additional_residuals is not None:  # ControlNet adds to the skips, shallowest first
        skips = [skip + residual for skip, residual in zip(skips, down_block_additional_residuals)]

    # The final up block's last layers consume those skips deepest-first, on the cached feature.
    hidden = feature
    layers = len(last.resnets)
    for index in range(layers - shallow_layers, layers):
        hidden = torch.cat([hidden, skips[layers - 1 - index]], dim=1)
        hidden = last.resnets[index](hidden, emb)
        if hasattr(last, "attentions"):
            hidden = last.attentions[index](hidden, **attention)[0]
    if unet.conv_norm_out is not None:
        hidden = unet.conv_act(unet.conv_norm_out(hidden))
    return UNet2DConditionOutput(sample=unet.conv_out(hidden))


def _embeddings(unet, sample, timestep, encoder_hidden_states, class_labels, timestep_cond, added_cond_kwargs):
    """Time (+class, +SDXL text-time) embedding and projected text states, as the full forward makes them."""
    if unet.config.center_input_sample:
        sample = 2 * sample - 1.0
    emb = unet.time_embedding(unet.get_time_embed(sample=sample, timestep=timestep), timestep_cond)
    class_emb = unet.get_class_embed(sample=sample, class_labels=class_labels)
    if class_emb is not None:
        emb = torch.cat([emb, class_emb], dim=-1) if unet.config.class_embeddings_concat else emb + class_emb
    if unet.config.addition_embed_type == "image_hint":
        raise ValueError("DeepCache does not support image-hint (Kandinsky) UNets")
    aug_emb = unet.get_aug_embed(emb=emb, encoder_hidden_states=encoder_hidden_states,
                                 added_cond_kwargs=added_cond_kwargs)
    if aug_emb is not None:
        emb = emb + aug_emb
    if unet.time_embed_act is not None:
        emb = unet.time_embed_act(emb)
    encoder_hidden_states = unet.process_encoder_hidden_states(encoder_hidden_states=encoder_hidden_states,
                                                               added_cond_kwargs=added_cond_kwargs)
    return emb, encoder_hidden_states, sample
