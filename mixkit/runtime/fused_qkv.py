"""Fused QKV projections for diffusers attention, kept in step with LoRA merges.

One [3C, C] GEMM instead of three [C, C] ones reads the activations once and gives the matmul
kernel a wider N, which is what pays on CPU (oneDNN) and GPU alike. diffusers' own
`fuse_qkv_projections` copies the weights into a new layer, so a LoRA later merged into `to_q`
would be silently ignored; here `to_q` / `to_k` / `to_v` become *views* into the fused weight, so
an in-place merge (mixkit's "merge" mode) updates both. The processor checks, per call, that the
views still share storage and that no runtime LoRA patch sits on a projection; otherwise it runs
the unfused path, so fusion can never change what a model computes beyond rounding.
"""

from __future__ import annotations

import torch
from torch import nn

from mixkit.attention import MixkitAttnProcessor, attention
from mixkit.forward_patches import has_foreign_forward


def _is_plain_linear(module: nn.Module) -> bool:
    """No runtime patch (a foreign instance forward, hooks) that the fused GEMM would bypass; the layer's own forward
    put back as an instance attribute is the plain call."""
    return (type(module) is nn.Linear and not has_foreign_forward(module)
            and not module._forward_hooks and not module._forward_pre_hooks)


def _shares_storage(parts: list[nn.Linear], fused: nn.Linear) -> bool:
    base = fused.weight.untyped_storage().data_ptr()
    return all(p.weight.untyped_storage().data_ptr() == base for p in parts) and all(_is_plain_linear(p) for p in parts)


def _fused_projections(attn, hidden_states, encoder_hidden_states):
    """(q, k, v) from the fused layers, or None when the fused weights cannot be trusted."""
    if encoder_hidden_states is None:
        fused = getattr(attn, "to_qkv", None)
        if fused is None or not _shares_storage([attn.to_q, attn.to_k, attn.to_v], fused):
            return None
        return fused(hidden_states).chunk(3, dim=-1)
    fused = getattr(attn, "to_kv", None)
    if fused is None or not _shares_storage([attn.to_k, attn.to_v], fused) or not _is_plain_linear(attn.to_q):
        return None
    if attn.norm_cross:
        encoder_hidden_states = attn.norm_encoder_hidden_states(encoder_hidden_states)
    key, value = fused(encoder_hidden_states).chunk(2, dim=-1)
    return attn.to_q(hidden_states), key, value


class FusedQkvAttnProcessor(MixkitAttnProcessor):
    """MixkitAttnProcessor with one projection GEMM for the common transformer-block case.

    Anything unusual (spatial/group norm, 4-D maps, masks, q/k norms, residual attention as in the
    VAE) goes to the parent processor unchanged.
    """

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None,
                 *args, **kwargs):
        simple = (hidden_states.ndim == 3 and attention_mask is None and attn.spatial_norm is None
                  and attn.group_norm is None and attn.norm_q is None and attn.norm_k is None)
        projections = _fused_projections(attn, hidden_states, encoder_hidden_states) if simple else None
        if projections is None:
            return super().__call__(attn, hidden_states, encoder_hidden_states, attention_mask, temb, *args, **kwargs)
        query, key, value = projections
        batch, heads = hidden_states.shape[0], attn.heads
        head_dim = key.shape[-1] // heads
        query, key, value = (x.reshape(batch, -1, heads, head_dim).transpose(1, 2) for x in (query, key, value))
        out = attention(query, key, value, scale=attn.scale)
        out = out.transpose(1, 2).reshape(batch, -1, heads * head_dim).to(query.dtype)
        out = attn.to_out[1](attn.to_out[0](out))
        if attn.residual_connection:
            out = out + hidden_states
        return out / attn.rescale_output_factor


def _view_rows(fused: nn.Linear, parts: list[nn.Linear]) -> None:
    start = 0
    for part in parts:
        rows = part.weight.shape[0]
        part.weight = nn.Parameter(fused.weight[start:start + rows], requires_grad=False)
        if part.bias is not None and fused.bias is not None:
            part.bias = nn.Parameter(fused.bias[start:start + rows], requires_grad=False)
        start += rows


@torch.no_grad()
def fuse_qkv(model: nn.Module) -> int:
    """Fuse the projections of every diffusers `Attention` in `model`; returns how many were fused.

    Do it after any dtype/device change: `.to()` replaces parameters and breaks the weight
    sharing (the processor then notices and runs unfused, correctly but without the speed-up).
    """
    from diffusers.models.attention_processor import Attention

    from diffusers.models.attention_processor import AttnProcessor, AttnProcessor2_0

    # Processors carrying extra behaviour (IP-Adapter, sliced, custom) are left alone, unfused.
    replaceable = (AttnProcessor, AttnProcessor2_0, MixkitAttnProcessor, FusedQkvAttnProcessor)
    processor = FusedQkvAttnProcessor()
    count = 0
    for module in model.modules():
        if (not isinstance(module, Attention) or module.added_kv_proj_dim is not None
                or type(module.processor) not in replaceable):
            continue
        if getattr(module, "to_qkv", None) is None and getattr(module, "to_kv", None) is None:
            module.fuse_projections(fuse=True)
            if module.is_cross_attention:
                _view_rows(module.to_kv, [module.to_k, module.to_v])
            else:
                _view_rows(module.to_qkv, [module.to_q, module.to_k, module.to_v])
        module.set_processor(processor)
        count += 1
    return count
