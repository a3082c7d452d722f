"""Image upscaling: plain resamplers and the Stable Diffusion x4 upscaler, tiled for large images.

Every upscale is checked against a pixel budget before it starts, because the output of an x4
model on a large input is the first thing to exhaust memory. Tiling splits the input into
overlapping tiles, upscales each, and blends the overlaps with linear ramps so no seam shows;
for a plain resampler, tiled and untiled results agree up to the resampler's edge handling.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable

from mixkit.registry import Registry


@dataclass(frozen=True)
class UpscaleLimits:
    max_pixels: int = 4096 * 4096  # output pixels; ~200 MB as float32 RGB during blending
    max_scale: float = 8.0


def _resampler(method_name: str):
    def upscale(image, width: int, height: int):
        from PIL import Image

        return image.resize((width, height), getattr(Image.Resampling, method_name))

    return upscale


# Pixel upscalers by the names the WebUI shows: (image, width, height) -> image.
UPSCALERS: Registry[Callable] = Registry("upscaler")
UPSCALERS.register("Lanczos", _resampler("LANCZOS"))
UPSCALERS.register("Nearest", _resampler("NEAREST"))
UPSCALERS.register("Bicubic", _resampler("BICUBIC"))


def target_size(width: int, height: int, scale: Any) -> tuple[int, int]:
    """The size an upscale by `scale` ends at: each side scaled and floored to a multiple of 8.

    A1111's `Upscaler.upscale` (every upscaler of its Extras tab, Lanczos and Nearest included) computes
    `dest = int((side * scale) // 8 * 8)` and resizes its result to that, so 100x75 by 2 is 200x144.
    """
    return int((width * scale) // 8 * 8), int((height * scale) // 8 * 8)


def native_size(width: int, height: int, scale: Any) -> tuple[int, int]:
    """The size a resampler upscales to before the final resize to `target_size`: A1111's Lanczos and
    Nearest upscalers resize to `int(side * scale)` first, then `Upscaler.upscale` Lanczos-resizes to the target."""
    return int(width * scale), int(height * scale)


def check_upscale(width: int, height: int, scale: Any, limits: UpscaleLimits, upscaler: Any = None) -> tuple[int, int]:
    """Validate a scale factor for an image of width x height; return the output size.

    With `upscaler` (a name or an object), a model upscaler's larger sizes on the way (an x4 network run for x2) are
    checked too, so a queued Extras job cannot fail on them later."""
    # the range refuses NaN and infinities (math.isfinite would raise OverflowError on a huge int)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) \
            or not 0 < scale <= limits.max_scale:
        raise ValueError(f"Upscale factor must be a number in (0, {limits.max_scale}], got {scale!r}.")
    out_w, out_h = target_size(width, height, scale)
    check_output_size(out_w, out_h, limits)
    entry = UPSCALERS.get(upscaler) if isinstance(upscaler, str) else upscaler
    if hasattr(entry, "check_passes"):
        entry.check_passes(width, height, out_w, out_h, limits, scale=scale)
    return out_w, out_h


def check_output_size(width: int, height: int, limits: UpscaleLimits) -> None:
    if width < 1 or height < 1:
        raise ValueError(f"The upscaled size {width}x{height} is empty; use a larger scale.")
    if width * height > limits.max_pixels:
        raise ValueError(
            f"Upscaling to {width}x{height} ({width * height} pixels) is over the budget of {limits.max_pixels} "
            "pixels (UpscaleLimits.max_pixels); use a smaller scale or raise the limit."
        )


def tile_starts(length: int, tile: int, overlap: int) -> list[int]:
    """Evenly spread tile offsets along one axis, adjacent tiles overlapping by at least `overlap`."""
    if length <= tile:
        return [0]
    count = math.ceil((length - overlap) / (tile - overlap))
    return [round(i * (length - tile) / (count - 1)) for i in range(count)]


def _aligned_tiles(length: int, out_length: int, tile: int, overlap: int) -> tuple[list[int], int]:
    """Tile offsets and size snapped to the scale's period (2 source pixels for x1.5), so that every
    tile's output pixels sample the source at the same positions as an untiled resize would."""
    period = length // math.gcd(length, out_length)
    if period == 1 or period > tile // 4:
        return tile_starts(length, tile, overlap), tile
    tile -= tile % period
    return [start - start % period for start in tile_starts(length, tile, overlap)], tile


