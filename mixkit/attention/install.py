"""Install mixkit's attention on every part of a freshly loaded model, by name.

Loaders take an `attention=` name and pass it here, so that loading is the one moment a model's
attention is chosen (issue 8: mixkit's processors were available but not installed by default):

- "auto": every diffusers `Attention` (UNet, VAE) gets `MixkitAttnProcessor` and every transformers
  model (text encoders, VLM parts) the "mixkit" attention implementation. The kernel is then chosen
  per call site by `mixkit.attention.dispatch` ("auto" picks from each call's own tensors, so an fp16
  UNet and an fp32 VAE may get different kernels) and follows `set_attention_backend`/`attention_backend`.
- "diffusers": leave the libraries' own defaults (diffusers' `AttnProcessor2_0`, transformers'
  `sdpa`), e.g. to compare with a plain diffusers pipeline or to use a processor mixkit cannot
  stand in for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import torch

from mixkit.registry import Registry


@dataclass
class AttentionInstall:
    """What an install did: the mode's name and, per part, how many modules were switched."""

    mode: str
    switched: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        parts = ", ".join(f"{name}: {count}" for name, count in self.switched.items()) or "nothing switched"
        return f"attention={self.mode} ({parts})"


InstallFn = Callable[[Iterable[tuple[str, torch.nn.Module]]], dict[str, int]]
ATTENTION_INSTALL_MODES: Registry[InstallFn] = Registry("attention install mode")


def _is_transformers_model(module: torch.nn.Module) -> bool:
    try:
        from transformers import PreTrainedModel
    except ImportError:
        return False
    return isinstance(module, PreTrainedModel)


@ATTENTION_INSTALL_MODES.register("auto")
def install_mixkit_attention(parts: Iterable[tuple[str, torch.nn.Module]]) -> dict[str, int]:
    """Route every part's attention through `mixkit.attention.attention` (kernel chosen per call)."""
    from mixkit.attention.diffusers_processor import apply_to_diffusers
    from mixkit.attention.transformers_attention import apply_to_transformers

    parts = list(parts)
    # Check every part first so a part that cannot switch leaves all of them unchanged.
    for name, module in parts:
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"attention='auto': part {name!r} is a {type(module).__name__}, not a torch module "
                            "(install attention before converting a model for another backend)")
        if _is_transformers_model(module) and not module._can_set_attn_implementation():
            raise ValueError(f"attention='auto': {name} ({type(module).__name__}) does not dispatch through "
                             "transformers' AttentionInterface; load it with attention='diffusers'")
    switched: dict[str, int] = {}
    for name, module in parts:
        if _is_transformers_model(module):
            apply_to_transformers(module)
            switched[name] = sum(1 for m in module.modules() if type(m).__name__.endswith("Attention"))
        elif _has_diffusers_attention(module):
            switched[name] = apply_to_diffusers(module)
        else:
            switched[name] = 0  # e.g. a VAE built without mid-block attention: nothing to route
    return switched


def _has_diffusers_attention(module: torch.nn.Module) -> bool:
    from diffusers.models.attention_processor import Attention

    return any(isinstance(m, Attention) for m in module.modules())


@ATTENTION_INSTALL_MODES.register("diffusers")
def keep_library_attention(parts: Iterable[tuple[str, torch.nn.Module]]) -> dict[str, int]:
    """Keep diffusers'/transformers' own attention: nothing is switched."""
    return {}


def check_attention_mode(attention: str) -> InstallFn:
    """The install function for `attention`; UnknownNameError (listing the modes) if unknown."""
    if not isinstance(attention, str):
        raise TypeError(f"attention must be a name (str) such as 'auto' or 'diffusers', got {attention!r}; "
                        f"valid: {ATTENTION_INSTALL_MODES.names()}")
    return ATTENTION_INSTALL_MODES.get(attention)


def install_attention(parts: Iterable[tuple[str, torch.nn.Module]], attention: str = "auto") -> AttentionInstall:
    """Install attention mode `attention` on named model parts, e.g. `[("unet", unet), ("vae", vae)]`."""
    install = check_attention_mode(attention)
    canonical = next(name for name, entry in ATTENTION_INSTALL_MODES.items() if entry is install)
    return AttentionInstall(mode=canonical, switched=install(list(parts)))
