"""Attention kernels by name, and the one dispatcher every mixkit-patched model calls.

    from mixkit.attention import attention, attention_backend, set_attention_backend
    set_attention_backend("auto")              # process-wide default (the initial one)
    with attention_backend("math"):            # this block (and this thread/task) only
        out = attention(q, k, v, attn_mask=mask)

Backends: `math` (reference), `sdpa` (PyTorch picks), `sdpa_flash` / `sdpa_efficient` /
`sdpa_math` (PyTorch pinned to one kernel), `flash_attn` and `xformers` (optional CUDA packages).
Models opt in with `apply_to_diffusers(unet_or_vae)` and `apply_to_transformers(model)`; loaders
do both at load time through `install_attention(parts, "auto")` (`"diffusers"` keeps the defaults).
Importing this package loads torch only; diffusers/transformers are imported by those functions.
"""

from mixkit.attention.registry import (
    ATTENTION_BACKENDS,
    AttentionBackend,
    AttentionBackendUnavailableError,
    available_backend_names,
    register_backend,
)

# Importing a kernel module registers its backends; the order here is the listing order.
from mixkit.attention import math_attention, sdpa_attention, flash_attn_attention, xformers_attention  # noqa: E402,F401
from mixkit.attention.dispatch import (  # noqa: E402
    AUTO,
    AUTO_PREFERENCE,
    attention,
    attention_backend,
    check_attention_inputs,
    get_attention_backend,
    select_backend,
    set_attention_backend,
)
from mixkit.attention.diffusers_processor import (  # noqa: E402
    MixkitAttnProcessor,
    SlicedMixkitAttnProcessor,
    apply_to_diffusers,
)
from mixkit.attention.install import ATTENTION_INSTALL_MODES, AttentionInstall, install_attention  # noqa: E402
from mixkit.attention.transformers_attention import (  # noqa: E402
    MIXKIT_ATTN_IMPLEMENTATION,
    apply_to_transformers,
    register_with_transformers,
    transformers_attn_implementation,
)

__all__ = [
    "ATTENTION_BACKENDS", "ATTENTION_INSTALL_MODES", "AUTO", "AUTO_PREFERENCE", "AttentionBackend", "AttentionBackendUnavailableError",
    "AttentionInstall", "install_attention",
    "MIXKIT_ATTN_IMPLEMENTATION", "MixkitAttnProcessor", "SlicedMixkitAttnProcessor", "apply_to_diffusers", "apply_to_transformers",
    "attention", "attention_backend", "available_backend_names", "check_attention_inputs",
    "get_attention_backend", "register_backend", "register_with_transformers", "select_backend",
    "set_attention_backend", "transformers_attn_implementation",
]
