"""`mixkit img2img --input-dir DIR`: A1111's img2img "Batch" tab from the command line.

Every image of the input folder is redrawn with the same flags, one after the other on one loaded model, and saved
under its own name in the output folder, as A1111's batch names them: `cat.jpg` -> `cat.png`, several images per
input `cat-1.png`, `cat-2.png`, ... (its `[generation_number]`), and a name already taken gets `-1`, `-2`, ... (its
"Add number suffix"). With `--mask-dir` each input is inpainted with the mask of the same stem (a folder with one
mask uses it for every input, as A1111 does). `--png-info` is A1111's "PNG info" option: each input's own infotext
(or that of the file of the same name in `--png-info-dir`) gives the chosen settings, its prompts appended to the
command's. Every input, mask and infotext is read and checked before the first generation, so a bad file in the
folder stops the run before any work, naming the file. A script (--xyz-x, --prompt-matrix, --prompts-from-file,
--loopback, --sd-upscale) runs on every input in turn (`webui.cli.img2img_batch_scripts`). Image prompts
(--ip-adapter, IP-Adapter units) guide every input, each reference picture encoded once for the whole batch; a unit
without a picture of its own takes each input's, as the extension's units do in A1111's batch.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

# A1111's "PNG info" choices (its `png_info_props`) -> the Img2ImgParams field each sets. Model hash is refused: one
# run loads one checkpoint.
PNG_INFO_PROPS = {"prompt": "Prompt", "negative prompt": "Negative prompt", "seed": "Seed", "cfg scale": "CFG scale",
                  "sampler": "Sampler", "steps": "Steps"}


def add_batch_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "batch", "A1111's img2img Batch tab: redraw every image of a folder with these flags "
                 "(mixkit img2img --input-dir DIR [\"prompt\"])")
    g.add_argument("--input-dir", default=None, metavar="DIR",
                   help="redraw every image in DIR (PNG, JPEG, WebP, ...; sorted by name) instead of IMAGE")
    g.add_argument("--mask-dir", default=None, metavar="DIR",
                   help="inpaint each input with the mask of the same stem in DIR (cat.jpg: cat.png, ...); one mask in "
                        "DIR is used for every input")
    g.add_argument("--output-dir", default=None, metavar="DIR",
                   help="where the results go, each named after its input (cat.jpg -> cat.png; default: -o)")
    g.add_argument("--png-info", nargs="?", const=",".join(PNG_INFO_PROPS.values()), default=None, metavar="PROPS",
                   help="take these settings from each input's own infotext, comma-separated: Prompt, Negative prompt "
                        "(both appended to the command's), Seed, CFG scale, Sampler, Steps (default: all of them)")
    g.add_argument("--png-info-dir", default=None, metavar="DIR",
                   help="with --png-info: read each input's infotext from the file of the same name in DIR instead")


@dataclass
class BatchInput:
    """One input of the batch, checked: its file, its mask's file, and what its infotext sets."""

    file: Path
    mask: Path | None = None
    settings: dict = field(default_factory=dict)  # Img2ImgParams field -> value, from --png-info


def check_batch_flags(args: argparse.Namespace) -> None:
    """The batch flags fit together; the single positional is the prompt (`mixkit img2img --input-dir in "a cat"`)."""
    if args.input_dir is None:
        given = [flag for flag, value in (("--mask-dir", args.mask_dir), ("--output-dir", args.output_dir),
                                          ("--png-info", args.png_info), ("--png-info-dir", args.png_info_dir))
                 if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)} work on a folder of inputs; add --input-dir DIR, or leave them out")
        if args.image is None:
            raise ValueError("mixkit img2img needs an init image: IMAGE, or --input-dir DIR for a folder of them")
        return
    if args.image is not None and args.prompt is not None:
        raise ValueError(f"--input-dir takes the place of IMAGE; give only the prompt, not {args.image!r} too")
    if args.image is not None:
        args.prompt, args.image = args.image, None
    if args.mask is not None:
        raise ValueError("--mask is one mask for one IMAGE; with --input-dir use --mask-dir DIR (one mask per input, "
                         "by name, or one for all)")
    if args.latent_mask is not None:
        raise ValueError("--latent-mask is for one IMAGE; leave it out with --input-dir")
    if args.png_info_dir is not None and args.png_info is None:
        raise ValueError("--png-info-dir says where --png-info reads infotexts; add --png-info")
    if args.output_dir is not None and args.output != "outputs":
        raise ValueError("--output-dir and -o both name the output folder; give one")
    if args.output_dir is None and Path(args.output).suffix.lower() in (".png", ".jpg", ".jpeg", ".webp"):
        raise ValueError(f"-o {args.output}: a batch writes one file per input, named after it; give a folder")


