"""Apply a RuntimeConfig and an execution backend to a loaded DiffusionModel, in a safe order."""

from __future__ import annotations

import torch

from mixkit.runtime.backends import EXECUTION_BACKENDS
from mixkit.runtime.capability import PrecisionChoice, choose_fast_precision
from mixkit.runtime.config import RuntimeConfig
from mixkit.runtime.fused_qkv import fuse_qkv
from mixkit.runtime.layout import cast_module, to_channels_last
from mixkit.runtime.memory import enable_attention_slicing, enable_offload, enable_vae_slicing, enable_vae_tiling
from mixkit.runtime.report import OptimizationReport
from mixkit.runtime.resident_pages import install_idle_page_out
from mixkit.runtime.vae_guard import install_vae_guard
from mixkit.runtime.weight_storage import apply_weight_storage

FP32 = PrecisionChoice("float32", "requested")


def resolve_precision(requested: str, device: torch.device, report: OptimizationReport) -> PrecisionChoice:
    if requested == "float32":
        return FP32
    choice = choose_fast_precision(device.type)
    if choice.is_fallback:
        report.fallback(f"reduced precision not used: {choice.reason}")
    return choice


def check_backend_supports(config: RuntimeConfig, backend: str) -> None:
    """Refuse settings a backend cannot honour (issue 8: refused with a clear error, never ignored)."""
    if backend != "openvino":
        return
    refused = [name for name, on in (("compile", config.compile), ("attention_slicing", config.attention_slicing),
                                     ("offload", config.offload != "none"), ("vae_tiling", config.vae_tiling),
                                     ("vae_slicing", config.vae_slicing),
                                     ("weight_storage", config.weight_storage != "float32"),
                                     ("page_out_idle", config.page_out_idle)) if on]
    if refused:
        raise ValueError(f"backend 'openvino' runs its own compiled UNet, VAE and text-encoder graphs and cannot "
                         f"honour {refused}; drop them or use backend='torch'")


def apply_runtime(model, config: RuntimeConfig, *, backend: str = "torch", preset: str = "custom",
                  execution_device=None, cache_dir=None) -> OptimizationReport:
    """Optimise `model` (a `mixkit.models.diffusion.DiffusionModel`) in place and say what was done.

    Order matters: dtype before fusing (a cast would break the fused weight views), layout before
    compiling (the graph bakes the layout in), offload last (it wraps the final modules).
    """
    if not isinstance(config, RuntimeConfig):
        raise TypeError(f"config must be a RuntimeConfig, got {type(config).__name__}")
    prepare = EXECUTION_BACKENDS.get(backend)
    check_backend_supports(config, backend)
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
        report.step("channels-last UNet and VAE")
    if config.fuse_qkv and backend != "openvino":
        count = fuse_qkv(model.unet)
        report.step(f"fused QKV projections in {count} UNet attention modules")

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
