"""Runtime settings as data, and the named presets users pick from."""

from __future__ import annotations

from dataclasses import dataclass, replace

from mixkit.registry import Registry

PRECISIONS = ("float32", "auto")  # "auto": the device's fast reduced precision (see capability)
OFFLOAD_MODES = ("none", "model", "sequential")


@dataclass(frozen=True)
class RuntimeConfig:
    """Everything mixkit.runtime may change on a loaded model. Defaults change nothing."""

    unet_precision: str = "float32"
    vae_precision: str = "float32"  # "auto": decode under autocast with the NaN guard
    channels_last: bool = False
    fuse_qkv: bool = False
    compile: bool = False
    compile_freezing: bool = True  # inductor freezing: constant-folds weights, ~+40% on CPU (issue 8)
    attention_slicing: bool = False
    vae_tiling: bool = False
    vae_slicing: bool = False
    offload: str = "none"

    def __post_init__(self) -> None:
        for name in ("unet_precision", "vae_precision"):
            value = getattr(self, name)
            if value not in PRECISIONS:
                raise ValueError(f"RuntimeConfig.{name}={value!r}; allowed: {', '.join(PRECISIONS)}")
        if self.offload not in OFFLOAD_MODES:
            raise ValueError(f"RuntimeConfig.offload={self.offload!r}; allowed: {', '.join(OFFLOAD_MODES)}")

    def with_changes(self, **changes) -> "RuntimeConfig":
        return replace(self, **changes)


PRESETS: Registry[RuntimeConfig] = Registry("optimisation preset")
# "exact": bit-identical to an unoptimised pipeline; the baseline the others are measured against.
PRESETS.register("exact", RuntimeConfig())
# "fast": output-preserving up to bf16/fp16 rounding (issue 8's "exact, on by default" list).
PRESETS.register("fast", RuntimeConfig(unet_precision="auto", vae_precision="auto", channels_last=True,
                                       fuse_qkv=True))
# "low-memory": fp32 numerics, peak memory traded for time (slicing, tiling; offload needs a GPU).
PRESETS.register("low-memory", RuntimeConfig(attention_slicing=True, vae_tiling=True, vae_slicing=True))
