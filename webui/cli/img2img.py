"""`mixkit img2img IMAGE "prompt"`: A1111's img2img from the command line, and its inpainting with --mask.

The flags are `mixkit generate`'s (model, sampler, seeds, LoRAs, performance, output) plus A1111's img2img and
inpaint controls, each a field of `pipelines.img2img.Img2ImgParams`, checked there before the model loads.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> None:
    from pipelines.image_prep import IMG2IMG_RESIZE_MODES
    from pipelines.img2img import Img2ImgParams
    from pipelines.inpaint_mask import MASKED_CONTENT
    from webui.cli.generate import add_generation_flags

    d = Img2ImgParams()
    p = subparsers.add_parser(
        "img2img", help="redraw an image from a prompt (img2img), or a masked part of it (inpaint, --mask)",
        description="A1111's img2img and inpaint: redraw IMAGE guided by the prompt, the whole picture or, with "
                    "--mask, the white part of the mask; save PNGs with A1111 infotext.")
    p.add_argument("image", help="the init image (PNG, JPEG, WebP ...; EXIF rotation applied, transparency on white)")
    p.add_argument("prompt", nargs="?", default="", help="the prompt, in the A1111 prompt language (default: empty)")
    p.add_argument("--denoising-strength", type=float, default=d.denoising_strength, metavar="STRENGTH",
                   help=f"how much of the image is redrawn, 0-1 (default {d.denoising_strength}); runs int(STRENGTH x "
                        "steps) + 1 steps, as A1111")
    p.add_argument("--exact-steps", action="store_true",
                   help="run exactly --steps steps (A1111's 'With img2img, do exactly the amount of steps the slider "
                        "specifies')")
    p.add_argument("--resize-mode", default=d.resize_mode, metavar="MODE",
                   help=f"how IMAGE is brought to --width x --height: {', '.join(IMG2IMG_RESIZE_MODES)} "
                        f"(default: {d.resize_mode})")
    p.add_argument("--mask", default=None, metavar="MASK",
                   help="inpaint: a mask image, white = redraw (or the strokes of a transparent image's alpha)")
    p.add_argument("--mask-blur", type=int, default=d.mask_blur, metavar="PIXELS",
                   help=f"with --mask: blur of the mask's edge (default {d.mask_blur})")
    p.add_argument("--masked-content", default=d.inpainting_fill, metavar="CONTENT",
                   help=f"with --mask: what the masked area starts from: {', '.join(MASKED_CONTENT)} "
                        f"(default: {d.inpainting_fill})")
    p.add_argument("--inpaint-not-masked", action="store_true",
                   help="with --mask: redraw the black part instead (A1111's 'Inpaint not masked')")
    p.add_argument("--only-masked", action="store_true",
                   help="with --mask: redraw the mask's region at full --width x --height and paste it back (A1111's "
                        "Inpaint area 'Only masked'); the result keeps IMAGE's size")
    p.add_argument("--only-masked-padding", type=int, default=d.inpaint_full_res_padding, metavar="PIXELS",
                   help=f"with --only-masked: pixels of context around the mask (default {d.inpaint_full_res_padding})")
    add_generation_flags(p, size_default="IMAGE's size, rounded down to a multiple of 8")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.base import init_image_size
    from pipelines.img2img import ImageToImage, Img2ImgParams, check_img2img_params
    from pipelines.params import GenerationLimits
    from webui.cli.generate import check_before_load, generate_and_save, generation_fields, load_pipeline

    check_mask_flags(args)
    image = read_init_image(args.image)
    mask = None if args.mask is None else read_mask(args.mask)
    fields = generation_fields(args)
    grid = 8  # SD's VAE, for the checks before the load; the loaded model's own grid sets the default size after it
    limits = GenerationLimits()
    defaulted = [side for side in ("width", "height") if getattr(args, side) is None]
    fields.update({side: value for side, value in zip(("width", "height"), init_image_size(image, grid))
                   if side in defaulted})
    width, height = fields["width"], fields["height"]
    if defaulted and (max(width, height) > limits.max_side or width * height > limits.max_pixels):
        raise ValueError(f"IMAGE {args.image!r} is {image.width}x{image.height}, larger than one generation may be "
                         f"({limits.max_side} px a side, {limits.max_pixels:,} pixels); pass --width and --height to "
                         "redraw it smaller (--resize-mode says how it is fitted)")
    params = Img2ImgParams(**fields, init_images=[image], mask=mask, denoising_strength=args.denoising_strength,
                           exact_steps=args.exact_steps, resize_mode=args.resize_mode, mask_blur=args.mask_blur,
                           inpainting_fill=args.masked_content, inpainting_mask_invert=args.inpaint_not_masked,
                           inpaint_full_res=args.only_masked, inpaint_full_res_padding=args.only_masked_padding)

    def check(params: Img2ImgParams) -> None:
        check_img2img_params(params, limits, grid)

    output, output_is_file = check_before_load(args, params, check)

    pipe, params = load_pipeline(args, ImageToImage, params, check,
                                 lambda model: init_image_size(image, model.vae_scale_factor))
    return generate_and_save(pipe, params, output, output_is_file)


# Inpaint flags that change nothing without --mask, and the Img2ImgParams field holding each one's default
MASK_ONLY_FLAGS = (("--mask-blur", "mask_blur", "mask_blur"), ("--masked-content", "masked_content", "inpainting_fill"),
                   ("--inpaint-not-masked", "inpaint_not_masked", "inpainting_mask_invert"),
                   ("--only-masked", "only_masked", "inpaint_full_res"),
                   ("--only-masked-padding", "only_masked_padding", "inpaint_full_res_padding"))


def check_mask_flags(args: argparse.Namespace) -> None:
    """Refuse inpaint flags given without --mask: A1111's img2img tab hides them, and a user who typed one expects
    inpainting, not a plain img2img run that ignores it."""
    from pipelines.img2img import Img2ImgParams

    if args.mask is not None:
        return
    d = Img2ImgParams()
    given = [flag for flag, name, field in MASK_ONLY_FLAGS if getattr(args, name) != getattr(d, field)]
    if given:
        raise ValueError(f"{', '.join(given)}: inpaint flag{'s' if len(given) > 1 else ''} without --mask; add "
                         f"--mask MASK (white = redraw) to inpaint, or leave out {' and '.join(given)}")


def read_init_image(path: str):
    """The init image, upright, 8-bit RGB (`mixkit.io.images.load_image`), its errors naming the flag."""
    from mixkit.io.images import load_image

    return load_image(_existing_file(path, "IMAGE"))


def read_mask(path: str):
    """The mask as it is stored (its alpha channel may hold the strokes, which a flattened RGB copy would lose);
    the pipeline reads it as A1111 does (`pipelines.inpaint_mask.binary_mask`)."""
    from PIL import Image, UnidentifiedImageError

    file = _existing_file(path, "--mask")
    try:
        with Image.open(file) as opened:
            opened.load()
            return opened.copy()
    except Image.DecompressionBombError as error:
        raise ValueError(f"--mask {path!r} is refused by Pillow's decompression-bomb guard: {error}") from None
    except UnidentifiedImageError:
        raise ValueError(f"--mask {path!r} is not an image file Pillow can read (PNG, JPEG, WebP, ...).") from None
    except (OSError, SyntaxError) as error:
        raise ValueError(f"--mask {path!r} is damaged or truncated and cannot be read: {error}") from None


def _existing_file(path: str, what: str) -> Path:
    file = Path(path).expanduser()
    if not file.exists():
        raise FileNotFoundError(f"{what} {path!r} does not exist; check the path.")
    if file.is_dir():
        raise ValueError(f"{what} {path!r} is a folder; give an image file.")
    return file
