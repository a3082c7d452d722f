"""The one switch that makes a loaded pipeline fast or small: `optimize(pipe, "fast")`.

Presets (see `mixkit.runtime.PRESETS`):
- "exact": changes nothing; output bit-identical to an unoptimised pipeline.
- "fast": bf16 (CPUs with AVX512-BF16/AMX, GPUs) or fp16 UNet, channels-last, fused QKV, VAE
  decode in reduced precision with a NaN guard. Output equal to "exact" up to bf16 rounding.
  Where the hardware has no fast reduced precision it stays fp32 and says so (a warning and
  `report.fallbacks`).
- "low-memory": fp32 compute on float16-held weights (cast one layer at a time), on the CPU the idle
  components' memory-mapped weights paged out, attention slicing, VAE tiling and slicing (offload via
  `offload=` on a GPU).
Load with `**load_options_for(preset)` so a half-precision preset never holds a float32 copy.
Backends: "torch" (eager), "torch.compile", "openvino" (CPU; the `openvino` extra).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mixkit.runtime import (EXECUTION_BACKENDS, PRESETS, OptimizationReport, RuntimeConfig, apply_runtime,
                            check_backend_supports)


def load_options_for(preset: str, device: str | None = None, backend: str = "torch", **overrides: Any) -> dict[str, Any]:
    """Loader dtypes for `preset`: `TextToImage.from_pretrained(path, **load_options_for(preset))`.

    A preset that holds weights in half precision is loaded in it directly, so the float32 copy that
    a cast after loading would need never exists: the peak memory is the half-precision one
    ("low-memory": everything float16; "fast": the UNet in the device's fast precision, bfloat16 on
    AVX512-BF16/AMX CPUs). Empty when the preset keeps float32 (the loaders' default) and for the
    openvino backend, which converts float32 modules into graphs of its own precision.
    """
    import torch

    from mixkit.runtime.capability import choose_fast_precision
    from mixkit.runtime.weight_storage import STORAGE_DTYPES

    config = PRESETS.get(preset).with_changes(**overrides)
    options: dict[str, Any] = {}
    if backend == "openvino":
        return options
    if config.weight_storage in STORAGE_DTYPES:
        options["dtype"] = STORAGE_DTYPES[config.weight_storage]
    elif config.unet_precision == "auto":
        choice = choose_fast_precision(torch.device(device or "cpu").type)
        if not choice.is_fallback and choice.dtype != torch.float32:
            options["unet_dtype"] = choice.dtype
    return options


def check_optimize_inputs(pipe, preset: str, backend: str, overrides: dict[str, Any]) -> RuntimeConfig:
    """Resolve names and overrides before touching the model, so a bad call changes nothing."""
    if not hasattr(pipe, "model") or not hasattr(pipe.model, "unet"):
        raise TypeError(f"optimize() expects a mixkit pipeline with a .model (TextToImage, ImageToImage, ...), "
                        f"got {type(pipe).__name__}")
    if not isinstance(preset, str):
        raise TypeError(f"preset must be a name (str), got {type(preset).__name__}; valid: {PRESETS.names()}")
    config = PRESETS.get(preset)  # UnknownNameError lists the presets
    EXECUTION_BACKENDS.get(backend)  # ... and the backends
    unknown = sorted(set(overrides) - set(RuntimeConfig.__dataclass_fields__))
    if unknown:
        raise ValueError(f"optimize(): unknown option(s) {unknown}; valid: {sorted(RuntimeConfig.__dataclass_fields__)}")
    config = config.with_changes(**overrides)  # RuntimeConfig validates the values
    check_backend_supports(config, backend)
    if backend == "openvino":
        from mixkit.runtime.openvino_unet import require_openvino

        require_openvino()  # ImportError naming the extra, before anything changes
    if config.offload != "none":
        from mixkit.runtime.memory import require_accelerate

        require_accelerate()
    return config


def optimize(pipe, preset: str = "fast", backend: str = "torch", *, cache_dir=None, execution_device=None,
             **overrides: Any) -> OptimizationReport:
    """Optimise `pipe.model` in place; returns (and stores as `pipe.optimization`) what was done.

    `overrides` change single fields of the preset, e.g. `optimize(pipe, "fast", compile=True)` or
    `optimize(pipe, "low-memory", offload="model")`. Apply it once, right after loading: fused
    and compiled modules assume the dtype and device they were prepared for.
    """
    config = check_optimize_inputs(pipe, preset, backend, overrides)
    report = apply_runtime(pipe.model, config, backend=backend, preset=preset, cache_dir=cache_dir,
                           execution_device=execution_device)
    pipe.optimization = report
    _label_infotexts(pipe, optimization_label_parts(preset, config, report))
    return report


_SHORT_PRECISION = {"bfloat16": "bf16", "float16": "fp16"}
_FLAG_LABELS = (("channels_last", "channels-last"), ("fuse_qkv", "fused-qkv"), ("attention_slicing", "attention-slicing"),
                ("vae_tiling", "vae-tiling"), ("vae_slicing", "vae-slicing"), ("page_out_idle", "page-out-idle"))


def optimization_label_parts(preset: str, config: RuntimeConfig, report: OptimizationReport) -> tuple[str, ...]:
    """The infotext's `Optimization:` parts, e.g. ("fast", "bf16", "channels-last", "fused-qkv").

    Empty for the exact preset on the eager backend (nothing changed). The precision part is
    what was actually used (a CPU without bf16 stays fp32 and gets no precision part).
    """
    parts = [name for field_name, name in _FLAG_LABELS if getattr(config, field_name)]
    if report.precision in _SHORT_PRECISION:
        parts.insert(0, _SHORT_PRECISION[report.precision])
    if report.backend != "torch":
        parts.append(report.backend)
    if config.weight_storage != "float32":
        parts.append(f"{_SHORT_PRECISION[config.weight_storage]}-weights")
    if config.offload != "none":
        parts.append(f"offload-{config.offload}")
    return (preset, *parts) if parts or preset != "exact" else ()


def _label_infotexts(pipe, parts: tuple[str, ...]) -> None:
    from pipelines.approx.labels import label_infotexts, model_labels, set_model_labels

    set_model_labels(pipe.model, replace(model_labels(pipe.model), exact=parts))
    if hasattr(pipe, "session"):
        label_infotexts(pipe.session)
