"""Execution backends by name: what runs the model's parts once the model is optimised.

Each entry is `prepare(model, report, *, precision, cache_dir, freezing, vae_precision) -> None`
and changes `model.unet` in place or replaces the UNet (OpenVINO: also the VAE and the text
encoders) with stand-ins that have the same call signatures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from mixkit.registry import Registry
from mixkit.runtime.compile import compile_module
from mixkit.runtime.openvino_cache import openvino_cache_dir
from mixkit.runtime.report import OptimizationReport

EXECUTION_BACKENDS: Registry[Callable] = Registry("execution backend")


@EXECUTION_BACKENDS.register("torch")
def prepare_torch(model, report: OptimizationReport, *, precision, cache_dir=None, freezing: bool = True,
                  vae_precision=None) -> None:
    """Eager PyTorch: the reference, and what every other backend is compared with."""


@EXECUTION_BACKENDS.register("torch.compile")
def prepare_torch_compile(model, report: OptimizationReport, *, precision, cache_dir=None, freezing: bool = True,
                          vae_precision=None) -> None:
    """PyTorch eager code compiled by inductor; compiled kernels cached on disk across processes."""
    compile_module(model.unet, report, freezing=freezing, cache_dir=cache_dir, name="UNet")


@EXECUTION_BACKENDS.register("openvino")
def prepare_openvino(model, report: OptimizationReport, *, precision, cache_dir=None, freezing: bool = True,
                     vae_precision=None) -> None:
    """OpenVINO on CPU: UNet, VAE and text encoder(s) converted once each (cached on disk), bf16 inside
    where the CPU has it. The VAE and text encoders convert on first use, at the shape they are used with."""
    from mixkit.runtime.openvino_cache import ov_precision
    from mixkit.runtime.openvino_text import OpenVinoTextEncoder
    from mixkit.runtime.openvino_unet import OpenVinoUNet
    from mixkit.runtime.openvino_vae import OpenVinoVae

    parts = [("UNet", model.unet), ("VAE", model.vae), *(("text encoder", e) for e in model.text_encoders)]
    for name, part in parts:
        device = getattr(part, "device", None)
        if device is not None and device.type != "cpu":
            raise ValueError(f"The openvino backend runs on the CPU; the {name} is on {device}. "
                             "Use backend='torch' on GPUs (TensorRT is planned)")
    folder = Path(cache_dir) if cache_dir is not None else openvino_cache_dir()
    identity = export_identity(model)
    unet_precision = ov_precision(precision.dtype_name)
    text_precision = unet_precision
    vae_ov_precision = ov_precision(vae_precision.dtype_name if vae_precision is not None else None)
    # Build every stand-in before replacing anything, so a failure leaves the model as it was.
    unet = model.unet if isinstance(model.unet, OpenVinoUNet) else OpenVinoUNet(
        model.unet.float(), cache_dir=folder, inference_precision=unet_precision, identity=identity)
    vae = model.vae if isinstance(model.vae, OpenVinoVae) else OpenVinoVae(
        model.vae, cache_dir=folder, inference_precision=vae_ov_precision, identity=identity)
    encoders = [e if isinstance(e, OpenVinoTextEncoder) else OpenVinoTextEncoder(
        e, cache_dir=folder, inference_precision=text_precision, identity=identity, part=f"text-encoder-{i + 1}")
        for i, e in enumerate(model.text_encoders)]
    model.unet, model.vae, model.text_encoders = unet, vae, encoders
    model.extras["execution_backend"] = "openvino"
    state = "reused cached graph" if unet.cache_hit else "converted and cached"
    report.step(f"OpenVINO UNet ({state}: {unet.cache_path}; inference precision {unet.inference_precision})")
    report.step(f"OpenVINO VAE decoder/encoder and {len(encoders)} text encoder(s): converted on first use per "
                f"static shape, cached in {folder} (model hash {identity.model_hash}, LoRAs {list(identity.loras) or 'none'})")


def export_identity(model):
    """Model hash and merged-LoRA set of a DiffusionModel, for the OpenVINO cache keys.

    LoRAs applied with `apply_loras` and not removed are read from the UNet (`name:hash:te:unet`); code that
    changes the weights some other way can record it in `extras["merged_loras"]` (strings); the weights fingerprint
    in every key covers changes nobody recorded.
    """
    from torch import nn

    from mixkit.lora.apply import applied_lora_records
    from mixkit.runtime.openvino_cache import ExportIdentity

    recorded = tuple(getattr(model, "extras", {}).get("merged_loras", ()))
    applied = applied_lora_records(model.unet) if isinstance(model.unet, nn.Module) else ()
    return ExportIdentity(model_hash=getattr(model, "model_hash", None),
                          loras=recorded + tuple(record for record in applied if record not in recorded))


def execution_backend_names() -> list[str]:
    return EXECUTION_BACKENDS.names()
