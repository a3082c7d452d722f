"""The one switch that makes a loaded pipeline fast or small: `optimize(pipe, "fast")`.

Presets (see `mixkit.runtime.PRESETS`):
- "exact": changes nothing; output bit-identical to an unoptimised pipeline.
- "fast": bf16 (CPUs with AVX512-BF16/AMX, GPUs) or fp16 UNet, channels-last, fused QKV, VAE
  decode in reduced precision with a NaN guard. Output equal to "exact" up to bf16 rounding.
  Where the hardware has no fast reduced precision it stays fp32 and says so (a warning and
  `report.fallbacks`).
- "low-memory": fp32 compute on float16-held weights (cast one layer at a time), on the CPU the idle
  components' memory-mapped weights paged out, attention slicing (through mixkit's attention
  dispatcher), VAE slicing (offload via `offload=` on a GPU). `vae_tiling=True` adds VAE tiling, which
  is approximate above the VAE's native size and labelled so (`VAE tiling:` in the infotext).
Load with `**load_options_for(preset)` so a half-precision preset never holds a float32 copy.
Backends: "torch" (eager), "torch.compile", "openvino" (CPU; the `openvino` extra).

Apply once, right after loading and before `approximate()`: a second, different `optimize()` on
the same model is refused (its changes cannot be undone exactly: load the model again), and so is
`optimize()` on a model with approximations installed (it would replace what they wrap).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mixkit.runtime import PRESETS, OptimizationReport, RuntimeConfig, apply_runtime
from mixkit.runtime.apply import check_runtime_request


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


def check_optimize_inputs(pipe, preset: str, backend: str, overrides: dict[str, Any],
                          execution_device=None) -> RuntimeConfig:
    """Resolve names and overrides and check everything before touching the model, so a bad call changes nothing."""
    if not hasattr(pipe, "model") or not hasattr(pipe.model, "unet"):
        raise TypeError(f"optimize() expects a mixkit pipeline with a .model (TextToImage, ImageToImage, ...), "
                        f"got {type(pipe).__name__}")
    if not isinstance(preset, str):
        raise TypeError(f"preset must be a name (str), got {type(preset).__name__}; valid: {PRESETS.names()}")
    config = PRESETS.get(preset)  # UnknownNameError lists the presets
    unknown = sorted(set(overrides) - set(RuntimeConfig.__dataclass_fields__))
    if unknown:
        raise ValueError(f"optimize(): unknown option(s) {unknown}; valid: {sorted(RuntimeConfig.__dataclass_fields__)}")
    config = config.with_changes(**overrides)  # RuntimeConfig validates the values
    # backend name and support, an earlier optimisation, the offload device
    same_as_before = check_runtime_request(pipe.model, config, backend, preset=preset, execution_device=execution_device)
    if config.offload != "none":  # after the device check: on the CPU, installing accelerate would not help
        from mixkit.runtime.memory import require_accelerate

        require_accelerate()
    if same_as_before is None:  # this call will change the model
        check_no_approximations(pipe.model, preset)
    if backend == "openvino":
        from mixkit.runtime.openvino_unet import require_openvino

        require_openvino()  # ImportError naming the extra, before anything changes
    return config


def check_no_approximations(model, preset: str) -> None:
    """Refuse to optimise under installed approximations: attention slicing, fused QKV, compile and the
    backends replace the processors and forwards that ToMe and DeepCache wrap, which would drop them
    while the infotext still named them."""
    from pipelines.approx.labels import model_labels

    installed = replace(model_labels(model), vae_tiling=None).approximations()  # tiling is optimize()'s own
    if installed:
        raise ValueError(f"approximations are installed on this model ({', '.join(installed)}); optimize() would "
                         f"replace what they wrap. Call remove_approximations(pipe), then optimize(pipe, {preset!r}), "
                         "then approximate(...) again")


def optimize(pipe, preset: str = "fast", backend: str = "torch", *, cache_dir=None, execution_device=None,
             **overrides: Any) -> OptimizationReport:
    """Optimise `pipe.model` in place; returns (and stores as `pipe.optimization`) what was done.

    `overrides` change single fields of the preset, e.g. `optimize(pipe, "fast", compile=True)` or
    `optimize(pipe, "low-memory", offload="model")`. Apply it once, right after loading: fused
    and compiled modules assume the dtype and device they were prepared for, so a different second
    call is refused (the same call again returns the first report). A refused or failed call leaves
    the model and its labels exactly as they were.
    """
    config = check_optimize_inputs(pipe, preset, backend, overrides, execution_device)
    if cache_dir is not None:  # "~/cache" is the user's folder, as $MIXKIT_CACHE_DIR is read (not ./~/cache)
        import os
        from pathlib import Path

        if not isinstance(cache_dir, (str, os.PathLike)) or not str(cache_dir).strip():
            raise TypeError(f"cache_dir must be a folder path (str or Path), got {cache_dir!r}.")
        cache_dir = Path(cache_dir).expanduser()
    report = apply_runtime(pipe.model, config, backend=backend, preset=preset, cache_dir=cache_dir,
                           execution_device=execution_device)
    pipe.optimization = report
    tile_size = _vae_tile_size(pipe.model, config)
    _label_infotexts(pipe, optimization_label_parts(preset, report), tile_size)
    if not report.on_fallback:  # the same call again returns the same report: relabel once per fallback
        # a compiled UNet failing on first use falls back to eager mid-generation: that image's infotext
        # (built after sampling) and every later one name what ran, not torch.compile
        report.on_fallback.append(
            lambda changed: _label_infotexts(pipe, optimization_label_parts(preset, changed), tile_size))
    return report


_SHORT_PRECISION = {"bfloat16": "bf16", "float16": "fp16"}
# Exact up to rounding only: VAE tiling is labelled as the approximation it is (`VAE tiling:`).
# Written before the backend, in this order; the other labels (weight storage, offload) follow it.
_LABELS_BEFORE_BACKEND = ("channels-last", "fused-qkv", "attention-slicing", "vae-slicing", "page-out-idle")


def optimization_label_parts(preset: str, report: OptimizationReport) -> tuple[str, ...]:
    """The infotext's `Optimization:` parts, e.g. ("fast", "bf16", "channels-last", "fused-qkv").

    Built from what ran (`report.labels`, `report.precision`, `report.backend`), not from the
    preset's config: the openvino backend skips channels-last and fused QKV, page-out needs Linux
    and the CPU, so a label read from the config would name changes the model never had. Empty for
    the exact preset on the eager backend (nothing changed); a CPU without bf16 stays fp32 and gets
    no precision part.
    """
    parts = [label for label in _LABELS_BEFORE_BACKEND if label in report.labels]
    if report.precision in _SHORT_PRECISION:
        parts.insert(0, _SHORT_PRECISION[report.precision])
    if report.backend != "torch":
        parts.append(report.backend)
    parts += [label for label in report.labels if label not in _LABELS_BEFORE_BACKEND]
    return (preset, *parts) if parts or preset != "exact" else ()


def _vae_tile_size(model, config: RuntimeConfig) -> int | None:
    """The VAE's tile size in pixels when tiling is on (images above it are decoded in blended tiles)."""
    if not config.vae_tiling:
        return None
    return int(getattr(model.vae, "tile_sample_min_size", 0) or model.vae.config.sample_size)


def _label_infotexts(pipe, parts: tuple[str, ...], vae_tiling: int | None) -> None:
    from pipelines.approx.labels import label_infotexts, model_labels, set_model_labels

    set_model_labels(pipe.model, replace(model_labels(pipe.model), exact=parts, vae_tiling=vae_tiling))
    if hasattr(pipe, "session"):
        label_infotexts(pipe.session)
