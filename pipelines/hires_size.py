"""Where the hires fix's second pass runs, computed as AUTOMATIC1111 WebUI does (checked against its processing.py).

A1111 (`StableDiffusionProcessingTxt2Img.calculate_target_resolution` and `sample_hr_pass`, in
modules/processing.py) never refuses a hires size and never stretches the image:

- With `hr_scale` the first pass is upscaled to `int(width * hr_scale)` x `int(height * hr_scale)`
  pixels, which need not be a multiple of 8 (1.3 x 512 = 665). The latents are interpolated to
  `665 // 8` = 83 cells (or the 665 px image is VAE-encoded, which also gives 83), so the second
  pass, and the image, are 664 px.
- With one of `hr_resize_x/y` set, the other follows the first pass's aspect ratio (floor division).
- With both set, the first pass is scaled to *cover* hr_resize_x x hr_resize_y keeping its aspect
  ratio, and the surplus, counted in whole latent cells (`(upscaled - resize) // 8`), is cut from
  the upscaled latents, half before (rounded down) and half after (rounded up). For pixel upscalers
  too the cut is made on the latents after encoding the whole upscaled image, not on the image.

All sizes are in pixels unless named `cells` (latent cells, `factor` pixels each).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HiresSize:
    """The first pass is upscaled to upscale_width x upscale_height pixels; the second pass runs on the
    `crop` (left, top, right, bottom, in latent cells) of that upscaled latent grid."""

    upscale_width: int  # A1111's hr_upscale_to_x
    upscale_height: int  # A1111's hr_upscale_to_y
    crop: tuple[int, int, int, int]
    factor: int  # pixels per latent cell (the VAE's scale factor; A1111's opt_f = 8)

    @property
    def grid(self) -> tuple[int, int]:
        """Latent cells (width, height) of the upscaled first pass, before cropping."""
        return self.upscale_width // self.factor, self.upscale_height // self.factor

    @property
    def width(self) -> int:
        """Width of the second pass and of the final image."""
        return (self.crop[2] - self.crop[0]) * self.factor

    @property
    def height(self) -> int:
        return (self.crop[3] - self.crop[1]) * self.factor

    @property
    def size(self) -> tuple[int, int]:
        return self.width, self.height


def hires_upscale_size(width: int, height: int, hr_scale: float, resize_x: int, resize_y: int) -> tuple[int, int]:
    """The size A1111 upscales a width x height first pass to (hr_upscale_to_x, hr_upscale_to_y)."""
    if resize_x == 0 and resize_y == 0:
        return int(width * hr_scale), int(height * hr_scale)
    if resize_y == 0:
        return resize_x, resize_x * height // width
    if resize_x == 0:
        return resize_y * width // height, resize_y
    # Both set: cover the requested box keeping the first pass's aspect ratio. The float comparison
    # is A1111's; with exactly equal ratios it takes the second branch, which then crops nothing.
    if width / height < resize_x / resize_y:
        return resize_x, resize_x * height // width
    return resize_y * width // height, resize_y


def hires_truncation(upscale_width: int, upscale_height: int, resize_x: int, resize_y: int,
                     factor: int) -> tuple[int, int]:
    """Latent cells (x, y) A1111 cuts from the upscaled grid: only when both resize sides are set."""
    if resize_x == 0 or resize_y == 0:
        return 0, 0
    return (upscale_width - resize_x) // factor, (upscale_height - resize_y) // factor


def hires_crop_box(grid_width: int, grid_height: int, truncate_x: int, truncate_y: int) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) in cells of A1111's latent slice
    `samples[:, :, ty//2 : H - (ty+1)//2, tx//2 : W - (tx+1)//2]`: an odd surplus loses one more cell
    at the end (right, bottom) than at the start."""
    return (truncate_x // 2, truncate_y // 2, grid_width - (truncate_x + 1) // 2, grid_height - (truncate_y + 1) // 2)


def plan_hires_size(width: int, height: int, hr_scale: float, resize_x: int, resize_y: int, factor: int) -> HiresSize:
    """Upscale size and latent crop of the second pass for a width x height first pass (see the module doc)."""
    up_w, up_h = hires_upscale_size(width, height, hr_scale, resize_x, resize_y)
    truncate_x, truncate_y = hires_truncation(up_w, up_h, resize_x, resize_y, factor)
    crop = hires_crop_box(up_w // factor, up_h // factor, truncate_x, truncate_y)
    return HiresSize(upscale_width=up_w, upscale_height=up_h, crop=crop, factor=factor)