def _ramp(length: int, before: int, after: int):
    """Blend weights along one axis: rising over `before` pixels, falling over `after` pixels."""
    import numpy as np

    weights = np.ones(length, dtype=np.float64)
    if before:
        weights[:before] = np.minimum(weights[:before], (np.arange(before) + 0.5) / before)
    if after:
        weights[length - after:] = np.minimum(weights[length - after:], (after - np.arange(after) - 0.5) / after)
    return weights


def tiled_upscale(image, width: int, height: int, upscale_tile: Callable, *, tile: int = 512, overlap: int = 32):
    """Upscale `image` to width x height tile by tile; `upscale_tile(tile_image, w, h)` does one tile.

    Tiles are `tile` input pixels wide and overlap by `overlap`; in the overlaps the outputs are
    blended with linear weights, so a tile's border pixels (where a resampler or a model sees
    only half its context) count for little.
    """
    import numpy as np
    from PIL import Image

    if not isinstance(tile, int) or tile < 8:
        raise ValueError(f"tile_size must be an integer >= 8 pixels, got {tile!r}.")
    if not isinstance(overlap, int) or not 0 <= overlap < tile // 2:
        raise ValueError(f"tile_overlap must be an integer in [0, {tile // 2 - 1}] for tile_size {tile}, got {overlap!r}.")
    image = image.convert("RGB")
    src_w, src_h = image.size
    sx, sy = width / src_w, height / src_h
    total = np.zeros((height, width, 3), dtype=np.float64)
    weight = np.zeros((height, width, 1), dtype=np.float64)
    (xs, tile_w), (ys, tile_h) = _aligned_tiles(src_w, width, tile, overlap), _aligned_tiles(src_h, height, tile, overlap)
    for y0 in ys:
        for x0 in xs:
            x1, y1 = min(src_w, x0 + tile_w), min(src_h, y0 + tile_h)
            ox0, ox1, oy0, oy1 = round(x0 * sx), round(x1 * sx), round(y0 * sy), round(y1 * sy)
            piece = upscale_tile(image.crop((x0, y0, x1, y1)), ox1 - ox0, oy1 - oy0)
            if piece.size != (ox1 - ox0, oy1 - oy0):
                piece = piece.resize((ox1 - ox0, oy1 - oy0), Image.Resampling.LANCZOS)
            ramp_x = _ramp(ox1 - ox0, round(overlap * sx) if x0 > 0 else 0, round(overlap * sx) if x1 < src_w else 0)
            ramp_y = _ramp(oy1 - oy0, round(overlap * sy) if y0 > 0 else 0, round(overlap * sy) if y1 < src_h else 0)
            w = (ramp_y[:, None] * ramp_x[None, :])[..., None]
            total[oy0:oy1, ox0:ox1] += np.asarray(piece.convert("RGB"), dtype=np.float64) * w
            weight[oy0:oy1, ox0:ox1] += w
    return Image.fromarray(np.clip(np.round(total / weight), 0, 255).astype(np.uint8))


