"""Memory modes: attention slicing, VAE tiling/slicing, model and sequential CPU offload.

Each trades time for peak memory; none changes the numerics except VAE tiling, whose blended
tile seams differ from a whole-image decode by a small amount (tested against it).
"""

from __future__ import annotations

from mixkit.runtime.report import OptimizationReport

ACCELERATE_HINT = "pip install accelerate  (or: pip install 'mixkit[accelerate]')"


def enable_vae_tiling(vae, report: OptimizationReport) -> None:
    """Decode in overlapping tiles: peak memory then depends on the tile, not the image size."""
    vae.enable_tiling()
    report.step("VAE tiling")


def enable_vae_slicing(vae, report: OptimizationReport) -> None:
    """Decode a batch one image at a time (mixkit's decode_latents already does; encode benefits)."""
    vae.enable_slicing()
    report.step("VAE slicing")


def enable_attention_slicing(unet, report: OptimizationReport) -> None:
    """Attention over head slices, so the [tokens x tokens] score matrix is never whole."""
    try:
        unet.set_attention_slice("auto")
    except ValueError as error:  # e.g. processors with extra behaviour; keep them, say so
        report.fallback(f"attention slicing not applied: {error}")
        return
    report.step("attention slicing")


def require_accelerate():
    """Import accelerate or raise an ImportError naming what to install."""
    try:
        import accelerate
    except ImportError as error:
        raise ImportError(f"CPU offload needs the 'accelerate' package, which is not installed: {ACCELERATE_HINT}") from error
    return accelerate


def enable_offload(model, mode: str, execution_device, report: OptimizationReport) -> None:
    """Keep weights in CPU RAM and move them to `execution_device` when used.

    "model": whole components move in turn (UNet, VAE, text encoders): small slowdown, the peak is
    the largest component. "sequential": every submodule moves on use: lowest peak, much slower.
    """
    accelerate = require_accelerate()
    import torch

    device = torch.device(execution_device)
    if device.type == "cpu":
        raise ValueError(f"offload={mode!r} moves weights from CPU RAM to an accelerator, but the execution "
                         "device is the CPU; use it on a GPU, or use preset 'low-memory' without offload on CPU")
    components = [*model.text_encoders, model.unet, model.vae]
    if mode == "sequential":
        for component in components:
            accelerate.cpu_offload(component, execution_device=device)
    else:
        hook = None
        for component in components:
            component.to("cpu")
            _, hook = accelerate.cpu_offload_with_hook(component, device, prev_module_hook=hook)
    report.step(f"{mode} CPU offload to {device}")
