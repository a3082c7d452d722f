"""Apply a RuntimeConfig and an execution backend to a loaded DiffusionModel, in a safe order.

Apply-once: the casts, fused views and converted graphs of one preset cannot be undone exactly
(a bfloat16 cast loses bits; the openvino backend drops the torch UNet), so a model that was
optimised is refused a second, different optimisation with a message saying to load it again.
A call that fails, up front or half-way, leaves the model exactly as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mixkit.runtime.backends import EXECUTION_BACKENDS
from mixkit.runtime.capability import PrecisionChoice, choose_fast_precision
from mixkit.runtime.config import RuntimeConfig
from mixkit.runtime.fused_qkv import fuse_qkv
from mixkit.runtime.layout import cast_module, to_channels_last
from mixkit.runtime.memory import enable_attention_slicing, enable_offload, enable_vae_slicing, enable_vae_tiling
from mixkit.runtime.report import OptimizationReport
from mixkit.runtime.resident_pages import install_idle_page_out
from mixkit.runtime.rollback import snapshot_model
from mixkit.runtime.vae_guard import install_vae_guard
from mixkit.runtime.weight_storage import apply_weight_storage

FP32 = PrecisionChoice("float32", "requested")
RUNTIME_EXTRAS_KEY = "runtime"  # model.extras[...]: the AppliedRuntime of the optimisation applied


@dataclass(frozen=True)
class AppliedRuntime:
    """What `apply_runtime` did to a model: recorded on it, so a second call can be checked against it."""

    preset: str
    backend: str
    config: RuntimeConfig
    report: OptimizationReport

    @property
    def changed_nothing(self) -> bool:
        return self.config == RuntimeConfig() and self.backend == "torch"


def resolve_precision(requested: str, device: torch.device, report: OptimizationReport) -> PrecisionChoice:
    if requested == "float32":
        return FP32
    choice = choose_fast_precision(device.type)
    if choice.is_fallback:
        report.fallback(f"reduced precision not used: {choice.reason}")
    return choice


def backend_refusals(config: RuntimeConfig, backend: str) -> list[str]:
    """The settings of `config` that `backend` cannot honour, by field name (empty: all fine)."""
    if backend != "openvino":
        return []
    return [name for name, on in (("compile", config.compile), ("attention_slicing", config.attention_slicing),
                                  ("offload", config.offload != "none"), ("vae_tiling", config.vae_tiling),
                                  ("vae_slicing", config.vae_slicing),
                                  ("weight_storage", config.weight_storage != "float32"),
                                  ("page_out_idle", config.page_out_idle)) if on]


def check_backend_supports(config: RuntimeConfig, backend: str) -> None:
    """Refuse settings a backend cannot honour (issue 8: refused with a clear error, never ignored)."""
    refused = backend_refusals(config, backend)
    if refused:
        raise ValueError(f"backend 'openvino' runs its own compiled UNet, VAE and text-encoder graphs and cannot "
                         f"honour {refused}; drop them or use backend='torch'")


def applied_runtime(model) -> AppliedRuntime | None:
    """The optimisation recorded on `model` by `apply_runtime`, or None."""
    return getattr(model, "extras", {}).get(RUNTIME_EXTRAS_KEY)


def check_not_optimised(model, config: RuntimeConfig, backend: str, preset: str) -> AppliedRuntime | None:
    """Refuse to optimise a model that already carries a different optimisation.

    Returns the recorded optimisation when it is the very same request (the caller may reuse its
    report), None when the model is unoptimised or only had the no-op `exact` on eager torch.
    """
    previous = applied_runtime(model)
    if previous is None:
        from mixkit.runtime.openvino_unet import OpenVinoUNet

        converted = model.extras.get("execution_backend") or (
            "openvino" if isinstance(model.unet, OpenVinoUNet) else None)
        if converted is not None:
            raise ValueError(f"this model already runs on the {converted!r} backend (its torch UNet was dropped "
                             f"after conversion), so preset {preset!r} on backend {backend!r} cannot be applied; "
                             "load the model again and call optimize() once on the fresh pipeline")
        return None
    if previous.config == config and previous.backend == backend:
        return previous
    if previous.changed_nothing:
        return None
    raise ValueError(f"this model was already optimised with preset {previous.preset!r} on backend "
                     f"{previous.backend!r} ({'; '.join(previous.report.applied) or 'see pipe.optimization'}); "
                     f"those changes cannot be undone exactly, so preset {preset!r} on backend {backend!r} is refused. "
                     "Load the model again (e.g. TextToImage.from_pretrained(path, **load_options_for(preset))) "
                     "and call optimize() once on the fresh pipeline")


def check_offload_device(config: RuntimeConfig, model, execution_device) -> torch.device | None:
    """The device offload moves weights to; ValueError before any change when it cannot be used."""
    if config.offload == "none":
        return None
    try:
        device = torch.device(execution_device if execution_device is not None else model.unet.device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"execution_device={execution_device!r} is not a torch device ({error}); "
                         "pass e.g. 'cuda' or 'cuda:0'") from None
    if device.type == "cpu":
        raise ValueError(f"offload={config.offload!r} moves weights from CPU RAM to an accelerator, but the execution "
                         "device is the CPU; use it on a GPU (execution_device='cuda'), or use preset 'low-memory' "
                         "without offload on the CPU")
    if device.type == "cuda" and (not torch.cuda.is_available()
                                  or (device.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"offload={config.offload!r} to {device}: that CUDA device is not available here "
                         f"({torch.cuda.device_count()} visible); pass an existing execution_device")
    return device


def check_runtime_request(model, config: RuntimeConfig, backend: str, *, preset: str = "custom",
                          execution_device=None) -> AppliedRuntime | None:
    """Every check `apply_runtime` needs, before it changes anything (see `check_not_optimised` for the result)."""
    if not isinstance(config, RuntimeConfig):
        raise TypeError(f"config must be a RuntimeConfig, got {type(config).__name__}")
    EXECUTION_BACKENDS.get(backend)  # UnknownNameError listing the backends
    check_backend_supports(config, backend)
    previous = check_not_optimised(model, config, backend, preset)
    check_offload_device(config, model, execution_device)
    return previous


def apply_runtime(model, config: RuntimeConfig, *, backend: str = "torch", preset: str = "custom",
                  execution_device=None, cache_dir=None) -> OptimizationReport:
    """Optimise `model` (a `mixkit.models.diffusion.DiffusionModel`) in place and say what was done.

    Order matters: dtype before fusing (a cast would break the fused weight views), layout before
    compiling (the graph bakes the layout in), offload last (it wraps the final modules).
    Every check runs first (`check_runtime_request`); should a step still fail, the model is put back
    as it was (`mixkit.runtime.rollback`) and the error raised. Applying the same request again
    returns the recorded report; a different one is refused (see `check_not_optimised`).
    """
    previous = check_runtime_request(model, config, backend, preset=preset, execution_device=execution_device)
    if previous is not None:
        return previous.report
    snapshot = snapshot_model(model)
    try:
        report = _apply_steps(model, config, backend, preset, execution_device, cache_dir)
    except BaseException:
        snapshot.restore()
        raise
    model.extras[RUNTIME_EXTRAS_KEY] = AppliedRuntime(preset, backend, config, report)
    return report


def _apply_steps(model, config: RuntimeConfig, backend: str, preset: str, execution_device, cache_dir):
    prepare = EXECUTION_BACKENDS.get(backend)
    report = OptimizationReport(preset=preset, backend=backend)
    device = model.unet.device

    # 1. Precision
    unet_precision = resolve_precision(config.unet_precision, device, report)
    report.precision = unet_precision.dtype_name
    if config.weight_storage != "float32":  # float32 compute on half-precision weights, layer by layer
        apply_weight_storage(model, config.weight_storage, report)
    elif unet_precision.dtype != model.unet.dtype and backend != "openvino":
        cast_module(model.unet, unet_precision.dtype)
        report.step(f"UNet weights in {unet_precision.dtype_name} ({unet_precision.reason})")
    elif unet_precision.dtype != torch.float32 and backend != "openvino":  # loaded so (load_options_for)
        report.step(f"UNet weights in {unet_precision.dtype_name}, as loaded ({unet_precision.reason})")

    # 2. Layout and fused projections
    if config.channels_last and backend != "openvino":
        to_channels_last(model.unet)
        to_channels_last(model.vae)
        report.step("channels-last UNet and VAE", label="channels-last")
    if config.fuse_qkv and backend != "openvino":
        count = fuse_qkv(model.unet)
        report.step(f"fused QKV projections in {count} UNet attention modules", label="fused-qkv")

    # 3. VAE decode precision with the NaN guard
    vae_precision = resolve_precision(config.vae_precision, model.vae.device, report) \
        if config.vae_precision != config.unet_precision else unet_precision
    if vae_precision.dtype != torch.float32 and backend != "openvino":  # OpenVINO: bf16 inside its VAE graph
        install_vae_guard(model.vae, vae_precision.dtype, report)
        report.step(f"VAE decode under {vae_precision.dtype_name} autocast, NaN guard -> float32 per image")

    # 4. Memory modes
    if config.attention_slicing:
        enable_attention_slicing(model.unet, report)
    if config.vae_tiling:
        enable_vae_tiling(model.vae, report)
    if config.vae_slicing:
        enable_vae_slicing(model.vae, report)
    if config.page_out_idle:  # the backends that cannot keep it were refused above
        install_idle_page_out(model, report)

    # 5. Execution backend (compile, OpenVINO)
    if config.compile and backend == "torch":
        prepare = EXECUTION_BACKENDS.get("torch.compile")
        report.backend = "torch.compile"
    prepare(model, report, precision=unet_precision, cache_dir=cache_dir, freezing=config.compile_freezing,
            vae_precision=vae_precision)

    # 6. Offload last: it wraps whatever modules the steps above left
    if config.offload != "none":
        enable_offload(model, config.offload, execution_device or device, report)
    return report