def upscale_image(image, scale: float | None = None, *, width: int | None = None, height: int | None = None,
                  upscaler: Any = "Lanczos", tile_size: int = 0, tile_overlap: int | None = None,
                  limits: UpscaleLimits | None = None):
    """Upscale a PIL image by `scale` (or to width x height) with a named resampler or a model.

    `upscaler` is a name from `UPSCALERS` ("Lanczos", "Nearest", "Bicubic", or a model file's stem registered by
    `pipelines.model_upscale.register_model_upscalers`) or an object with `upscale(image, width, height)` such as
    `SDx4Upscaler` or `ModelUpscaler`; `limits`, when given, bounds an object's own sizes on the way too (an x4
    network's pass for a x2 target) if its `upscale` takes `limits=` as these two do. `tile_size` > 0 processes
    tiles of that many input pixels (models do this themselves with their own tile size), overlapping by `tile_overlap`
    (default 32 pixels, less for tiles under 66 pixels: the overlap must stay under half a tile).
    By `scale` the size is A1111's Extras size (`target_size`: each side floored to a multiple of 8), reached
    as A1111 does: a resampler resizes to `int(side * scale)`, then Lanczos to that size.
    """
    from PIL import Image

    given_limits, limits = limits, limits or UpscaleLimits()
    if not isinstance(image, Image.Image):
        raise TypeError(f"image must be a PIL image, got {type(image).__name__}.")
    if (scale is None) == (width is None and height is None):
        raise ValueError("Give either scale or width/height, not both and not neither.")
    entry = upscaler if hasattr(upscaler, "upscale") else UPSCALERS.get(upscaler)
    model = hasattr(entry, "upscale")  # a model upscales (and tiles) itself, then resizes to the exact size
    run = entry.upscale if model else entry
    if scale is not None:
        out_w, out_h = check_upscale(image.width, image.height, scale, limits)
        if not model:  # a resampler: A1111's two steps, native size then the target
            native = _run(image, *native_size(image.width, image.height, scale), run, tile_size, tile_overlap)
            return native if native.size == (out_w, out_h) else native.resize((out_w, out_h), Image.Resampling.LANCZOS)
    else:
        for name, value in (("width", width), ("height", height)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        out_w, out_h = width, height
        check_output_size(out_w, out_h, limits)
    if model:
        options = {}
        if given_limits is not None and _takes_keyword(run, "limits"):  # else the object keeps its own budget
            options["limits"] = given_limits
        if scale is not None and _takes_keyword(run, "scale"):  # A1111 decides a network's runs by the factor
            options["scale"] = scale
        return run(image.convert("RGB"), out_w, out_h, **options)
    return _run(image, out_w, out_h, run, tile_size, tile_overlap)


def _takes_keyword(upscale: Callable, name: str) -> bool:
    """Whether a model's `upscale` takes `name=` (`limits`, `scale`: ModelUpscaler's do; an object written to the
    plain protocol need not)."""
    import inspect

    try:
        return name in inspect.signature(upscale).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def _run(image, width: int, height: int, resample: Callable, tile_size: int, tile_overlap: int | None):
    """A resampler to width x height, tile by tile when `tile_size` is set."""
    if tile_size:
        overlap = tile_overlap if tile_overlap is not None else (min(32, tile_size // 2 - 1)
                                                                 if isinstance(tile_size, int) else 32)
        return tiled_upscale(image, width, height, resample, tile=tile_size, overlap=overlap)
    return resample(image.convert("RGB"), width, height)


def _edge_padded(image, right: int, bottom: int):
    """`image` grown by `right` and `bottom` pixels that repeat its last column and row."""
    import numpy as np
    from PIL import Image

    if not right and not bottom:
        return image
    return Image.fromarray(np.pad(np.asarray(image.convert("RGB")), ((0, bottom), (0, right), (0, 0)), mode="edge"))


class SDx4Upscaler:
    """Stable Diffusion's x4 upscaler (diffusers `StableDiffusionUpscalePipeline`), run on tiles.

    The model denoises at the input's resolution and decodes 4x larger, so memory grows with the
    input: inputs larger than `tile_size` are processed in overlapping tiles and blended.
    """

    name = "SD x4"  # what the infotext's "Hires upscaler" shows
    scale = 4

    def __init__(self, pipeline, *, prompt: str = "", negative_prompt: str = "", steps: int = 20,
                 guidance_scale: float = 9.0, noise_level: int = 20, seed: int = 0, tile_size: int = 128,
                 tile_overlap: int = 16, limits: UpscaleLimits | None = None) -> None:
        self.pipeline = pipeline
        self.prompt, self.negative_prompt = prompt, negative_prompt
        self.steps, self.guidance_scale, self.noise_level, self.seed = steps, guidance_scale, noise_level, seed
        self.tile_size, self.tile_overlap = tile_size, tile_overlap
        self.limits = limits or UpscaleLimits()
        max_noise = pipeline.config.get("max_noise_level", 350) if hasattr(pipeline, "config") else 350
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 1000:
            raise ValueError(f"steps must be an integer in [1, 1000], got {steps!r}.")
        if isinstance(noise_level, bool) or not isinstance(noise_level, int) or not 0 <= noise_level <= max_noise:
            raise ValueError(f"noise_level must be an integer in [0, {max_noise}], got {noise_level!r}.")

    @classmethod
    def from_pretrained(cls, source: str | os.PathLike, *, dtype=None, device=None, **options: Any) -> "SDx4Upscaler":
        """Load a diffusers x4-upscaler folder (e.g. a local copy of stabilityai/stable-diffusion-x4-upscaler)."""
        from pathlib import Path

        import torch
        from diffusers import StableDiffusionUpscalePipeline

        from mixkit.errors import ModelNotFoundError

        folder = Path(source).expanduser()
        if not (folder / "model_index.json").is_file():
            raise ModelNotFoundError(f"{folder} is not a diffusers x4-upscaler folder (model_index.json is missing).")
        pipeline = StableDiffusionUpscalePipeline.from_pretrained(folder, dtype=dtype or torch.float32)
        pipeline.set_progress_bar_config(disable=True)
        if device is not None:
            pipeline.to(device)
        return cls(pipeline, **options)

    def _upscale_tile(self, tile, width: int, height: int):
        import torch
        from PIL import Image

        generator = torch.Generator("cpu").manual_seed(self.seed)  # same noise per tile: tiles match in overlaps
        # diffusers resizes the input down to a multiple of the VAE factor (4 for the x4 upscaler): a side below it
        # became 0 ("height and width must be > 0" for a 1x1 or 3x5 image) and a 7-pixel side was squeezed into 4.
        # Edge-padded up to the multiple instead, the model sees every pixel and the padding's output is cut off.
        multiple = int(getattr(self.pipeline, "vae_scale_factor", 1) or 1)
        pad_x, pad_y = -tile.width % multiple, -tile.height % multiple
        out = self.pipeline(
            prompt=self.prompt, negative_prompt=self.negative_prompt or None, image=_edge_padded(tile, pad_x, pad_y),
            num_inference_steps=self.steps, guidance_scale=self.guidance_scale, noise_level=self.noise_level,
            generator=generator, output_type="pil",
        ).images[0]
        if pad_x or pad_y:
            out = out.crop((0, 0, out.width * tile.width // (tile.width + pad_x),
                            out.height * tile.height // (tile.height + pad_y)))
        return out if out.size == (width, height) else out.resize((width, height), Image.Resampling.LANCZOS)

    def upscale(self, image, width: int, height: int, *, limits: UpscaleLimits | None = None):
        """Upscale 4x with the model, then resample to exactly width x height; the x4 size and the target are
        checked against `limits` (the caller's budget, default this upscaler's own)."""
        from PIL import Image

        image = image.convert("RGB")
        x4_w, x4_h = image.width * self.scale, image.height * self.scale
        check_output_size(max(width, x4_w), max(height, x4_h), limits or self.limits)
        if image.width <= self.tile_size and image.height <= self.tile_size:
            result = self._upscale_tile(image, x4_w, x4_h)
        else:
            result = tiled_upscale(image, x4_w, x4_h, self._upscale_tile, tile=self.tile_size, overlap=self.tile_overlap)
        return result if result.size == (width, height) else result.resize((width, height), Image.Resampling.LANCZOS)