def png_info_fields(value: str) -> list[str]:
    """`--png-info Prompt,Seed` as the infotext keys to take, each checked."""
    keys = []
    for name in (part.strip() for part in value.split(",")):
        if name.lower() == "model hash":
            raise ValueError("--png-info Model hash: a batch runs on the one --model it loads; leave it out")
        if name.lower() not in PNG_INFO_PROPS:
            raise ValueError(f"--png-info {name!r} is not one of {', '.join(PNG_INFO_PROPS.values())}")
        keys.append(PNG_INFO_PROPS[name.lower()])
    return keys


def batch_inputs(args: argparse.Namespace) -> list[BatchInput]:
    """The folder's inputs in name order, each with its mask and --png-info settings; errors name the file."""
    from webui.cli.extras import IMAGE_SUFFIXES
    from webui.cli.generate_checks import check_folder

    for flag, folder in (("--input-dir", args.input_dir), ("--mask-dir", args.mask_dir),
                         ("--png-info-dir", args.png_info_dir)):
        check_folder(folder, "Folder", flag, "an existing folder")
    files = image_files(Path(args.input_dir).expanduser(), IMAGE_SUFFIXES)
    if not files:
        raise ValueError(f"--input-dir {args.input_dir} holds no images ({', '.join(IMAGE_SUFFIXES)})")
    inputs = [BatchInput(file) for file in files]
    if args.mask_dir is not None:
        _match_masks(inputs, image_files(Path(args.mask_dir).expanduser(), IMAGE_SUFFIXES), args.mask_dir)
    if args.png_info is not None:
        keys = png_info_fields(args.png_info)
        for item in inputs:
            item.settings = _with_styles(_png_info_settings(item.file, keys, args), args)
    return inputs


def _with_styles(settings: dict, args: argparse.Namespace) -> dict:
    """--style merged into an input's own prompts, as A1111 merges styles into the prompts its batch put together
    (the command's prompt then the image's); the command's prompts alone get them in `generation_fields`."""
    if not args.style or not args.styles_file or not {"prompt", "negative_prompt"} & set(settings):
        return settings
    from mixkit.prompts.styles import StyleLibrary

    prompt, negative = StyleLibrary(args.styles_file).apply(settings.get("prompt", args.prompt or ""),
                                                           settings.get("negative_prompt", args.negative or ""),
                                                           list(args.style))
    return {**settings, "prompt": prompt, "negative_prompt": negative}


