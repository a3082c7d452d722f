"""Route diffusers' UNet / VAE / ControlNet attention through `mixkit.attention.attention`.

diffusers' `Attention` modules delegate their math to a swappable "processor". `MixkitAttnProcessor`
reproduces the semantics of diffusers' default `AttnProcessor2_0` (spatial norm, 4-D feature maps,
group norm, cross-attention with `norm_cross`, q/k norms, masks, residual, output rescale) and
calls `attention()` for the kernel, so one global switch (`set_attention_backend` /
`attention_backend`) decides the kernel for every diffusers model that went through
`apply_to_diffusers`.

diffusers is imported inside the functions, so `import mixkit.attention` stays light.
"""

from __future__ import annotations

import torch

from mixkit.attention.dispatch import attention

_MAX_LISTED = 5


class MixkitAttnProcessor:
    """A diffusers attention processor whose kernel is chosen by `mixkit.attention`."""

    def __call__(self, attn, hidden_states: torch.Tensor, encoder_hidden_states: torch.Tensor | None = None,
                 attention_mask: torch.Tensor | None = None, temb: torch.Tensor | None = None,
                 *args, **kwargs) -> torch.Tensor:
        # *args/**kwargs: diffusers passes a deprecated `scale` kwarg to every processor; it is ignored
        # by its own processors too (LoRA scale travels via cross_attention_kwargs to the layers).
        residual = hidden_states
        if attn.spatial_norm is not None:
            hidden_states = attn.spatial_norm(hidden_states, temb)

        input_ndim = hidden_states.ndim
        if input_ndim == 4:  # VAE mid-block attention runs on [B, C, H, W] feature maps
            batch_size, channels, height, width = hidden_states.shape
            hidden_states = hidden_states.view(batch_size, channels, height * width).transpose(1, 2)

        context = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        batch_size, key_length = context.shape[0], context.shape[1]
        if attention_mask is not None:
            # diffusers' masks are additive biases [B or B*heads, 1 or Lq, Lk]; make them [B, heads, ., Lk].
            attention_mask = attn.prepare_attention_mask(attention_mask, key_length, batch_size)
            attention_mask = attention_mask.view(batch_size, attn.heads, -1, attention_mask.shape[-1])

        if attn.group_norm is not None:
            hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)

        query = attn.to_q(hidden_states)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        elif attn.norm_cross:
            encoder_hidden_states = attn.norm_encoder_hidden_states(encoder_hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        head_dim = key.shape[-1] // attn.heads
        query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)

        # attn.scale is head_dim**-0.5, or 1.0 for modules built with scale_qk=False (for which
        # diffusers itself falls back to the scale-honouring AttnProcessor).
        if attention_mask is not None and attention_mask.dtype != torch.bool:
            # UNets build the bias in the dtype of `sample`, which may differ from the weights' dtype.
            attention_mask = attention_mask.to(query.dtype)
        hidden_states = self.attend(query, key, value, attention_mask, attn.scale)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)

        hidden_states = attn.to_out[0](hidden_states)  # output projection
        hidden_states = attn.to_out[1](hidden_states)  # dropout
        if input_ndim == 4:
            hidden_states = hidden_states.transpose(-1, -2).reshape(batch_size, channels, height, width)
        if attn.residual_connection:
            hidden_states = hidden_states + residual
        return hidden_states / attn.rescale_output_factor


    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
               scale: float) -> torch.Tensor:
        """The kernel call on [B, heads, L, D] tensors; subclasses change how it is split, never who runs it."""
        return attention(query, key, value, attn_mask=mask, scale=scale)


class SlicedMixkitAttnProcessor(MixkitAttnProcessor):
    """`MixkitAttnProcessor` that runs attention over `slice_size` (batch x head) rows at a time.

    The memory mode diffusers calls attention slicing (`SlicedAttnProcessor`): the [tokens x tokens]
    score matrix exists for one slice of heads at a time. Each slice still goes through
    `mixkit.attention.attention`, so the backend the user chose (and its refusals) applies to every
    slice; rows are independent in attention, so the result equals the unsliced call up to the
    kernel's rounding.
    """

    def __init__(self, slice_size: int) -> None:
        if isinstance(slice_size, bool) or not isinstance(slice_size, int) or slice_size < 1:
            raise ValueError(f"slice_size must be a positive integer (batch x head rows per slice), got {slice_size!r}")
        self.slice_size = slice_size

    def attend(self, query, key, value, mask, scale):
        batch, heads = query.shape[:2]
        rows = batch * heads
        if rows <= self.slice_size:
            return attention(query, key, value, attn_mask=mask, scale=scale)
        flat = [x.reshape(1, rows, *x.shape[2:]) for x in (query, key, value)]
        if mask is not None:  # [B or 1, heads or 1, Lq or 1, Lk] -> one row per (batch, head)
            mask = mask.expand(batch, heads, *mask.shape[2:]).reshape(1, rows, *mask.shape[2:])
        out = [attention(flat[0][:, start:start + self.slice_size], flat[1][:, start:start + self.slice_size],
                         flat[2][:, start:start + self.slice_size],
                         attn_mask=None if mask is None else mask[:, start:start + self.slice_size], scale=scale)
               for start in range(0, rows, self.slice_size)]
        return torch.cat(out, dim=1).reshape(batch, heads, *out[0].shape[2:])


def _replaceable_processor_types() -> tuple[type, ...]:
    from diffusers.models.attention_processor import AttnProcessor, AttnProcessor2_0

    return (AttnProcessor, AttnProcessor2_0, MixkitAttnProcessor)


def apply_to_diffusers(model: torch.nn.Module) -> int:
    """Give every diffusers `Attention` in `model` (UNet, VAE, ControlNet, ...) a `MixkitAttnProcessor`.

    Only modules still on diffusers' plain processors are converted; a module with a processor that
    carries extra behaviour (IP-Adapter, custom diffusion, fused QKV, added KV projections, sliced
    attention) would lose it, so then nothing is changed and a ValueError lists those modules.
    Returns the number of attention modules now routed through `mixkit.attention`.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"apply_to_diffusers expects a torch.nn.Module (UNet, VAE, ControlNet), got {type(model).__name__}")
    from diffusers.models.attention_processor import Attention

    targets = [(name, module) for name, module in model.named_modules() if isinstance(module, Attention)]
    if not targets:
        raise ValueError(f"apply_to_diffusers: {type(model).__name__} contains no diffusers Attention module; "
                         "pass a diffusers UNet, VAE or ControlNet (not a pipeline: pass pipe.unet, pipe.vae, ...)")
    replaceable = _replaceable_processor_types()
    blocked = [f"{name} ({type(module.processor).__name__})" for name, module in targets
               if type(module.processor) not in replaceable or module.added_kv_proj_dim is not None]
    if blocked:
        listed = ", ".join(blocked[:_MAX_LISTED]) + (f" and {len(blocked) - _MAX_LISTED} more" if len(blocked) > _MAX_LISTED else "")
        raise ValueError(
            f"apply_to_diffusers: {len(blocked)} attention module(s) of {type(model).__name__} use processors "
            f"mixkit cannot stand in for without dropping their behaviour: {listed}. Nothing was changed. "
            "Apply mixkit attention before loading IP-Adapters or fusing projections, or call "
            "model.set_default_attn_processor() first.")
    processor = MixkitAttnProcessor()  # stateless, so one instance serves every module
    for _, module in targets:
        module.set_processor(processor)
    return len(targets)
