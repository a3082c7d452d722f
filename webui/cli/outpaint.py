"""`mixkit outpaint IMAGE "prompt"`: A1111's "Poor man's outpainting" and "Outpainting mk2" scripts from the command
line.

The picture is extended by --pixels on each --direction (`pipelines.outpaint.outpaint_sides`, each extended axis
rounded up to the model's size step as A1111 rounds it) and the new border is painted by one inpainting pass over the
whole canvas with A1111's masks and blur: `pipelines.outpaint.outpaint` (--method poor, the default) starts the border
from --masked-content, `pipelines.outpaint_mk2.outpaint_mk2` (--method mk2) from noise matched to the picture. Its PNG
carries the infotext of that pass (Denoising strength, Mask blur as A1111 records it, and Masked content), and
--infotext reads one back (webui.cli.outpaint_infotext). Everything is checked at the extended size before the model
loads.
"""

from __future__ import annotations

import argparse
import sys

METHODS = ("poor", "mk2")  # A1111's "Poor man's outpainting" and "Outpainting mk2"
DEFAULT_MASK_BLUR = {"poor": 4, "mk2": 8}  # each script's slider default
MK2_FLAGS = {"falloff_exponent": ("--falloff-exponent", 1.0), "color_variation": ("--color-variation", 0.05)}


def add_parser(subparsers) -> None:
    from pipelines.inpaint_mask import MASKED_CONTENT
    from pipelines.img2img import Img2ImgParams
    from pipelines.matched_noise import MAX_COLOR_VARIATION, MAX_FALLOFF_EXPONENT
    from pipelines.outpaint import MAX_EXTENSION, MAX_MASK_BLUR, OUTPAINT_DIRECTIONS
    from pipelines.outpaint_mk2 import MAX_MK2_MASK_BLUR, MAX_PIXELS, MIN_PIXELS
    from webui.cli.generate import add_generation_flags

    d = Img2ImgParams()
    p = subparsers.add_parser(
        "outpaint", help="extend an image on any side and paint the new border (A1111's Poor man's outpainting or "
                         "Outpainting mk2)",
        description="A1111's outpainting scripts: put IMAGE on a larger canvas, --pixels more on each --direction "
                    "(each extended side rounded up to the model's size step, 8 for SD), and paint the new border "
                    "guided by the prompt; save PNGs with A1111 infotext. The size is IMAGE's plus the border, so "
                    "--width/--height are not taken.")
    p.add_argument("image", help="the picture to extend (PNG, JPEG, WebP ...; EXIF rotation applied, transparency on "
                                 "white)")
    p.add_argument("prompt", nargs="?", default=None,
                   help="the prompt, in the A1111 prompt language (default: --infotext's, else empty)")
    p.add_argument("--method", choices=METHODS, default="poor",
                   help="poor: A1111's Poor man's outpainting, the border starts from --masked-content (default); "
                        "mk2: A1111's Outpainting mk2, the border starts from noise matched to the picture's "
                        "frequencies and colours and is redrawn from it (A1111 recommends 80-100 steps, Euler a, "
                        "denoising strength 0.8)")
    p.add_argument("--infotext", default=None, metavar="IMAGE_OR_TEXT",
                   help="start from an A1111 infotext: an image that holds one, a .txt file, the text itself, or - "
                        "for stdin: prompt, seed, sampler, CFG, denoising strength, the script's mask blur (the "
                        "infotext's divided by 2, or 4 with --method mk2) and masked content; not its Size (IMAGE's "
                        "plus the border); flags given here win over it")
    p.add_argument("--pixels", type=int, default=128, metavar="PIXELS",
                   help=f"A1111's 'Pixels to expand' on each direction, 1-{MAX_EXTENSION} ({MIN_PIXELS}-{MAX_PIXELS} "
                        "with --method mk2, its slider; default 128)")
    p.add_argument("--direction", action="append", default=None, metavar="SIDE",
                   help=f"a side to extend: {', '.join(OUTPAINT_DIRECTIONS)} (repeatable, or comma-separated; "
                        "default: all four)")
    p.add_argument("--mask-blur", type=int, default=None, metavar="PIXELS",
                   help=f"the script's 'Mask blur': poor 0-{MAX_MASK_BLUR} (default {DEFAULT_MASK_BLUR['poor']}), the "
                        "border reaching twice it into the picture, blurred by twice it; mk2 "
                        f"0-{MAX_MK2_MASK_BLUR} (default {DEFAULT_MASK_BLUR['mk2']}), reaching it into the picture, "
                        "blurred by 4x it on the extended axes (as A1111)")
    p.add_argument("--masked-content", default=None, metavar="CONTENT",
                   help=f"--method poor: what the border starts from: {', '.join(MASKED_CONTENT)} (default: fill, the "
                        "script's); mk2 always starts from its matched noise ('original')")
    p.add_argument("--falloff-exponent", type=float, default=None, metavar="Q",
                   help=f"--method mk2: A1111's 'Fall-off exponent (lower=higher detail)', 0-{MAX_FALLOFF_EXPONENT:g} "
                        "(default 1)")
    p.add_argument("--color-variation", type=float, default=None, metavar="X",
                   help=f"--method mk2: A1111's 'Color variation' of the fill's noise, 0-{MAX_COLOR_VARIATION:g} "
                        "(default 0.05)")
    p.add_argument("--denoising-strength", type=float, default=None, metavar="STRENGTH",
                   help=f"how much of the border is redrawn, 0-1 (default {d.denoising_strength}; 0.8 or more for "
                        "'fill' and mk2)")
    add_generation_flags(p, size_default="not taken: IMAGE's size plus the border")
    p.set_defaults(func=run)


