"""Run the active ControlNets at one sampling step and sum their residuals for the UNet.

This is the `unet_extra` hook of the sampling loop: it receives the batched UNet input (one row
per conditioning row), the step's conditioning and which image each row belongs to, and returns
the `down_block_additional_residuals` / `mid_block_additional_residual` keyword arguments. Several
ControlNets add up, as diffusers' MultiControlNetModel and sd-webui-controlnet do.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pipelines.controlnet.map_fit import fit_control_map, fit_inpaint_map
from pipelines.controlnet.region_mask import apply_region_mask, region_mask_tensor
from pipelines.controlnet.resolution import detect_at_resolution, unit_resolution, uses_resolution
from pipelines.controlnet.unit_mask import inpaint_control, mask_channel, takes_mask, with_mask_resolved

# sd-webui-controlnet's soft injection (scripts/hook.py): residual i of 13 (12 down blocks, then the middle block)
# is scaled by weight * 0.825 ** (12 - i); SDXL's 10 residuals take the first 10 of these scales.
SOFT_INJECTION_BASE = 0.825
SOFT_INJECTION_DEPTH = 12
# Preprocessors whose units the extension forces to soft injection in hires fix's second pass
# ("use the soft weights with high-res fix can significantly reduce artifacts"): names containing these.
HIRES_SOFT_PREPROCESSORS = ("canny", "mlsd")


@dataclass
class PreparedControl:
    """One unit with its control image as a [1, 3, H, W] tensor in [0, 1] (RGB; an inpaint unit's masked pixels -1)."""

    unit: Any
    image: Any  # the preprocessed PIL control image at the generation size (kept for previews)
    tensor: Any
    source: Any = None  # the picture the map came from, and the resize mode that fits it to a size
    resize_mode: str = "just resize"
    detected: Any = None  # the map detected at the unit's preprocessor resolution, before any resize; None: none
    soft_injection: bool = False  # scale residuals by soft_injection_scales (the unit's mode, or hires fix's rule)
    source_mask: Any = None  # inpaint units: the mask of `source` (HxW uint8, white = masked); None: other units
    mask: Any = None  # inpaint units: the mask fitted with the image (HxW uint8, 0/255)
    keeps_unmasked: bool = False  # inpaint_only outside img2img inpainting: the picture's unmasked area is kept
    region: Any = None  # the unit's effective region mask, [1, 1, H, W] in [0, 1] (region_mask); None: everywhere


def prepare_control_images(units: list, width: int, height: int, fallback_image=None,
                           fallback_resize_mode: str = "just resize", fallback_mask=None,
                           inpainting: bool = False) -> list[PreparedControl]:
    """Each unit's control image at width x height, per its resize mode, preprocessed.

    A unit without image gets `fallback_image` (img2img's init image) resized with
    `fallback_resize_mode`, the mode the init image itself was resized with. A preprocessor with a
    resolution (`pipelines.controlnet.resolution`) detects at the unit's `processor_res` or pixel-perfect
    resolution; any other runs on the picture as given; either map is then fitted to width x height.
    An inpaint unit's picture comes with its mask (`pipelines.controlnet.unit_mask`): the unit's own, else with the
    fallback image `fallback_mask` (img2img's prepared inpaint mask, HxW uint8), else none. `inpainting`: the call
    inpaints with a mask of its own, so inpaint_only units run as inpaint (the extension's fallback).
    """
    from pipelines.controlnet.inpaint_only import INPAINT_ONLY

    prepared = []
    for unit in units:
        unit = with_mask_resolved(unit)
        own = unit.image is not None
        source = (unit.image if own else fallback_image).convert("RGB")
        mode = unit.resize_mode if own else fallback_resize_mode
        control = PreparedControl(unit, None, None, source, mode, soft_injection=bool(getattr(unit, "soft_injection", False)))
        region = getattr(unit, "effective_region_mask", None)
        control.region = None if region is None else region_mask_tensor(region)
        if takes_mask(unit.preprocessor):
            if own:
                source_mask = None if unit.mask is None else mask_channel(unit.mask)
            else:
                source_mask = fallback_mask
            control.source_mask = np.zeros(source.size[::-1], np.uint8) if source_mask is None else source_mask
            control.keeps_unmasked = unit.preprocessor == INPAINT_ONLY and not inpainting
        else:
            resolution = unit_resolution(unit, source.size, width, height, mode)
            if resolution is not None:
                control.detected = detect_at_resolution(_preprocessor(unit), source, resolution)
        prepared.append(_at_size(control, width, height))
    return prepared


def resize_controls(controls: list[PreparedControl], width: int, height: int) -> list[PreparedControl]:
    """The same controls for a pass at another size (hires fix's second pass), as sd-webui-controlnet makes them:
    a map detected at a resolution is resized, not detected again; one without is made from the picture again and
    fitted to the new size."""
    return [_at_size(control, width, height) for control in controls]


def hires_second_pass_controls(controls: list[PreparedControl], width: int, height: int) -> list[PreparedControl]:
    """`resize_controls` for hires fix's second pass, where the extension forces soft injection on canny and mlsd
    units (`high_res_fix_forced_soft_injection` in scripts/hook.py); other units keep their own mode."""
    return [replace(control, soft_injection=control.soft_injection or forced_soft_in_hires(control.unit.preprocessor))
            for control in resize_controls(controls, width, height)]


def forced_soft_in_hires(preprocessor: str) -> bool:
    return any(name in preprocessor for name in HIRES_SOFT_PREPROCESSORS)


def soft_injection_scales(weight: float, count: int) -> list[float]:
    """The per-residual scales of the extension's soft injection for `count` residuals (down blocks, then middle)."""
    return [weight * SOFT_INJECTION_BASE ** float(SOFT_INJECTION_DEPTH - i) for i in range(count)]


def _at_size(control: PreparedControl, width: int, height: int) -> PreparedControl:
    import torch
    from PIL import Image

    if control.source_mask is not None:  # inpaint: picture and mask fitted together, no preprocessing
        colour, mask = fit_inpaint_map(control.source, control.source_mask, width, height, control.resize_mode)
        return replace(control, image=Image.fromarray(colour), mask=mask, tensor=inpaint_control(colour, mask))

    # Maps are fitted as the extension's detectmap_proc fits them (pipelines.controlnet.map_fit), not as img2img
    # resizes its init image: nearest for palettes, re-binarised edges, median-colour bands. A preprocessor without a
    # resolution (none, invert, monochrome, tile_resample) runs on the picture as given and its map is fitted after,
    # as the extension runs them: fitted first, a drawing's white page kept its lines from being thinned back.
    if control.detected is not None:
        image = fit_control_map(control.detected, width, height, control.resize_mode)
    elif uses_resolution(control.unit.preprocessor):  # processor_res None: detect at the generation size
        image = _preprocessor(control.unit)(fit_control_map(control.source, width, height, control.resize_mode))
    else:
        image = fit_control_map(_preprocessor(control.unit)(control.source), width, height, control.resize_mode)
    array = np.asarray(image, dtype=np.float32) / 255.0
    tensor = torch.from_numpy(array).permute(2, 0, 1)[None].contiguous()
    return replace(control, image=image, tensor=tensor)


def _preprocessor(unit):
    """The unit's preprocessor with its thresholds, picture -> RGB control map."""
    from pipelines.preprocessors import run_preprocessor

    return lambda picture: run_preprocessor(unit.preprocessor, picture, unit.threshold_a, unit.threshold_b)


def is_active(unit, step: int, total_steps: int) -> bool:
    """sd-webui-controlnet's schedule: active while start <= step / total <= end (step counted from 0)."""
    fraction = step / max(1, total_steps)
    return unit.guidance_start <= fraction <= unit.guidance_end


def controlnet_unet_extra(controls: list[PreparedControl], total_steps: int, time_ids=None):
    """Build the `unet_extra(model_input, t, step_cond, step, row_owners)` callable for a batch.

    `total_steps` is the number of steps this batch runs (img2img: fewer than `steps`), the
    denominator of the guidance window; `time_ids` ([B, 6], SDXL only) is each image's micro-conditioning.
    """

    def unet_extra(model_input, t, step_cond, step: int, row_owners: list[int]) -> dict:
        down, mid = None, None
        # Prompt rows, not "rows that are not negative": a step that skips the negative prompt
        # (pipelines.uncond_skip) lets a prompt row stand in for it, and that row keeps its control.
        prompt_rows = {row for parts in step_cond.cond_rows for row, _ in parts}
        for control in controls:
            unit = control.unit
            if not is_active(unit, step, total_steps):
                continue
            model = unit.model
            rows = [r for r in range(len(row_owners)) if r in prompt_rows] if unit.guess_mode else list(range(len(row_owners)))
            if not rows:
                continue
            latents = model_input[rows, :model.config.in_channels].to(device=model.device, dtype=model.dtype)
            kwargs = {}
            if time_ids is not None:
                kwargs["added_cond_kwargs"] = {
                    "text_embeds": step_cond.pooled[rows].to(device=model.device, dtype=model.dtype),
                    "time_ids": time_ids[[row_owners[r] for r in rows]].to(device=model.device, dtype=model.dtype),
                }
            image = control.tensor.to(device=model.device, dtype=model.dtype).expand(len(rows), -1, -1, -1)
            # Soft injection scales the residuals here with the extension's 0.825 ** (12 - i) (diffusers' guess_mode
            # would use its own logspace(-1, 0) scales); the rows stay as the unit's guess_mode chose them.
            soft = control.soft_injection
            unit_down, unit_mid = model(
                latents, t, encoder_hidden_states=step_cond.embeds[rows].to(device=model.device, dtype=model.dtype),
                controlnet_cond=image, conditioning_scale=1.0 if soft else float(unit.weight),
                guess_mode=unit.guess_mode and not soft, return_dict=False, **kwargs,
            )
            if soft:
                scales = soft_injection_scales(float(unit.weight), len(unit_down) + 1)
                unit_down = [r * scale for r, scale in zip(unit_down, scales)]
                unit_mid = unit_mid * scales[-1]
            if control.region is not None:  # after the weight, as the extension's `c * scale` then the mask
                unit_down = [apply_region_mask(r, control.region) for r in unit_down]
                unit_mid = apply_region_mask(unit_mid, control.region)
            if len(rows) != len(row_owners):  # guess mode: unconditional rows get no control
                unit_down = [_scatter_rows(r, rows, len(row_owners)) for r in unit_down]
                unit_mid = _scatter_rows(unit_mid, rows, len(row_owners))
            down = list(unit_down) if down is None else [a + b for a, b in zip(down, unit_down)]
            mid = unit_mid if mid is None else mid + unit_mid
        if down is None:
            return {}
        dtype = model_input.dtype
        return {"down_block_additional_residuals": [r.to(dtype) for r in down],
                "mid_block_additional_residual": mid.to(dtype)}

    return unet_extra


def _scatter_rows(values, rows: list[int], total: int):
    import torch

    full = torch.zeros((total, *values.shape[1:]), dtype=values.dtype, device=values.device)
    full[rows] = values
    return full