def image_files(folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return sorted(f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in suffixes)


def _match_masks(inputs: list[BatchInput], masks: list[Path], mask_dir: str) -> None:
    if not masks:
        raise ValueError(f"--mask-dir {mask_dir} holds no images; put a mask per input (same name) in it")
    if len(masks) == 1:  # A1111: one mask for the whole batch
        for item in inputs:
            item.mask = masks[0]
        return
    by_stem: dict[str, list[Path]] = {}
    for mask in masks:
        by_stem.setdefault(mask.stem, []).append(mask)
    missing = [item.file.name for item in inputs if item.file.stem not in by_stem]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ValueError(f"--mask-dir {mask_dir} has no mask for {shown}; add a mask of the same name (any image "
                         "type), or move those inputs out of --input-dir")
    for item in inputs:
        found = by_stem[item.file.stem]
        if len(found) > 1:
            raise ValueError(f"--mask-dir {mask_dir} has {len(found)} masks for {item.file.name} "
                             f"({', '.join(f.name for f in found)}); keep one")
        item.mask = found[0]


def _png_info_settings(file: Path, keys: list[str], args: argparse.Namespace) -> dict:
    """The Img2ImgParams fields one input's infotext sets (A1111: no infotext, no settings; said on stderr)."""
    from pipelines.infotext import parse_infotext
    from pipelines.infotext_read import read_infotext
    from pipelines.infotext_samplers import sampler_and_schedule
    from pipelines.infotext_values import as_integer, as_number

    source = file if args.png_info_dir is None else Path(args.png_info_dir).expanduser() / file.name
    text = read_infotext(source) if source.is_file() else None
    if text is None:
        print(f"mixkit: note: {source.name} has no infotext{'' if source.is_file() else ' (no such file)'}; "
              f"--png-info takes nothing for {file.name}", file=sys.stderr)
        return {}
    written = parse_infotext(text, defaults=False)
    settings: dict = {}
    for key in keys:
        if key not in written:
            continue
        try:
            if key == "Prompt":
                settings["prompt"] = joined(args.prompt, str(written[key]))
            elif key == "Negative prompt":
                settings["negative_prompt"] = joined(args.negative, str(written[key]))
            elif key == "Seed":
                settings["seed"] = as_integer(written[key])
            elif key == "Steps":
                settings["steps"] = as_integer(written[key])
            elif key == "CFG scale":
                settings["cfg_scale"] = as_number(written[key])
            else:
                settings["sampler"], settings["schedule_type"] = sampler_and_schedule(written)
        except ValueError:
            raise ValueError(f"--png-info: {source}: {key}: {written[key]!r} is not a valid value; fix that "
                             f"infotext, or leave {key} out of --png-info") from None
    return settings


def joined(mine: str | None, theirs: str) -> str:
    """A1111's "PNG info" prompt: the command's, then a space, then the image's (no space around an empty one)."""
    return " ".join(part for part in (mine or "", theirs) if part)


def free_name(folder: Path, stem: str, taken: set[Path]) -> Path:
    """`stem.png` in `folder`, else `stem-1.png`, `stem-2.png`, ... (A1111's "Add number suffix")."""
    path, number = folder / f"{stem}.png", 0
    while path.exists() or path in taken:
        number += 1
        path = folder / f"{stem}-{number}.png"
    taken.add(path)
    return path


def save_named(result, folder: Path, stem: str, taken: set[Path], writing=None) -> list[Path]:
    """Save one input's images as A1111's batch names them: `stem.png`, or `stem-1.png`, ... for several; the
    infotext where `writing` says (`pipelines.png.InfotextWriting`; None: in the PNG). A copy kept from before face
    restoration or colour correction goes beside its image as `<its name>-before-color-correction.png` (A1111's
    suffix), numbered on like the results when that name is taken, so it never replaces a result or another input's
    file."""
    from pipelines.png import PNG_ONLY, save_png

    writing = writing or PNG_ONLY
    stems = [stem] if len(result.images) == 1 else [f"{stem}-{n}" for n in range(1, len(result.images) + 1)]
    paths = []
    for index, (image, name, infotext) in enumerate(zip(result.images, stems, result.infotexts)):
        path = save_png(image, free_name(folder, name, taken), infotext, writing=writing)
        paths.append(path)
        for kept, suffix in result.kept_copies(index):
            save_png(kept, free_name(folder, f"{path.stem}{suffix}", taken), infotext, replace=False, writing=writing)
    return paths


def per_input(params, item: BatchInput, image, mask, size: dict, ip_adapter: "BatchImagePrompts | None" = None):
    """The params of one input: the run's, with its picture, mask, default size and --png-info settings, and the
    image prompts' fields (a unit without a picture takes this input's picture, as the extension's batch does)."""
    params = replace(params, init_images=[image], mask=mask, **size, **item.settings)
    return params if ip_adapter is None else replace(params, **ip_adapter.fields_for(image, params.width,
                                                                                    params.height))


@dataclass
class BatchImagePrompts:
    """The batch's IP-Adapter adapters: the --ip-adapter flags' fields and the IP-Adapter units, joined per input."""

    flag_fields: dict
    units: list

    def fields_for(self, image, width: int | None, height: int | None) -> dict:
        """The params' IP-Adapter fields for one input (`image`, output `width` x `height`), masks checked against
        its size."""
        from webui.cli.ip_adapter_units import check_mask_sizes, mask_names, with_ip_adapter_units

        fields = with_ip_adapter_units(self.flag_fields, self.units, init_image=image)
        check_mask_sizes(fields, mask_names(self.flag_fields, self.units), width, height)
        return fields


def run_batch(args: argparse.Namespace, infotext_keys: dict | None, script=None, ip_fields: dict | None = None,
              ip_units: list | None = None, ip_store=None) -> int:
    """Check every input, load the model once, then redraw and save each input in name order; `script`
    (`webui.cli.img2img_scripts.Img2ImgScript`) runs on each input instead of one generation when given.

    `ip_fields` (the --ip-adapter flags' params fields) and `ip_units` (IP-Adapter units) guide every input; each
    reference picture is encoded once for the whole batch (`pipelines.ip_adapter_reuse`), a unit without a picture
    once per input (it takes that input's picture). `ip_store` holds the adapter files the units' check read, so
    they are not read again."""
    from pipelines.img2img import check_img2img_params
    from pipelines.ip_adapter_controlnet import params_class_for, pipeline_class_for
    from pipelines.ip_adapter_reuse import ReferenceEmbeddings
    from pipelines.params import GenerationLimits
    from pipelines.seeds import resolve_seed
    from webui.cli.controlnet_units import check_unit_families, controlnet_specs
    from webui.cli.flag_names import errors_in_flag_terms
    from webui.cli.generate import check_before_load, generate_and_save, generation_fields, load_pipeline
    from webui.cli.img2img import (check_mask_fits, default_size, img2img_fields, init_size, read_init_image, read_mask,
                                   with_controlnets)
    from webui.cli.img2img_batch_scripts import check_batch_script_images, save_script_named
    from webui.cli.infotext_flags import infotext_writing_of

    # 1. Every input, mask and infotext read and checked, with the flags (and the script's plan), before the model loads
    inputs = batch_inputs(args)
    writing = infotext_writing_of(args)
    specs, catalog = controlnet_specs(args, infotext_keys, img2img=True)
    if specs and script is not None:
        raise ValueError(f"{script.flag} cannot be combined with ControlNet units (as the API's scripts); leave out "
                         "one.")
    limits = GenerationLimits()
    prompts = BatchImagePrompts(ip_fields or {}, ip_units or []) if ip_fields or ip_units else None
    params_class = params_class_for("img2img", bool(specs), prompts is not None)
    base = params_class(**generation_fields(args), **img2img_fields(args))
    # A1111's process_batch fixes the seeds once (`fix_seed(p)`): with -1 every input shares one drawn seed
    base = replace(base, seed=resolve_seed(base.seed), subseed=resolve_seed(base.subseed))

    def check(params) -> None:
        check_img2img_params(params, limits, 8)  # SD's VAE grid; the loaded model's own after the load

    def pictures(item: BatchInput):
        image = read_init_image(str(item.file))
        return image, None if item.mask is None else read_mask(str(item.mask), "--mask-dir")

    first, script_images = None, []
    for item in inputs:
        image, mask = pictures(item)
        if mask is not None:
            check_mask_fits(image, mask, f"--mask-dir {item.mask.name} for {item.file.name}")
        try:
            params = per_input(base, item, image, mask, default_size(args, image, str(item.file), 8, limits), prompts)
            with errors_in_flag_terms():
                check(params)
                if script is not None:
                    script_images.append(script.check(params, check, args))
        except (ValueError, TypeError) as error:
            raise type(error)(f"--input-dir {item.file.name}: {error}") from None
        first = first or params
    if script is not None:  # the cap counts the whole batch, as one job
        from pipelines.scripts.image_budget import script_image_cap
        from webui.cli.script_image_cap import script_image_context

        check_batch_script_images(script.module.TITLE, script_images, script_image_cap(script_image_context(args)))
    args.output = str(Path(args.output_dir or args.output)) + "/"  # a folder, proven writable by check_before_load
    output, _ = check_before_load(args, first, check)
    check_unit_families(specs, catalog, args.model)
    if script is not None:  # its own models (Loopback's interrogators) before the checkpoint, as a single run's
        script.load_models()

    # 2. One model for the whole batch; the flags it left out take the model's recommended settings, as one run's do
    first_image = first.init_images[0]
    without_info = replace(first, **{name: getattr(base, name) for name in inputs[0].settings})
    pipe, loaded = load_pipeline(args, pipeline_class_for("img2img", False, prompts is not None), without_info, check,
                                 lambda model: init_size(first_image, model.vae_scale_factor, args.scale_by), infotext_keys)
    base = replace(base, **{name: getattr(loaded, name) for name in ("steps", "cfg_scale", "sampler", "clip_skip")})
    if prompts is not None:
        from webui.cli.ip_adapter_units import use_unit_store

        use_unit_store(pipe, ip_store)  # the units' adapter files, read by their check: not read again
    if specs:
        pipe, base = with_controlnets(pipe, base, specs, catalog, ip_adapter=prompts is not None)
    encoded = ReferenceEmbeddings()  # each reference picture through its encoder once for the whole batch

    # 3. Each input in turn, named after it; Ctrl-C stops the batch after the image being made is saved
    taken: set[Path] = set()
    grid = pipe.model.vae_scale_factor
    for number, item in enumerate(inputs, 1):
        print(f"[{number}/{len(inputs)}] {item.file.name}", file=sys.stderr)
        image, mask = pictures(item)
        params = encoded.params_with_embeds(pipe, per_input(base, item, image, mask,
                                                            default_size(args, image, str(item.file), grid, limits),
                                                            prompts))
        if script is not None:
            code = script.run(pipe, params, output, args, writing,
                              save=lambda result, stem=item.file.stem: save_script_named(result, output, stem, taken,
                                                                                         writing))
        else:
            code = generate_and_save(pipe, params, output, False,
                                     save=lambda result, stem=item.file.stem: save_named(result, output, stem, taken,
                                                                                         writing))
        if code:
            print(f"mixkit: stopped after {number} of {len(inputs)} inputs", file=sys.stderr)
            return code
    return 0
