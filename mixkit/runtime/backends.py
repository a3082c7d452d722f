"""Execution backends by name: what runs the UNet once the model is optimised.

Each entry is `prepare(model, report, *, precision, cache_dir) -> None` and changes
`model.unet` in place (or replaces it with a stand-in that has the same call signature).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from mixkit.registry import Registry
from mixkit.runtime.compile import compile_module, default_cache_dir
from mixkit.runtime.report import OptimizationReport

EXECUTION_BACKENDS: Registry[Callable] = Registry("execution backend")


@EXECUTION_BACKENDS.register("torch")
def prepare_torch(model, report: OptimizationReport, *, precision, cache_dir=None, freezing: bool = True) -> None:
    """Eager PyTorch: the reference, and what every other backend is compared with."""


@EXECUTION_BACKENDS.register("torch.compile")
def prepare_torch_compile(model, report: OptimizationReport, *, precision, cache_dir=None, freezing: bool = True) -> None:
    """PyTorch eager code compiled by inductor; compiled kernels cached on disk across processes."""
    compile_module(model.unet, report, freezing=freezing, cache_dir=cache_dir, name="UNet")


@EXECUTION_BACKENDS.register("openvino")
def prepare_openvino(model, report: OptimizationReport, *, precision, cache_dir=None, freezing: bool = True) -> None:
    """OpenVINO on CPU: the UNet converted once (cached on disk), bf16 inside where the CPU has it."""
    from mixkit.runtime.openvino_unet import OpenVinoUNet

    if model.unet.device.type != "cpu":
        raise ValueError(f"The openvino backend runs on the CPU; the model is on {model.unet.device}. "
                         "Use backend='torch' on GPUs (TensorRT is planned)")
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir().parent / "openvino"
    model.unet = OpenVinoUNet(model.unet.float(), cache_dir=folder,
                              inference_precision="bf16" if precision.dtype_name == "bfloat16" else "f32")
    state = "reused cached graph" if model.unet.cache_hit else "converted and cached"
    report.step(f"OpenVINO UNet ({state}: {model.unet.cache_path}; inference precision {model.unet.inference_precision})")


def execution_backend_names() -> list[str]:
    return EXECUTION_BACKENDS.names()