def directions_of(args: argparse.Namespace) -> list[str]:
    """--direction's sides, commas split, in the order given; all four when none is given."""
    from pipelines.outpaint import OUTPAINT_DIRECTIONS

    if args.direction is None:
        return list(OUTPAINT_DIRECTIONS)
    return [side.strip().lower() for value in args.direction for side in value.split(",") if side.strip()]


def check_method_flags(args: argparse.Namespace) -> None:
    """The flags of one script are refused with the other's --method."""
    if args.method == "poor":
        given = [flag for dest, (flag, _) in MK2_FLAGS.items() if getattr(args, dest) is not None]
        if given:
            raise ValueError(f"{' and '.join(given)}: only for --method mk2 (Outpainting mk2's fill); add --method "
                             "mk2 or leave them out")
    elif args.masked_content is not None:
        raise ValueError(f"--masked-content {args.masked_content}: --method mk2 always starts the border from its "
                         "matched noise ('original'); leave it out, or use --method poor")


def run(args: argparse.Namespace) -> int:
    from pipelines.img2img import ImageToImage, Img2ImgParams, check_img2img_params
    from pipelines.image_prep import normalize_init_image
    from pipelines.params import GenerationLimits
    from webui.cli.generate import check_before_load, generate_and_save, generation_fields, load_pipeline
    from webui.cli.img2img import read_init_image

    given = [flag for flag, value in (("--width", args.width), ("--height", args.height)) if value is not None]
    if given:
        raise ValueError(f"{' and '.join(given)}: outpaint's size is IMAGE's plus the border; set the border with "
                         "--pixels and --direction, or resize IMAGE first")
    check_method_flags(args)
    from webui.cli.extras import register_face_restorer_flags

    register_face_restorer_flags(args)  # before --restore-faces is checked: the folders' restorers
    infotext_keys = None
    if args.infotext is not None:
        args, infotext_keys = _apply_infotext(args)
    args.prompt = "" if args.prompt is None else args.prompt
    mask_blur = DEFAULT_MASK_BLUR[args.method] if args.mask_blur is None else args.mask_blur
    mk2 = None if args.method == "poor" else {
        dest: default if getattr(args, dest) is None else getattr(args, dest) for dest, (_, default) in MK2_FLAGS.items()}
    image = normalize_init_image(read_init_image(args.image))
    grid, limits = 8, GenerationLimits()  # SD's VAE grid before the load; `outpaint` checks the model's own after it
    sides, width, height = _checked_sides(args, image, grid, mask_blur, mk2)
    if max(width, height) > limits.max_side or width * height > limits.max_pixels:
        raise ValueError(f"IMAGE is {image.width}x{image.height}; with the border it is {width}x{height}, larger than "
                         f"one generation may be ({limits.max_side} px a side, {limits.max_pixels:,} pixels); use "
                         "fewer --pixels or --direction sides, or outpaint a smaller image")
    d = Img2ImgParams()
    # the pass's own masked content and blur, as the scripts set them, for the checks (`Outpainter` runs the script)
    content, pass_blur = ((args.masked_content or "fill"), 2 * mask_blur) if mk2 is None else ("original", 4 * mask_blur)
    params = Img2ImgParams(**{**generation_fields(args), "width": width, "height": height}, init_images=[image],
                           denoising_strength=d.denoising_strength if args.denoising_strength is None
                           else args.denoising_strength, inpainting_fill=content, mask_blur=pass_blur)

    def check(params: Img2ImgParams) -> None:
        check_img2img_params(params, limits, grid)

    output, output_is_file = check_before_load(args, params, check)
    pipe, params = load_pipeline(args, ImageToImage, params, check, lambda model: (width, height), infotext_keys)
    from webui.cli.infotext_flags import infotext_writing_of

    return generate_and_save(Outpainter(pipe, sides, mask_blur, mk2), params, output, output_is_file,
                             writing=infotext_writing_of(args))


