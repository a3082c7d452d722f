"""`mixkit img2img IMAGE "prompt"`: A1111's img2img from the command line, and its inpainting with --mask.

The flags are `mixkit generate`'s (model, sampler, seeds, LoRAs, performance, output) plus A1111's img2img and
inpaint controls and the API's other img2img fields (per-axis mask blur, mask_round, latent_mask, the img2img noise
settings), each a field of `pipelines.img2img.Img2ImgParams`, checked there before the model loads. --infotext pastes
an infotext as A1111's "Send to img2img / inpaint" does (webui.cli.img2img_infotext); inpaint flags default to None
so that the infotext fills only those left out, and are refused without --mask.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(subparsers) -> None:
    from pipelines.image_prep import IMG2IMG_RESIZE_MODES
    from pipelines.img2img import Img2ImgParams
    from pipelines.inpaint_mask import MASKED_CONTENT
    from webui.cli.extras import finite_float
    from webui.cli.generate import add_generation_flags

    d = Img2ImgParams()
    p = subparsers.add_parser(
        "img2img", help="redraw an image from a prompt (img2img), or a masked part of it (inpaint, --mask)",
        description="A1111's img2img and inpaint: redraw IMAGE guided by the prompt, the whole picture or, with "
                    "--mask, the white part of the mask; save PNGs with A1111 infotext.")
    p.add_argument("image", nargs="?", default=None,
                   help="the init image (PNG, JPEG, WebP ...; EXIF rotation applied, transparency on white); with "
                        "--input-dir leave it out (a single positional is then the prompt)")
    p.add_argument("prompt", nargs="?", default=None,
                   help="the prompt, in the A1111 prompt language (default: --infotext's, else empty)")
    p.add_argument("--infotext", default=None, metavar="IMAGE_OR_TEXT",
                   help="start from an A1111 infotext: an image that holds one, a .txt file, the text itself, or - "
                        "for stdin (A1111's PNG Info -> Send to img2img / inpaint): prompt, seed, sampler, size, CFG, "
                        "denoising strength and, with --mask, the inpaint settings; flags given here win over it")
    p.add_argument("--denoising-strength", type=float, default=None, metavar="STRENGTH",
                   help=f"how much of the image is redrawn, 0-1 (default {d.denoising_strength}); runs int(STRENGTH x "
                        "steps) + 1 steps, as A1111")
    p.add_argument("--image-cfg-scale", type=float, default=None, metavar="SCALE",
                   help=f"instruct-pix2pix checkpoints only (8-channel UNet): how closely the result keeps to the "
                        f"image, A1111's Image CFG Scale (default {d.image_cfg_scale}; 1 = plain CFG); ignored, and "
                        "not recorded, for other models, as A1111 does")
    p.add_argument("--scale-by", type=finite_float, default=None, metavar="X",
                   help=f"A1111's 'Resize by': the size is IMAGE's (each input's with --input-dir) times X, each side "
                        f"rounded down to a multiple of 8, instead of --width/--height ({SCALE_BY_RANGE[0]}-"
                        f"{SCALE_BY_RANGE[1]}, A1111's slider)")
    p.add_argument("--exact-steps", action="store_true",
                   help="run exactly --steps steps (A1111's 'With img2img, do exactly the amount of steps the slider "
                        "specifies')")
    p.add_argument("--color-correction", action="store_true",
                   help="match each result's colours to its init image (A1111's Settings > img2img 'Apply color "
                        "correction to img2img results to match original colors'); with --loopback every loop is "
                        "matched to the first init image")
    p.add_argument("--save-before-color-correction", action="store_true",
                   help="with --color-correction: also write each image as it would be without it, as "
                        "NAME-before-color-correction.png (A1111's Settings > Saving)")
    p.add_argument("--resize-mode", default=d.resize_mode, metavar="MODE",
                   help=f"how IMAGE is brought to --width x --height: {', '.join(IMG2IMG_RESIZE_MODES)} "
                        f"(default: {d.resize_mode})")
    p.add_argument("--noise-multiplier", type=float, default=None, metavar="X",
                   help=f"A1111's Settings > img2img 'Noise multiplier for img2img' (default {d.initial_noise_multiplier})")
    p.add_argument("--extra-noise", type=float, default=None, metavar="X",
                   help=f"A1111's Settings > img2img 'Extra noise multiplier for img2img' (default {d.img2img_extra_noise})")
    p.add_argument("--inpainting-mask-weight", type=float, default=None, metavar="WEIGHT",
                   help="A1111's 'Inpainting conditioning mask strength', 0-1, for inpainting checkpoints (default "
                        f"{d.inpainting_mask_weight})")
    g = p.add_argument_group("inpaint", "with --mask: A1111's inpaint controls (refused without --mask)")
    g.add_argument("--mask", default=None, metavar="MASK",
                   help="inpaint: a mask image, white = redraw (or the strokes of a transparent image's alpha)")
    g.add_argument("--mask-blur", type=int, default=None, metavar="PIXELS",
                   help=f"blur of the mask's edge (default {d.mask_blur})")
    g.add_argument("--mask-blur-x", type=int, default=None, metavar="PIXELS",
                   help="horizontal blur instead of --mask-blur (A1111 API's mask_blur_x)")
    g.add_argument("--mask-blur-y", type=int, default=None, metavar="PIXELS",
                   help="vertical blur instead of --mask-blur (A1111 API's mask_blur_y)")
    g.add_argument("--no-mask-round", action="store_true", default=None,
                   help="keep a transparent mask's soft alpha and a soft latent mask (A1111's mask_round=False); "
                        "default: rounded to black and white")
    g.add_argument("--masked-content", default=None, metavar="CONTENT",
                   help=f"what the masked area starts from: {', '.join(MASKED_CONTENT)} (default: {d.inpainting_fill})")
    g.add_argument("--inpaint-not-masked", action="store_true", default=None,
                   help="redraw the black part instead (A1111's Mask mode 'Inpaint not masked')")
    g.add_argument("--only-masked", action="store_true", default=None,
                   help="redraw the mask's region at full --width x --height and paste it back (A1111's Inpaint area "
                        "'Only masked'); the result keeps IMAGE's size")
    g.add_argument("--only-masked-padding", type=int, default=None, metavar="PIXELS",
                   help=f"with --only-masked: pixels of context around the mask (default {d.inpaint_full_res_padding})")
    g.add_argument("--latent-mask", default=None, metavar="MASK",
                   help="A1111 API's latent_mask: a second mask, unblurred, for what the sampler keeps and 'fill' "
                        "fills (--mask still decides the paste-back); whole picture only")
    from webui.cli.soft_inpainting_flags import add_soft_inpainting_flags

    add_soft_inpainting_flags(g)
    add_generation_flags(p, size_default="IMAGE's size, rounded down to a multiple of 8")
    from webui.cli.controlnet_flags import add_controlnet_flags
    from webui.cli.img2img_batch import add_batch_flags

    add_controlnet_flags(p, img2img=True)
    from webui.cli.ip_adapter_flags import add_ip_adapter_flags

    add_ip_adapter_flags(p)
    add_batch_flags(p)
    from webui.cli.loopback_flags import add_loopback_flags
    from webui.cli.prompt_script_flags import add_prompt_script_flags
    from webui.cli.xyz_flags import add_xyz_flags

    add_loopback_flags(p)
    from webui.cli.sd_upscale_flags import add_sd_upscale_flags

    add_xyz_flags(p)
    add_prompt_script_flags(p)
    add_sd_upscale_flags(p)
    from webui.cli.script_image_cap import add_script_image_cap_flag

    add_script_image_cap_flag(p)
    from webui.cli.grid_font_flag import add_grid_font_flag

    add_grid_font_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.img2img import Img2ImgParams, check_img2img_params
    from pipelines.params import GenerationLimits
    from webui.cli.generate import check_before_load, generate_and_save, generation_fields, load_pipeline
    from webui.cli.img2img_batch import check_batch_flags

    check_batch_flags(args)
    check_scale_by(args)
    from webui.cli.extras import register_face_restorer_flags

    register_face_restorer_flags(args)  # before --restore-faces is checked: the folders' restorers
    infotext_keys = None
    if args.infotext is not None:
        from webui.cli.generate_infotext import apply_infotext, read_infotext_argument
        from webui.cli.img2img_infotext import Img2ImgInfotextKeys

        args, infotext_keys = apply_infotext(args, read_infotext_argument(args.infotext), Img2ImgInfotextKeys())
        if args.scale_by is not None and "Size-1" in infotext_keys:  # A1111's Resize by tab has no width / height
            args.width = args.height = None
            print(f"mixkit: note: --infotext Size {infotext_keys['Size-1']}x{infotext_keys.get('Size-2')} not "
                  f"honoured: --scale-by {args.scale_by:g} sizes the image", file=sys.stderr)
    if args.prompt is None:
        args.prompt = ""
    check_mask_flags(args)
    from webui.cli.img2img_scripts import img2img_script_of

    script = img2img_script_of(args)  # Loopback, X/Y/Z plot, Prompt matrix, Prompts from file, SD upscale, or None
    from webui.cli.generate import refuse_ip_adapter_with
    from webui.cli.ip_adapter_flags import ip_adapter_fields
    from webui.cli.ip_adapter_units import ip_adapter_unit_specs, use_unit_store, with_ip_adapter_units

    ip_fields = ip_adapter_fields(args)  # images read and files found before anything loads
    # --controlnet-json / --controlnet units with an IP-Adapter module, and the store holding what their check read
    ip_units, ip_store = ip_adapter_unit_specs(args)
    if ip_fields or ip_units:
        refuse_ip_adapter_with(script=script, refiner=getattr(args, "refiner", None) is not None,
                               units_only=not ip_fields)
    if args.input_dir is not None:
        from webui.cli.img2img_batch import run_batch

        return run_batch(args, infotext_keys, script, ip_fields, ip_units, ip_store)
    image = read_init_image(args.image)
    from webui.cli.ip_adapter_units import check_mask_sizes, mask_names

    names = mask_names(ip_fields, ip_units)
    ip_fields = with_ip_adapter_units(ip_fields, ip_units, init_image=image)  # a unit without picture: the init image
    mask = None if args.mask is None else read_mask(args.mask, "--mask")
    latent_mask = None if args.latent_mask is None else read_mask(args.latent_mask, "--latent-mask")
    if mask is not None:
        check_mask_fits(image, mask, f"--mask {args.mask}")
    fields = generation_fields(args)
    grid = 8  # SD's VAE, for the checks before the load; the loaded model's own grid sets the default size after it
    limits = GenerationLimits()
    fields.update(default_size(args, image, f"IMAGE {args.image!r}", grid, limits))
    check_mask_sizes(ip_fields, names, fields["width"], fields["height"])
    from webui.cli.controlnet_units import controlnet_specs

    specs, catalog = controlnet_specs(args, infotext_keys, img2img=True)
    from pipelines.ip_adapter_controlnet import params_class_for, pipeline_class_for

    if specs and script is not None:
        raise ValueError(f"{script.flag} cannot be combined with ControlNet units (as the API's scripts); leave out "
                         "one.")
    params_class = params_class_for("img2img", bool(specs), bool(ip_fields))  # units join the params after the load
    params = params_class(**fields, **img2img_fields(args), init_images=[image], mask=mask, latent_mask=latent_mask,
                          **ip_fields)

    def check(params: Img2ImgParams) -> None:
        check_img2img_params(params, limits, grid)

    if script is not None:  # before the output folder is made
        script.check(params, check, args)
    output, output_is_file = check_before_load(args, params, check)
    if script is not None and output_is_file and script.several_files:
        raise ValueError(f"{script.module.TITLE} writes several images: give -o a folder, not a .png file name.")
    from webui.cli.controlnet_units import check_unit_families

    check_unit_families(specs, catalog, args.model)
    if script is not None:  # its own models (Loopback's interrogators) before the checkpoint: a quick failure
        script.load_models()
    pipe, params = load_pipeline(args, pipeline_class_for("img2img", False, bool(ip_fields)), params, check,
                                 lambda model: init_size(image, model.vae_scale_factor, args.scale_by), infotext_keys)
    if specs:
        pipe, params = with_controlnets(pipe, params, specs, catalog, ip_adapter=bool(ip_fields))
    use_unit_store(pipe, ip_store)  # the units' adapter files, read by their check: not read again
    from webui.cli.infotext_flags import infotext_writing_of

    if script is not None:
        if ip_fields:  # every cell / line reuses one encoding of the reference pictures
            from pipelines.ip_adapter_reuse import ReferenceEmbeddings

            params = ReferenceEmbeddings().params_with_embeds(pipe, params)
        return script.run(pipe, params, output, args, infotext_writing_of(args), output_is_file)
    return generate_and_save(pipe, params, output, output_is_file, writing=infotext_writing_of(args))


def with_controlnets(pipe, params, specs: list, catalog, ip_adapter: bool = False):
    """(pipeline, params) with the units' ControlNets loaded for the loaded checkpoint: the ControlNet img2img
    pipeline (with IP-Adapters when `ip_adapter`) on the same model."""
    from dataclasses import replace

    from pipelines.ip_adapter_controlnet import pipeline_class_for
    from webui.cli.controlnet_units import built_units

    return (pipeline_class_for("img2img", True, ip_adapter).from_pipeline(pipe),
            replace(params, controlnets=built_units(specs, catalog, pipe)))


def check_mask_fits(image, mask, what: str) -> None:
    """The mask lines up with the init image (same size, or a scaled copy), checked before the load as the pipeline
    checks it when it prepares the mask; `what` names the files in the error."""
    import warnings

    from pipelines.image_prep import normalize_init_image
    from pipelines.inpaint_mask import prepare_mask

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a scaled copy is resized with a warning when the pipeline prepares it
        try:
            prepare_mask(mask, normalize_init_image(image).size)
        except ValueError as error:
            raise ValueError(f"{what}: {error}") from None


# A1111's img2img 'Resize by' slider (its "Scale" under the Resize by tab)
SCALE_BY_RANGE = (0.05, 4.0)


def check_scale_by(args: argparse.Namespace) -> None:
    """--scale-by within A1111's slider, and not with --width/--height (A1111's Resize to / Resize by are tabs)."""
    if args.scale_by is None:
        return
    low, high = SCALE_BY_RANGE
    if not low <= args.scale_by <= high:
        raise ValueError(f"--scale-by {args.scale_by:g} must be in [{low}, {high}] (A1111's Resize by slider)")
    given = [flag for flag, value in (("--width", args.width), ("--height", args.height)) if value is not None]
    if given:
        raise ValueError(f"--scale-by sizes the image from IMAGE's size; leave out {' and '.join(given)}, or leave "
                         "out --scale-by to give the size")


def init_size(image, grid: int, scale_by: float | None) -> tuple[int, int]:
    """The size an init image gives img2img: its own, or with `scale_by` (A1111's Resize by: `int(side * scale)`
    minus its remainder) its sides times the scale; each rounded down to the VAE's `grid`, at least one cell."""
    from pipelines.base import init_image_size
    from pipelines.image_prep import normalize_init_image

    if scale_by is None:
        return init_image_size(image, grid)
    width, height = (max(grid, int(side * scale_by) // grid * grid) for side in normalize_init_image(image).size)
    return width, height


def default_size(args: argparse.Namespace, image, name: str, grid: int, limits) -> dict:
    """The width / height the command left out: the init image's (times --scale-by), rounded down to the VAE's
    `grid`; an image too large for one generation is refused, naming the flags that redraw it smaller."""
    scale_by = getattr(args, "scale_by", None)
    size = dict(zip(("width", "height"), init_size(image, grid, scale_by)))
    defaulted = {side: size[side] for side in size if getattr(args, side) is None}
    width, height = defaulted.get("width", args.width), defaulted.get("height", args.height)
    if defaulted and (max(width, height) > limits.max_side or width * height > limits.max_pixels):
        scaled = "" if scale_by is None else f", {width}x{height} by --scale-by {scale_by:g}"
        fix = ("use a smaller --scale-by" if scale_by is not None else
               "pass --width and --height to redraw it smaller (--resize-mode says how it is fitted)")
        raise ValueError(f"{name} is {image.width}x{image.height}{scaled}, larger than one generation may be "
                         f"({limits.max_side} px a side, {limits.max_pixels:,} pixels); {fix}")
    return defaulted


def img2img_fields(args: argparse.Namespace) -> dict:
    """The Img2ImgParams fields of the img2img and inpaint flags, Img2ImgParams' defaults for those left out."""
    from pipelines.img2img import Img2ImgParams

    d = Img2ImgParams()

    from webui.cli.soft_inpainting_flags import soft_inpainting_from_args

    def given(value, default):
        return default if value is None else value

    return dict(denoising_strength=given(args.denoising_strength, d.denoising_strength), exact_steps=args.exact_steps,
                image_cfg_scale=given(args.image_cfg_scale, d.image_cfg_scale),
                color_correction=args.color_correction,
                save_images_before_color_correction=args.save_before_color_correction, resize_mode=args.resize_mode, mask_blur=given(args.mask_blur, d.mask_blur),
                mask_blur_x=args.mask_blur_x, mask_blur_y=args.mask_blur_y, mask_round=not args.no_mask_round,
                inpainting_fill=given(args.masked_content, d.inpainting_fill),
                inpainting_mask_invert=bool(args.inpaint_not_masked), inpaint_full_res=bool(args.only_masked),
                inpaint_full_res_padding=given(args.only_masked_padding, d.inpaint_full_res_padding),
                initial_noise_multiplier=given(args.noise_multiplier, d.initial_noise_multiplier),
                img2img_extra_noise=given(args.extra_noise, d.img2img_extra_noise),
                inpainting_mask_weight=given(args.inpainting_mask_weight, d.inpainting_mask_weight),
                soft_inpainting=soft_inpainting_from_args(args))


# Inpaint flags that change nothing without --mask (argparse destination -> flag); each defaults to None
MASK_ONLY_FLAGS = {"mask_blur": "--mask-blur", "mask_blur_x": "--mask-blur-x", "mask_blur_y": "--mask-blur-y",
                   "no_mask_round": "--no-mask-round", "masked_content": "--masked-content",
                   "inpaint_not_masked": "--inpaint-not-masked", "only_masked": "--only-masked",
                   "only_masked_padding": "--only-masked-padding", "latent_mask": "--latent-mask",
                   "soft_inpainting": "--soft-inpainting"}


def check_mask_flags(args: argparse.Namespace) -> None:
    """Refuse inpaint flags given without --mask: A1111's img2img tab hides them, and a user who typed one expects
    inpainting, not a plain img2img run that ignores it."""
    if args.mask is not None or getattr(args, "mask_dir", None) is not None:
        return
    given = [flag for name, flag in MASK_ONLY_FLAGS.items() if getattr(args, name) is not None]
    if given:
        raise ValueError(f"{', '.join(given)}: inpaint flag{'s' if len(given) > 1 else ''} without --mask; add "
                         f"--mask MASK (white = redraw; --mask-dir DIR with --input-dir) to inpaint, or leave out "
                         f"{' and '.join(given)}")


def read_init_image(path: str, max_pixels: int | None = None):
    """The init image, upright, 8-bit RGB (`mixkit.io.images.load_image`, its pixel cap unless `max_pixels`), its
    errors naming the flag."""
    from mixkit.io.images import DEFAULT_MAX_PIXELS, load_image

    return load_image(_existing_file(path, "IMAGE"), max_pixels=max_pixels or DEFAULT_MAX_PIXELS)


def read_mask(path: str, flag: str):
    """The mask as it is stored (its alpha channel may hold the strokes, which a flattened RGB copy would lose);
    the pipeline reads it as A1111 does (`pipelines.inpaint_mask.binary_mask`)."""
    from PIL import Image, UnidentifiedImageError

    file = _existing_file(path, flag)
    try:
        with Image.open(file) as opened:
            opened.load()
            return opened.copy()
    except Image.DecompressionBombError as error:
        raise ValueError(f"{flag} {path!r} is refused by Pillow's decompression-bomb guard: {error}") from None
    except UnidentifiedImageError:
        raise ValueError(f"{flag} {path!r} is not an image file Pillow can read (PNG, JPEG, WebP, ...).") from None
    except (OSError, SyntaxError) as error:
        raise ValueError(f"{flag} {path!r} is damaged or truncated and cannot be read: {error}") from None


def _existing_file(path: str, what: str) -> Path:
    file = Path(path).expanduser()
    if not file.exists():
        raise FileNotFoundError(f"{what} {path!r} does not exist; check the path.")
    if file.is_dir():
        raise ValueError(f"{what} {path!r} is a folder; give an image file.")
    return file
