"""FreeU for one generation: the U-Net decoder's backbone features amplified and its skip features' low frequencies
damped (Si et al. 2023, "FreeU: Free Lunch in Diffusion U-Net"), with diffusers' own `enable_freeu` / `disable_freeu`.

It changes the image (by design: usually more detail and saturation), needs no weights, and costs two FFTs per
decoder stage. It is switched on for one call and the U-Net's previous FreeU state is put back afterwards, also when
the call fails, so a model shared by other requests never keeps it.

Starting points (FreeU's README, diffusers' docs; fine-tuned checkpoints and LoRAs usually want lower b values):
    SD 1.4/1.5   FreeU(b1=1.5, b2=1.6, s1=0.9, s2=0.2)   (FreeU's README: 1.3, 1.4 for SD 1.4)
    SD 2.1       FreeU(b1=1.4, b2=1.6, s1=0.9, s2=0.2)
    SDXL         FreeU(b1=1.3, b2=1.4, s1=0.9, s2=0.2)   (ComfyUI's FreeU_V2 defaults; b1=1.1, b2=1.2, s1=0.6,
                                                          s2=0.4 is a milder choice often used)

Infotext: "FreeU: b1=1.5, b2=1.6, s1=0.9, s2=0.2" (mixkit's own key: the sd-webui-freeu extension's "FreeU Stages"
describes a different, per-stage schedule).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import astuple, dataclass
from typing import Any, Iterator

INFOTEXT_KEY = "FreeU"
MAX_FACTOR = 10.0  # ComfyUI's FreeU node bound
_FIELDS = ("b1", "b2", "s1", "s2")
_STATE_KEYS = ("s1", "s2", "b1", "b2")


@dataclass(frozen=True)
class FreeU:
    """FreeU's four factors: `b1`, `b2` scale the backbone features of the decoder's first two stages, `s1`, `s2`
    the low frequencies of their skip features. Each in (0, 10]; b = s = 1 changes nothing (up to FFT rounding)."""

    b1: float = 1.5
    b2: float = 1.6
    s1: float = 0.9
    s2: float = 0.2

    def __post_init__(self) -> None:
        for name in _FIELDS:
            value = getattr(self, name)
            # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0 < value <= MAX_FACTOR:
                raise ValueError(f"FreeU {name} must be a number in (0, {MAX_FACTOR:g}] (diffusers reads 0 as "
                                 f"'FreeU off'), got {value!r}")
            object.__setattr__(self, name, float(value))

    def infotext_value(self) -> str:
        return ", ".join(f"{name}={getattr(self, name):g}" for name in _FIELDS)

    @classmethod
    def from_infotext(cls, text: str) -> "FreeU":
        """From an infotext "FreeU" value ("b1=1.5, b2=1.6, s1=0.9, s2=0.2"); ValueError naming what is wrong."""
        values: dict[str, float] = {}
        for part in str(text).split(","):
            match = re.fullmatch(r"\s*(b1|b2|s1|s2)\s*=\s*([-+0-9.eE]+)\s*", part)
            if match is None or match.group(1) in values:
                raise ValueError(f"infotext {INFOTEXT_KEY}: {text!r} is not 'b1=..., b2=..., s1=..., s2=...'")
            key, number = match.groups()
            try:
                values[key] = float(number)
            except ValueError:  # the pattern lets "1e" or "1.2.3" through; float names neither the key nor the value
                raise ValueError(f"infotext {INFOTEXT_KEY}: {key}={number!r} is not a number (in {text!r}); write it "
                                 f"as A1111 does, e.g. {key}=1.5") from None
        if set(values) != set(_FIELDS):
            raise ValueError(f"infotext {INFOTEXT_KEY}: {text!r} lacks {sorted(set(_FIELDS) - set(values))}")
        return cls(**values)


def as_freeu(value: Any) -> FreeU | None:
    """`Txt2ImgParams.freeu` checked: None, a FreeU, a (b1, b2, s1, s2) sequence or a dict of those names."""
    if value is None or isinstance(value, FreeU):
        return value
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(_FIELDS))
        if unknown:
            raise TypeError(f"freeu has unknown field(s) {unknown}; known: {list(_FIELDS)}")
        return FreeU(**value)
    if isinstance(value, (tuple, list)) and len(value) == 4:
        return FreeU(*value)
    raise TypeError(f"freeu must be None, FreeU(b1, b2, s1, s2), a (b1, b2, s1, s2) tuple or a dict, got {value!r}")


def check_freeu_model(model) -> None:
    """ValueError when `model`'s denoiser has no diffusers U-Net decoder for FreeU to act on."""
    unet = model.unet
    backend = model.extras.get("execution_backend")
    if not callable(getattr(unet, "enable_freeu", None)) or backend not in (None, "torch", "torch.compile"):
        raise ValueError(f"FreeU re-weights a diffusers U-Net's decoder; this model's denoiser is {type(unet).__name__}"
                         f" (backend {backend or 'torch'!r}). Use a U-Net model (SD 1.x/2.x, SDXL) on backend 'torch'.")
    if "_mixkit_eager_forward" in unet.__dict__:  # mixkit.runtime.compile's marker
        raise ValueError("FreeU cannot be switched on in a compiled U-Net (its graph was traced without it); drop "
                         "compile or FreeU")


@contextlib.contextmanager
def freeu_call(model, settings: FreeU | None) -> Iterator[None]:
    """Within the block, `model`'s U-Net runs with FreeU `settings` (None: no change); its earlier state comes back."""
    if settings is None:
        yield
        return
    check_freeu_model(model)
    unet = model.unet
    before = [{key: block.__dict__[key] for key in _STATE_KEYS if key in block.__dict__} for block in unet.up_blocks]
    b1, b2, s1, s2 = astuple(settings)
    try:
        unet.enable_freeu(s1=s1, s2=s2, b1=b1, b2=b2)
        yield
    finally:
        for block, saved in zip(unet.up_blocks, before):
            for key in _STATE_KEYS:
                if key in saved:
                    block.__dict__[key] = saved[key]
                else:
                    block.__dict__.pop(key, None)
