"""Runtime settings as data, and the named presets users pick from."""

from __future__ import annotations

from dataclasses import dataclass, replace

from mixkit.registry import Registry

PRECISIONS = ("float32", "auto")  # "auto": the device's fast reduced precision (see capability)
OFFLOAD_MODES = ("none", "model", "sequential")
WEIGHT_STORAGE = ("float32", "float16", "bfloat16")  # what the weights are held in between layer calls


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
    # "float16"/"bfloat16": linear and convolution weights held in half precision, cast to float32 one
    # layer at a time for compute (mixkit.runtime.weight_storage); halves the weights' memory.
    weight_storage: str = "float32"
    # CPU: before a component runs, the others' memory-mapped weights go back to the page cache
    # (mixkit.runtime.resident_pages), so text encoders, UNet and VAE are resident in turn.
    page_out_idle: bool = False

    def __post_init__(self) -> None:
        for name in ("unet_precision", "vae_precision"):
            value = getattr(self, name)
            if value not in PRECISIONS:
                raise ValueError(f"RuntimeConfig.{name}={value!r}; allowed: {', '.join(PRECISIONS)}")
        if self.offload not in OFFLOAD_MODES:
            raise ValueError(f"RuntimeConfig.offload={self.offload!r}; allowed: {', '.join(OFFLOAD_MODES)}")
        if self.weight_storage not in WEIGHT_STORAGE:
            raise ValueError(f"RuntimeConfig.weight_storage={self.weight_storage!r}; allowed: {', '.join(WEIGHT_STORAGE)}")
        if self.weight_storage != "float32" and self.unet_precision != "float32":
            raise ValueError(f"weight_storage={self.weight_storage!r} keeps float32 compute with half-precision weights; "
                             f"unet_precision={self.unet_precision!r} already computes in half precision (its weights "
                             "are half precision too): use one or the other")
        if self.page_out_idle and self.compile:
            raise ValueError("page_out_idle=True switches components with forward hooks, which compile=True does "
                             "not keep; drop one of them")
        if self.weight_storage != "float32" and (self.compile or self.fuse_qkv):
            clash = "compile" if self.compile else "fuse_qkv"
            raise ValueError(f"weight_storage={self.weight_storage!r} casts each layer's weights around its call, which "
                             f"{clash}=True cannot keep (a compiled graph or fused weight view bakes one dtype in); "
                             f"drop {clash} or keep weight_storage='float32'")

    def with_changes(self, **changes) -> "RuntimeConfig":
        return replace(self, **changes)


PRESETS: Registry[RuntimeConfig] = Registry("optimisation preset")
# "exact": bit-identical to an unoptimised pipeline; the baseline the others are measured against.
PRESETS.register("exact", RuntimeConfig())
# "fast": output-preserving up to bf16/fp16 rounding (issue 8's "exact, on by default" list).
PRESETS.register("fast", RuntimeConfig(unet_precision="auto", vae_precision="auto", channels_last=True,
                                       fuse_qkv=True))
# "low-memory": fp32 compute on float16-held weights (exact against a float16 checkpoint, the usual
# download), idle components paged out on the CPU, peak memory traded for time (attention and VAE
# slicing; offload needs a GPU). Exact up to rounding at every size, so not VAE tiling: that blends
# tiles decoded apart and is an approximation above the VAE's native size (mixkit.runtime.memory);
# `optimize(pipe, "low-memory", vae_tiling=True)` adds it, labelled approximate.
PRESETS.register("low-memory", RuntimeConfig(attention_slicing=True, vae_slicing=True,
                                             weight_storage="float16", page_out_idle=True))
