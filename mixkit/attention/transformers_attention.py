"""Route transformers models' attention through `mixkit.attention.attention`.

transformers (>= 4.48, and 5.x) looks attention functions up by `config._attn_implementation` in
its `AttentionInterface`. We register one named "mixkit" that calls `attention()`, so a model set
to it follows mixkit's global / context-manager backend switch at every call. Its mask is built by
transformers' own SDPA mask builder (bool, True = attend, or None with `is_causal`), which is the
convention `attention()` speaks.

For users who prefer transformers' native kernels fixed at load time,
`transformers_attn_implementation()` maps a mixkit backend to the matching native string.
transformers is imported inside the functions, so `import mixkit.attention` stays light.
"""

from __future__ import annotations

import torch

from mixkit.attention.dispatch import AUTO, attention, get_attention_backend, resolve_backend_name
from mixkit.attention.masks import additive_mask, causal_bool_mask

MIXKIT_ATTN_IMPLEMENTATION = "mixkit"

_NATIVE_IMPLEMENTATION = {
    "math": "eager",
    "sdpa": "sdpa",
    "sdpa_flash": "sdpa",
    "sdpa_efficient": "sdpa",
    "sdpa_math": "sdpa",
    "flash_attn": "flash_attention_2",
}


def _repeat_kv(states: torch.Tensor, groups: int) -> torch.Tensor:
    # Grouped-query attention: each key/value head serves `groups` query heads.
    return states if groups == 1 else states.repeat_interleave(groups, dim=1)


def transformers_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                                   value: torch.Tensor, attention_mask: torch.Tensor | None,
                                   dropout: float = 0.0, scaling: float | None = None,
                                   is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """An `AttentionInterface` function: [B, H, L, D] in, ([B, Lq, H, D], no weights) out."""
    for unsupported in ("softcap", "s_aux", "sinks"):
        if kwargs.get(unsupported) is not None:
            raise ValueError(f"mixkit attention does not implement {unsupported!r} (used by {type(module).__name__}); "
                             "load this model with attn_implementation='eager' or 'sdpa'")
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = _repeat_kv(key, groups), _repeat_kv(value, groups)
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    # Same rule as transformers' SDPA path: the mask builder returns None when the mask is purely
    # causal, and a single query token (decoding) attends to everything in the cache.
    is_causal = bool(is_causal and attention_mask is None and query.shape[2] > 1)
    position_bias = kwargs.get("position_bias")
    if position_bias is not None:
        bias = position_bias.to(query.dtype)
        if attention_mask is not None:
            bias = bias + additive_mask(attention_mask, query.dtype)
        elif is_causal:
            bias = bias + additive_mask(causal_bool_mask(query.shape[2], key.shape[2], query.device), query.dtype)
        attention_mask, is_causal = bias, False
    if attention_mask is not None and attention_mask.dtype != torch.bool:
        attention_mask = attention_mask.to(query.dtype)
    out = attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout, is_causal=is_causal, scale=scaling)
    return out.transpose(1, 2).contiguous(), None


def register_with_transformers() -> str:
    """Register the "mixkit" attention implementation with transformers (idempotent); return its name."""
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError as error:
        raise ImportError(f"mixkit's transformers integration needs transformers >= 4.56 with AttentionInterface "
                          f"and AttentionMaskInterface ({error}); pip install -U transformers") from error
    AttentionInterface.register(MIXKIT_ATTN_IMPLEMENTATION, transformers_attention_forward)
    AttentionMaskInterface.register(MIXKIT_ATTN_IMPLEMENTATION, sdpa_mask)
    return MIXKIT_ATTN_IMPLEMENTATION


def transformers_attn_implementation(backend: str | None = None) -> str:
    """The `attn_implementation` string for `from_pretrained(...)` that matches a mixkit backend.

    `backend` defaults to the one in effect. Backends transformers has natively map to its own
    kernels ("eager", "sdpa", "flash_attention_2"); "auto" and backends it lacks (xformers, custom
    ones) map to "mixkit", which is registered on the way and follows mixkit's switch at run time.
    """
    name = resolve_backend_name(backend) if backend is not None else get_attention_backend()
    if name != AUTO and name in _NATIVE_IMPLEMENTATION:
        return _NATIVE_IMPLEMENTATION[name]
    return register_with_transformers()


def apply_to_transformers(model):
    """Switch a loaded transformers model (and its sub-models) to mixkit attention; returns the model.

    Raises ValueError, leaving the model unchanged, if the model does not dispatch through
    transformers' AttentionInterface (older "modeling" code) and so would ignore the switch.
    """
    from transformers import PreTrainedModel

    if not isinstance(model, PreTrainedModel):
        raise TypeError(f"apply_to_transformers expects a transformers PreTrainedModel, got {type(model).__name__}")
    if not model._can_set_attn_implementation():
        raise ValueError(f"apply_to_transformers: {type(model).__name__} does not use transformers' AttentionInterface, "
                         "so its attention cannot be routed through mixkit; it keeps "
                         f"attn_implementation={model.config._attn_implementation!r}")
    model.set_attn_implementation(register_with_transformers())
    return model
