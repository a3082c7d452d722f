"""How a model's optimisations are labelled in the infotext, and read back from it.

Keys follow A1111 where A1111 has one, so A1111 and Civitai read them back:
    Optimization: "fast, bf16, channels-last, fused-qkv"   (mixkit; exact up to rounding)
    VAE Decoder: TAESD                                      (A1111 1.6+ `sd_vae_decode_method`)
    DeepCache: 3                                            (mixkit; full UNet every 3 steps)
    Token merging ratio: 0.5                                (A1111's ToMe setting)
    UNet quantization: int8                                 (mixkit; int8 UNet: NNCF or torchao)
    VAE quantization: int8                                  (mixkit; OpenVINO VAE decoder quantized by NNCF)
    VAE tiling: 512                                         (mixkit; VAE decoded in blended 512-px tiles above 512 px)
The last six are approximations: an image made with them is not what the exact model makes.
The labels live in `model.extras`, because the changes they describe are made to the model,
which every pipeline built from it (txt2img, img2img, hires fix) shares.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

MODEL_EXTRAS_KEY = "optimization_labels"
OPTIMIZATION_KEY = "Optimization"
VAE_DECODER_KEY = "VAE Decoder"
DEEPCACHE_KEY = "DeepCache"
TOME_KEY = "Token merging ratio"
TOME_SHORT_KEY = "ToMe"  # accepted when reading (hand-written labels)
QUANTIZATION_KEY = "UNet quantization"
VAE_QUANTIZATION_KEY = "VAE quantization"
VAE_TILING_KEY = "VAE tiling"
INT8_VALUE = "int8"
TAESD_VALUE = "TAESD"


@dataclass(frozen=True)
class OptimizationLabels:
    """What was done to a model beyond loading it. Empty (the default) means: exact."""

    exact: tuple[str, ...] = ()  # preset and what it applied, e.g. ("fast", "bf16", "channels-last")
    taesd: bool = False
    deepcache: int | None = None  # DeepCache interval (> 1)
    tome: float | None = None  # ToMe ratio (> 0)
    int8: bool = False  # int8 UNet
    int8_vae: bool = False  # int8 VAE decoder (OpenVINO backend)
    # VAE tiling's tile size in pixels (optimize(..., vae_tiling=True)): images above it are decoded in
    # tiles whose group norms see only the tile, blended at the seams; not exact (mixkit.runtime.memory)
    vae_tiling: int | None = None

    @property
    def approximate(self) -> bool:
        return (self.taesd or self.deepcache is not None or self.tome is not None or self.int8 or self.int8_vae
                or self.vae_tiling is not None)

    def approximations(self) -> list[str]:
        """Human-readable list of the approximate settings, for the CLI's warning line."""
        items = ["TAESD decode"] if self.taesd else []
        if self.deepcache is not None:
            items.append(f"DeepCache (full UNet every {self.deepcache} steps)")
        if self.tome is not None:
            items.append(f"ToMe ratio {self.tome:g}")
        if self.int8:
            items.append("int8 UNet")
        if self.int8_vae:
            items.append("int8 VAE decoder")
        if self.vae_tiling is not None:
            items.append(f"VAE tiling (images above {self.vae_tiling} px decoded in blended {self.vae_tiling}-px tiles)")
        return items

    def infotext_values(self) -> dict[str, str | int | float | None]:
        """Infotext keys and values; None for settings that are off (the infotext leaves them out)."""
        return {
            OPTIMIZATION_KEY: ", ".join(self.exact) or None,
            VAE_DECODER_KEY: TAESD_VALUE if self.taesd else None,
            DEEPCACHE_KEY: self.deepcache,
            TOME_KEY: self.tome,
            QUANTIZATION_KEY: INT8_VALUE if self.int8 else None,
            VAE_QUANTIZATION_KEY: INT8_VALUE if self.int8_vae else None,
            VAE_TILING_KEY: self.vae_tiling,
        }

    def with_approximations(self, *, taesd: bool, deepcache: int | None, tome: float | None,
                            int8: bool = False, int8_vae: bool = False) -> "OptimizationLabels":
        return replace(self, taesd=taesd, deepcache=deepcache, tome=tome, int8=int8, int8_vae=int8_vae)

    @classmethod
    def from_infotext(cls, params: Mapping[str, object]) -> "OptimizationLabels":
        """Read labels back from `parse_infotext(...)` / `split_infotext(...)[2]` values.

        Unknown or malformed values raise ValueError naming the key, so a pasted infotext never
        silently turns an approximate image into an "exact" one.
        """
        exact = tuple(part.strip() for part in str(params.get(OPTIMIZATION_KEY, "")).split(",") if part.strip())
        decoder = str(params.get(VAE_DECODER_KEY, "Full")).strip()
        if decoder not in ("Full", TAESD_VALUE):
            raise ValueError(f"infotext {VAE_DECODER_KEY}: {decoder!r} is not 'Full' or 'TAESD'")
        quantization = {key: str(params.get(key, "none")).strip() for key in (QUANTIZATION_KEY, VAE_QUANTIZATION_KEY)}
        for key, value in quantization.items():
            if value not in ("none", INT8_VALUE):
                raise ValueError(f"infotext {key}: {value!r} is not {INT8_VALUE!r}")
        deepcache = _number(params, DEEPCACHE_KEY, int)
        tome = _number(params, TOME_KEY, float)
        if tome is None:
            tome = _number(params, TOME_SHORT_KEY, float)
        vae_tiling = _number(params, VAE_TILING_KEY, int)
        return cls(exact=exact, taesd=decoder == TAESD_VALUE, vae_tiling=vae_tiling,
                   deepcache=deepcache if deepcache not in (None, 1) else None,
                   tome=tome if tome not in (None, 0.0) else None, int8=quantization[QUANTIZATION_KEY] == INT8_VALUE,
                   int8_vae=quantization[VAE_QUANTIZATION_KEY] == INT8_VALUE)


def _number(params: Mapping[str, object], key: str, kind: type):
    if key not in params or str(params[key]).strip() == "":
        return None
    text = str(params[key]).strip()
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"infotext {key}: {text!r} is not a{'n integer' if kind is int else ' number'}") from None


def model_labels(model) -> OptimizationLabels:
    """The labels recorded on a loaded `DiffusionModel` (empty when nothing was applied)."""
    return model.extras.get(MODEL_EXTRAS_KEY) or OptimizationLabels()


def set_model_labels(model, labels: OptimizationLabels) -> None:
    model.extras[MODEL_EXTRAS_KEY] = labels


def label_infotexts(session) -> None:
    """Make `session` (a `pipelines.generation.ModelSession`) add its model's labels to every infotext.

    A bridge until `ModelSession.infotext` reads `model_labels(model).infotext_values()` itself:
    it wraps that one method on this session object only, once. The session is shared by every
    pipeline made with `from_pipeline`, so they are all labelled.
    """
    if "infotext" in session.__dict__:
        return
    plain = session.infotext

    def infotext(params, sampler, *, prompt, negative_prompt, seed, extra):
        labels = model_labels(session.model).infotext_values()
        return plain(params, sampler, prompt=prompt, negative_prompt=negative_prompt, seed=seed,
                     extra={**extra, **labels})

    session.infotext = infotext


# A1111's hires pass ToMe ratio (token_merging_ratio_hr), written when not 0: a setting of the call (pipelines.hires
# `token_merging_ratio_hr`), not of the model, so not one of these labels
TOME_HIRES_KEY = "Token merging ratio hr"