def _apply_infotext(args: argparse.Namespace):
    """`args` with the flags left out taken from --infotext (webui.cli.outpaint_infotext), and the infotext's keys."""
    from webui.cli.generate_infotext import CONTROLNET_KEY, apply_infotext, read_infotext_argument
    from webui.cli.outpaint_infotext import OutpaintInfotextKeys

    args, written = apply_infotext(args, read_infotext_argument(args.infotext), OutpaintInfotextKeys())
    args.width = args.height = None  # the infotext's Size is its own picture's; the border sets this one
    units = CONTROLNET_KEY.findall("\n".join(written))
    if units:
        print(f"mixkit: warning: --infotext keys not honoured: {', '.join(units)} (outpainting runs without "
              "ControlNet units)", file=sys.stderr)
    return args, written


def _checked_sides(args: argparse.Namespace, image, grid: int, mask_blur: int, mk2) -> tuple[dict, int, int]:
    """(sides, width, height) for the flags, every error in flag terms."""
    from pipelines.outpaint import check_outpaint_inputs, outpaint_sides
    from pipelines.outpaint_mk2 import check_mk2_settings, mk2_sides

    try:
        if mk2 is None:
            sides = outpaint_sides(image.width, image.height, args.pixels, directions_of(args), grid)
            width, height = check_outpaint_inputs(image, **sides, multiple=grid, mask_blur=mask_blur)
        else:
            check_mk2_settings(mask_blur, **mk2)
            sides = mk2_sides(image.width, image.height, args.pixels, directions_of(args), grid)
            width, height = check_outpaint_inputs(image, **sides, multiple=grid)
    except ValueError as error:
        message = str(error)
        for name, flag in SCRIPT_FLAGS.items():
            message = message.replace(f"{name} must", f"{flag} must")
        raise ValueError(message) from None
    return sides, width, height


# the script's arguments, as `pipelines.outpaint`'s and `pipelines.outpaint_mk2`'s checks name them -> their flags
SCRIPT_FLAGS = {"pixels": "--pixels", "directions": "--direction", "mask_blur": "--mask-blur",
                "falloff_exponent": "--falloff-exponent", "color_variation": "--color-variation"}


class Outpainter:
    """An `ImageToImage` pipeline called as `generate_and_save` calls one, running `outpaint` (or `outpaint_mk2`
    with `mk2`'s fill settings) with fixed sides and the script's mask blur."""

    # Img2ImgParams fields the scripts set themselves (from the sides and the script's mask blur)
    RESERVED = ("width", "height", "init_images", "mask", "latent_mask", "inpaint_full_res", "mask_blur", "mask_blur_x",
                "mask_blur_y", "inpainting_fill")

    def __init__(self, pipe, sides: dict[str, int], mask_blur: int, mk2: dict[str, float] | None = None):
        self.pipe, self.sides, self.mask_blur, self.mk2 = pipe, sides, mask_blur, mk2

    def __call__(self, params, callback=None, control=None):
        from pipelines.outpaint import outpaint
        from pipelines.outpaint_mk2 import outpaint_mk2

        rest = {name: getattr(params, name) for name in params.__dataclass_fields__ if name not in self.RESERVED}
        if self.mk2 is not None:
            return outpaint_mk2(self.pipe, params.init_images[0], **self.sides, mask_blur=self.mask_blur, **self.mk2,
                                callback=callback, control=control, **rest)
        return outpaint(self.pipe, params.init_images[0], **self.sides, inpainting_fill=params.inpainting_fill,
                        mask_blur=self.mask_blur, callback=callback, control=control, **rest)
