"""`mixkit outpaint IMAGE "prompt"`: A1111's "Poor man's outpainting" script from the command line.

The picture is extended by --pixels on each --direction (`pipelines.outpaint.outpaint_sides`, each extended axis
rounded up to the model's size step as A1111 rounds it) and the new border is painted by one inpainting pass of
`pipelines.outpaint.outpaint` over the whole canvas, with A1111's masks and blur. Its PNG carries the infotext of that
pass (Denoising strength, Mask blur as A1111 records it, doubled, and Masked content), so "Send to inpaint" restores
it. Everything is checked at the extended size before the model loads.
"""

from __future__ import annotations

import argparse


def add_parser(subparsers) -> None:
    from pipelines.img2img import Img2ImgParams
    from pipelines.inpaint_mask import MASKED_CONTENT
    from pipelines.outpaint import MAX_EXTENSION, MAX_MASK_BLUR, OUTPAINT_DIRECTIONS
    from webui.cli.generate import add_generation_flags

    d = Img2ImgParams()
    p = subparsers.add_parser(
        "outpaint", help="extend an image on any side and paint the new border (A1111's Poor man's outpainting)",
        description="A1111's Poor man's outpainting: put IMAGE on a larger canvas, --pixels more on each --direction "
                    "(each extended side rounded up to the model's size step, 8 for SD), and paint the new border "
                    "guided by the prompt; save PNGs with A1111 infotext. The size is IMAGE's plus the border, so "
                    "--width/--height are not taken.")
    p.add_argument("image", help="the picture to extend (PNG, JPEG, WebP ...; EXIF rotation applied, transparency on "
                                 "white)")
    p.add_argument("prompt", nargs="?", default="", help="the prompt, in the A1111 prompt language (default: empty)")
    p.add_argument("--pixels", type=int, default=128, metavar="PIXELS",
                   help=f"A1111's 'Pixels to expand' on each direction, 1-{MAX_EXTENSION} (default 128)")
    p.add_argument("--direction", action="append", default=None, metavar="SIDE",
                   help=f"a side to extend: {', '.join(OUTPAINT_DIRECTIONS)} (repeatable, or comma-separated; "
                        "default: all four)")
    p.add_argument("--mask-blur", type=int, default=4, metavar="PIXELS",
                   help=f"A1111's script 'Mask blur', 0-{MAX_MASK_BLUR} (default 4): the border reaches twice it into "
                        "the picture and is blurred by twice it, as A1111 does")
    p.add_argument("--masked-content", default="fill", metavar="CONTENT",
                   help=f"what the border starts from: {', '.join(MASKED_CONTENT)} (default: fill, the script's)")
    p.add_argument("--denoising-strength", type=float, default=d.denoising_strength, metavar="STRENGTH",
                   help=f"how much of the border is redrawn, 0-1 (default {d.denoising_strength}; 0.8 or more for "
                        "'fill')")
    add_generation_flags(p, size_default="not taken: IMAGE's size plus the border")
    p.set_defaults(func=run)


def directions_of(args: argparse.Namespace) -> list[str]:
    """--direction's sides, commas split, in the order given; all four when none is given."""
    from pipelines.outpaint import OUTPAINT_DIRECTIONS

    if args.direction is None:
        return list(OUTPAINT_DIRECTIONS)
    return [side.strip().lower() for value in args.direction for side in value.split(",") if side.strip()]


def run(args: argparse.Namespace) -> int:
    from pipelines.img2img import ImageToImage, Img2ImgParams, check_img2img_params
    from pipelines.image_prep import normalize_init_image
    from pipelines.outpaint import check_outpaint_inputs, outpaint_sides
    from pipelines.params import GenerationLimits
    from webui.cli.generate import check_before_load, generate_and_save, generation_fields, load_pipeline
    from webui.cli.img2img import read_init_image

    given = [flag for flag, value in (("--width", args.width), ("--height", args.height)) if value is not None]
    if given:
        raise ValueError(f"{' and '.join(given)}: outpaint's size is IMAGE's plus the border; set the border with "
                         "--pixels and --direction, or resize IMAGE first")
    image = normalize_init_image(read_init_image(args.image))
    grid, limits = 8, GenerationLimits()  # SD's VAE grid before the load; `outpaint` checks the model's own after it
    try:
        sides = outpaint_sides(image.width, image.height, args.pixels, directions_of(args), grid)
        width, height = check_outpaint_inputs(image, **sides, multiple=grid, mask_blur=args.mask_blur)
    except ValueError as error:
        message = str(error)
        for name, flag in SCRIPT_FLAGS.items():
            message = message.replace(f"{name} must", f"{flag} must")
        raise ValueError(message) from None
    if max(width, height) > limits.max_side or width * height > limits.max_pixels:
        raise ValueError(f"IMAGE is {image.width}x{image.height}; with the border it is {width}x{height}, larger than "
                         f"one generation may be ({limits.max_side} px a side, {limits.max_pixels:,} pixels); use "
                         "fewer --pixels or --direction sides, or outpaint a smaller image")
    params = Img2ImgParams(**{**generation_fields(args), "width": width, "height": height}, init_images=[image],
                           denoising_strength=args.denoising_strength, inpainting_fill=args.masked_content,
                           mask_blur=2 * args.mask_blur)

    def check(params: Img2ImgParams) -> None:
        check_img2img_params(params, limits, grid)

    output, output_is_file = check_before_load(args, params, check)
    pipe, params = load_pipeline(args, ImageToImage, params, check, lambda model: (width, height))
    return generate_and_save(Outpainter(pipe, sides, args.mask_blur), params, output, output_is_file)


# the script's arguments, as `pipelines.outpaint`'s checks name them -> their flags
SCRIPT_FLAGS = {"pixels": "--pixels", "directions": "--direction", "mask_blur": "--mask-blur"}


class Outpainter:
    """An `ImageToImage` pipeline called as `generate_and_save` calls one, running `outpaint` with fixed sides."""

    # Img2ImgParams fields `outpaint` sets itself (from the sides and the script's mask blur)
    RESERVED = ("width", "height", "init_images", "mask", "latent_mask", "inpaint_full_res", "mask_blur", "mask_blur_x",
                "mask_blur_y", "inpainting_fill")

    def __init__(self, pipe, sides: dict[str, int], mask_blur: int):
        self.pipe, self.sides, self.mask_blur = pipe, sides, mask_blur

    def __call__(self, params, callback=None, control=None):
        from pipelines.outpaint import outpaint

        rest = {name: getattr(params, name) for name in params.__dataclass_fields__ if name not in self.RESERVED}
        return outpaint(self.pipe, params.init_images[0], **self.sides, inpainting_fill=params.inpainting_fill,
                        mask_blur=self.mask_blur, callback=callback, control=control, **rest)
