"""Memory modes: attention slicing, VAE tiling/slicing, model and sequential CPU offload.

Each trades time for peak memory. All but VAE tiling change only rounding. VAE tiling is an
approximation above the VAE's native size (`vae.tile_sample_min_size`: 512 px for SD 1.x, 1024 for
SDXL; below it diffusers decodes whole and nothing changes): each tile's group norms see only that
tile, and blending the seams does not make up for it (measured on mixkit-tiny-sd at 128 px, twice
its native 64: 27.8 dB PSNR, up to 104 levels of 255 against a whole decode). So no preset turns it
on; `vae_tiling=True` is opt-in and labelled approximate in the infotext.
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
    report.step("VAE slicing", label="vae-slicing")


def enable_attention_slicing(unet, report: OptimizationReport) -> None:
    """Attention over head slices, so the [tokens x tokens] score matrix is never whole.

    Slices of half the heads, as diffusers' `set_attention_slice("auto")`. Modules on mixkit's
    dispatcher stay on it (`SlicedMixkitAttnProcessor`), so the backend the user names still runs
    every slice; a UNet loaded with `attention="diffusers"` gets diffusers' `SlicedAttnProcessor`.
    Processors with extra behaviour (IP-Adapter, custom) are kept unsliced, and the report says so.
    """
    from diffusers.models.attention_processor import Attention

    from mixkit.attention import MixkitAttnProcessor, SlicedMixkitAttnProcessor

    modules = [module for module in unet.modules() if isinstance(module, Attention)]
    routed = [module for module in modules if type(module.processor) in (MixkitAttnProcessor, SlicedMixkitAttnProcessor)]
    if not routed:  # nothing on mixkit's dispatcher: the library's own slicing keeps it that way
        try:
            unet.set_attention_slice("auto")
        except ValueError as error:
            report.fallback(f"attention slicing not applied: {error}")
            return
        report.step("attention slicing (diffusers' SlicedAttnProcessor: the UNet was loaded with attention='diffusers')",
                    label="attention-slicing")
        return
    for module in routed:
        module.set_processor(SlicedMixkitAttnProcessor(max(1, module.heads // 2)))
    routed_ids = {id(module) for module in routed}
    kept = sorted({type(module.processor).__name__ for module in modules if id(module) not in routed_ids})
    if kept:
        report.fallback(f"attention slicing not applied to {len(modules) - len(routed)} attention module(s) whose "
                        f"processors carry extra behaviour ({', '.join(kept)}); they run unsliced")
    report.step("attention slicing", label="attention-slicing")


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
    report.step(f"{mode} CPU offload to {device}", label=f"offload-{mode}")
