"""`mixkit generate "prompt"`: text-to-image from the command line, writing PNGs with infotext."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from webui.cli.progress import report_written, run_with_progress

DEFAULT_MODEL_ENV = "MIXKIT_MODEL"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("generate", help="generate images from a text prompt",
                              description="Generate images from a text prompt and save them as PNG with A1111 infotext.")
    p.add_argument("prompt", nargs="?", default=None,
                   help="the prompt, in the A1111 prompt language (optional with --infotext)")
    p.add_argument("--infotext", default=None, metavar="IMAGE_OR_TEXT",
                   help="start from an A1111 infotext: an image that holds one (PNG, JPEG, WebP), a .txt file beside "
                        "an image (A1111's save_txt), the text itself, or - for stdin; flags given here win over it (A1111's PNG Info -> Send to txt2img)")
    add_generation_flags(p)
    from webui.cli.controlnet_flags import add_controlnet_flags
    from webui.cli.generate_hires import add_hires_flags

    add_hires_flags(p)
    add_controlnet_flags(p, img2img=False)
    from webui.cli.ip_adapter_flags import add_ip_adapter_flags

    add_ip_adapter_flags(p)
    from webui.cli.xyz_flags import add_xyz_flags

    add_xyz_flags(p)
    from webui.cli.prompt_script_flags import add_prompt_script_flags

    add_prompt_script_flags(p)
    from webui.cli.script_image_cap import add_script_image_cap_flag

    add_script_image_cap_flag(p)
    from webui.cli.grid_font_flag import add_grid_font_flag

    add_grid_font_flag(p)
    p.set_defaults(func=run)


def add_generation_flags(p: argparse.ArgumentParser,
                         size_default: str = "the model's native size (512 for SD 1.5)") -> None:
    """The flags every image-generating sub-command takes (`generate`, `img2img`): model, sampling, prompt
    settings, LoRAs, performance and approximations, output. `size_default` says what --width/--height default to."""
    from mixkit.tiny.shipped import DEFAULT_TEXT_TO_IMAGE as BUILT_IN_MODEL
    from pipelines.params import Txt2ImgParams

    d = Txt2ImgParams()
    p.add_argument("--model", default=os.environ.get(DEFAULT_MODEL_ENV) or BUILT_IN_MODEL,
                   help=f"diffusers folder, single .safetensors file or Hugging Face id (default: ${DEFAULT_MODEL_ENV}, "
                        f"else the built-in {BUILT_IN_MODEL})")
    p.add_argument("--negative", default=None, help="negative prompt")
    p.add_argument("--sampler", default=None, help=f"sampler by WebUI name (default: the model's recommended one, else "
                                                   f"{d.sampler}); see `mixkit samplers`")
    p.add_argument("--schedule-type", default=None, help=f"Automatic, Karras, Exponential, ... (default: {d.schedule_type})")
    p.add_argument("--steps", type=int, default=None, help=f"default: the model's recommended steps, else {d.steps}")
    p.add_argument("--eta", type=float, default=None,
                   help="A1111's eta in [0, 1]: the ancestral and SDE samplers (Euler a, DPM2 a, DPM++ 2S a, DPM++ SDE, "
                        "DPM++ 2M SDE; default 1, 0 = no noise) and DDIM (default 0); other samplers ignore it")
    p.add_argument("--ensd", type=int, default=None,
                   help="A1111's eta noise seed delta (ENSD, e.g. 31337): ancestral samplers' noise from seed + ENSD; default 0")
    p.add_argument("--rng-source", default=None, choices=("CPU", "NV", "GPU"),
                   help="A1111's RNG source: CPU (default: a CPU torch generator), NV (NVIDIA's GPU noise, drawn "
                        "with Philox on the CPU: the same picture on any machine, and what A1111 gives with GPU on an "
                        "NVIDIA card), GPU (on a CPU model only, where it is the CPU noise); an infotext's `RNG` "
                        "fills it")
    from webui.cli.sampler_parameter_flags import add_sampler_parameter_flags

    add_sampler_parameter_flags(p)
    p.add_argument("--cfg", type=float, default=None,
                   help=f"CFG scale (default: the model's recommended one, e.g. 5 for mixkit-tiny-sd, else {d.cfg_scale})")
    p.add_argument("--seed", type=int, default=None, help=f"-1 for a random seed (default: {d.seed})")
    p.add_argument("--subseed", type=int, default=None,
                   help="A1111's variation seed (-1: random; image k uses subseed + k); needs --subseed-strength")
    p.add_argument("--subseed-strength", type=float, default=None, metavar="STRENGTH",
                   help="A1111's variation strength in [0, 1]: how far the noise moves toward the variation seed's "
                        "(0: off, the default; with it every image keeps --seed)")
    p.add_argument("--seed-resize-from", type=seed_resize_size, default=None, metavar="WxH",
                   help="A1111's 'Resize seed from': draw the seed's noise at this size and centre it, so an image "
                        "found at WxH keeps its composition at --width x --height")
    p.add_argument("--width", type=int, default=None, help=f"default: {size_default}")
    p.add_argument("--height", type=int, default=None, help=f"default: {size_default}")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--batch-count", type=int, default=d.batch_count)
    p.add_argument("--clip-skip", type=int, default=None,
                   help=f"text-encoder layers to skip from the end (default: the model's recommended one, else {d.clip_skip})")
    p.add_argument("--emphasis", default=None, metavar="MODE",
                   help="A1111's emphasis mode for (word:1.2): Original (default), \"No norm\", Ignore, None")
    p.add_argument("--comma-padding-backtrack", type=int, default=None, metavar="TOKENS",
                   help=f"A1111's prompt word wrap length limit: text after a comma within this many tokens of a "
                        f"75-token chunk's end moves to the next chunk (0-74; default {d.comma_padding_backtrack})")
    p.add_argument("--sdxl-clip-l-skip", action="store_true",
                   help="A1111's 'Clip skip SDXL': on SDXL, --clip-skip also moves CLIP-L's layer (default: SDXL "
                        "ignores clip skip, as A1111 does)")
    p.add_argument("--style", action="append", default=[], metavar="NAME",
                   help="apply a prompt style from --styles-file (repeatable, in order; A1111's styles: a style "
                        "with {prompt} wraps the prompt, others are appended after a comma)")
    p.add_argument("--styles-file", default=None, metavar="CSV",
                   help="an A1111 styles.csv (columns name, prompt, negative_prompt) for --style")
    p.add_argument("--lora", action="append", default=[], metavar="NAME_OR_PATH[:WEIGHT]",
                   help="apply a LoRA (repeatable); a file path or a name in --lora-dir")
    p.add_argument("--refiner", default=None, metavar="MODEL",
                   help="A1111's Refiner: a checkpoint (folder, single file or hub id; e.g. an SDXL refiner) that "
                        "samples the steps after --refiner-switch-at")
    p.add_argument("--refiner-config-dir", default=None, metavar="FOLDER",
                   help="a --refiner single file of a non-standard architecture: a diffusers folder whose configs fit "
                        "it (default: the --config-dir of a base file of its family, else the shipped configs)")
    p.add_argument("--refiner-switch-at", type=float, default=None, metavar="FRACTION",
                   help="fraction of the schedule (by noise level) after which the refiner takes over, in (0, 1) "
                        "(default: 0.8, A1111's)")
    p.add_argument("--refiner-switch-by-sample-steps", action="store_true", default=None,
                   help="A1111's Settings > Compatibility 'Switch to refiner by sampling steps instead of model "
                        "timesteps': --refiner-switch-at is a fraction of the model calls instead of the noise level")
    p.add_argument("--use-old-scheduling", action="store_true", default=None,
                   help="A1111's Settings > Compatibility 'Use old prompt editing timelines': in [a:b:N] an N below "
                        "1 is a fraction of the steps, any other N a step number (new: N with a '.' is a fraction)")
    p.add_argument("--tiling", action="store_true", default=None,
                   help="A1111's Tiling: a picture that tiles seamlessly (circular padding in the UNet and VAE)")
    from webui.cli.speedup_flags import add_speedup_flags

    add_speedup_flags(p)
    faces = p.add_argument_group("face restoration", "A1111's Restore faces: every face of each image restored by "
                                                     "GFPGAN or CodeFormer (weights in the folders below)")
    faces.add_argument("--restore-faces", action="store_true", default=None,
                       help="restore faces in every image (infotext 'Face restoration: MODEL')")
    faces.add_argument("--face-restoration-model", default=None, choices=("CodeFormer", "GFPGAN"),
                       help=f"the restorer (default {d.face_restoration_model}, A1111's)")
    faces.add_argument("--code-former-weight", type=float, default=None, metavar="W",
                       help=f"CodeFormer's weight in [0, 1]: 0 = maximum effect, 1 = minimum (default "
                            f"{d.code_former_weight})")
    faces.add_argument("--save-before-face-restoration", action="store_true", default=None,
                       help="also save each image as it was before restoration (NAME-before-face-restoration.png)")
    from webui.cli.webui import add_face_restorer_folder_flags

    add_face_restorer_folder_flags(faces)
    p.add_argument("--lora-dir", default=None, help="folder of LoRA files for names and <lora:...> tags")
    p.add_argument("--embeddings-dir", default=None, help="folder of textual-inversion embeddings")
    p.add_argument("--hypernetwork-dir", default=None, metavar="FOLDER",
                   help="folder of A1111 hypernetwork .pt files for <hypernet:name:strength> tags (A1111's "
                        "models/hypernetworks; default: none, the tags are then skipped with a warning)")
    p.add_argument("--vae", default=None, help="override the model's VAE (folder or single file)")
    p.add_argument("--config-dir", default=None,
                   help="single-file checkpoint of a non-standard architecture: a diffusers folder whose configs fit "
                        "it (a --refiner single file of the same family is read with them too)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cpu)")
    p.add_argument("--preset", default="exact", help="performance preset: exact (default), fast, low-memory")
    p.add_argument("--backend", default="torch", help="execution backend: torch (default), torch.compile, openvino")
    p.add_argument("--vae-tiling", action="store_true",
                   help="APPROXIMATE above the VAE's native size (512 px for SD 1.x, 1024 for SDXL): decode in blended "
                        "tiles, for a lower peak memory on large images (any preset; not with --backend openvino)")
    p.add_argument("--taesd", nargs="?", const="auto", default=None, metavar="SOURCE",
                   help="APPROXIMATE: decode with the tiny TAESD VAE: a diffusers folder, hub id or A1111 taesd_decoder.pth "
                        "(default: madebyollin/taesd or taesdxl by model family)")
    p.add_argument("--deepcache", type=int, default=None, metavar="N",
                   help="APPROXIMATE: DeepCache, run the full UNet every N steps and reuse deep features in between")
    p.add_argument("--tome", type=float, default=None, metavar="R",
                   help="APPROXIMATE: token merging, merge ratio R (0-0.75) of self-attention tokens")
    p.add_argument("--int8", action="store_true",
                   help="APPROXIMATE: int8 UNet, calibrated on the model's calibration prompts at this size and these "
                        "settings (--backend openvino: NNCF, cached across runs; --backend torch: torchao + inductor, "
                        "calibrated and compiled in each run)")
    p.add_argument("--int8-vae-decoder", choices=("auto", "on", "off"), default="auto",
                   help="with --int8: also quantize the VAE decoder (auto: where the backend can, i.e. openvino; "
                        "off: keep it in float)")
    p.add_argument("--ngms", type=float, default=None, metavar="SIGMA",
                   help="APPROXIMATE: A1111's negative guidance minimum sigma (s_min_uncond): below this noise level "
                        "every other step runs without the negative prompt (0: off; about 1 for SD)")
    p.add_argument("--ngms-all-steps", action="store_true", default=None,
                   help="APPROXIMATE: with --ngms, skip the negative prompt on every step below that sigma")
    p.add_argument("--skip-early-cfg", type=float, default=None, metavar="FRACTION",
                   help="APPROXIMATE: A1111's skip_early_cond: the first FRACTION (0-1) of the steps run without the "
                        "negative prompt")
    from webui.cli.infotext_flags import add_infotext_flags

    add_infotext_flags(p)
    p.add_argument("-o", "--output", default="outputs",
                   help="output folder (A1111 names: 00000-<seed>.png; default: ./outputs), or a .png file name "
                        "(several images: <name>-1.png, <name>-2.png, ...; existing files are replaced)")


def _with_styles(args: argparse.Namespace, negative: str) -> tuple[str, str]:
    """The prompt and negative prompt with --style applied, as A1111 merges styles before generating (its infotext
    then holds the merged prompts, as this one will)."""
    if args.style and not args.styles_file:
        raise ValueError(f"--style {args.style[0]} needs --styles-file CSV (an A1111 styles.csv)")
    from mixkit.prompts.styles import StyleLibrary

    return StyleLibrary(args.styles_file).apply(args.prompt, negative, list(args.style))


def run(args: argparse.Namespace) -> int:
    from pipelines.hires import HiresFix, HiresParams, check_hires_params
    from pipelines.params import GenerationLimits, Txt2ImgParams, check_txt2img_params
    from pipelines.txt2img import TextToImage
    from webui.cli.generate_hires import hires_fields

    infotext_keys = None
    if args.infotext is not None:
        from webui.cli.generate_infotext import apply_infotext, read_infotext_argument

        args, infotext_keys = apply_infotext(args, read_infotext_argument(args.infotext))
    if args.prompt is None and args.prompts_from_file is not None:
        args.prompt = ""  # the list's lines are the prompts
    if args.prompt is None:
        raise ValueError("mixkit generate needs a prompt: pass it as the first argument, or --infotext IMAGE_OR_TEXT")
    from webui.cli.controlnet_units import controlnet_specs

    specs, catalog = controlnet_specs(args, infotext_keys, img2img=False)
    from webui.config import upscaler_folders

    if upscaler_folders(args):
        from webui.cli.extras import register_upscaler_flags

        register_upscaler_flags(args)  # before --hr-upscaler is checked: the files' names are upscalers
    from webui.cli.extras import register_face_restorer_flags

    register_face_restorer_flags(args)  # before --restore-faces is checked: the folders' restorers
    hires = hires_fields(args)
    pipeline_class = TextToImage
    from webui.cli.ip_adapter_flags import ip_adapter_fields
    from webui.cli.ip_adapter_units import (check_mask_sizes, ip_adapter_unit_specs, mask_names, use_unit_store,
                                              with_ip_adapter_units)

    ip_fields = ip_adapter_fields(args)
    # --controlnet-json / --controlnet units with an IP-Adapter module, and the store holding what their check read
    ip_units, ip_store = ip_adapter_unit_specs(args)
    if ip_fields or ip_units:
        refuse_ip_adapter_with(refiner=args.refiner is not None, units_only=not ip_fields)
        names = mask_names(ip_fields, ip_units)
        ip_fields = with_ip_adapter_units(ip_fields, ip_units)
        check_mask_sizes(ip_fields, names, args.width, args.height)  # without a size: the pipeline's check
        from pipelines.ip_adapter_controlnet import params_class_for, pipeline_class_for
        from pipelines.ip_adapter_hires import hires_params_class

        # with --controlnet the units join the params after the load, with their models; with hires fix the
        # adapters guide both passes (`pipelines.ip_adapter_hires`)
        params = hires_params_class(bool(specs), True)(**generation_fields(args), **hires, **ip_fields) \
            if hires is not None else params_class_for("txt2img", bool(specs), True)(**generation_fields(args),
                                                                                    **ip_fields)
        pipeline_class = pipeline_class_for("txt2img", False, True)
    elif specs:  # the units join the params after the load, with their models
        from pipelines.controlnet import ControlHiresParams, ControlTxt2ImgParams

        params = ControlHiresParams(**generation_fields(args), **hires) if hires is not None else \
            ControlTxt2ImgParams(**generation_fields(args))
    else:
        params = HiresParams(**generation_fields(args), **hires) if hires is not None else \
            Txt2ImgParams(**generation_fields(args))

    def check(params: Txt2ImgParams) -> None:
        check_txt2img_params(params, GenerationLimits())
        if hires is not None:
            check_hires_params(params, GenerationLimits(), 8)  # SD's VAE grid; the pipeline checks the model's

    from webui.cli.prompt_script_flags import check_prompt_script, prompt_script_of
    from webui.cli.grid_font_flag import grid_font_context
    from webui.cli.script_image_cap import script_image_context
    from webui.cli.xyz_flags import check_xyz_plot, xyz_config_of, xyz_requested
    from webui.cli.xyz_model import cli_plot_model

    script = prompt_script_of(args, xyz_requested(args))  # Prompt matrix / Prompts from file, or None
    plot = xyz_config_of(args) if xyz_requested(args) else None
    plot_model = cli_plot_model(args)  # the VAE axis's --vae-dir, what --int8 / --backend fix in the UNet
    if plot is not None:  # before the output folder is made
        check_xyz_plot(plot, params, check=check, model=plot_model, **script_image_context(args),
                       **grid_font_context(args))
    if script is not None:
        check_prompt_script(*script, params, check, args)
    output, output_is_file = check_before_load(args, params, check)
    if (plot is not None or script is not None) and output_is_file:
        what = "an X/Y/Z plot writes a grid and its images" if plot is not None else \
            f"{script[0].TITLE} writes several images"
        raise ValueError(f"{what}: give -o a folder, not a .png file name.")
    from webui.cli.controlnet_units import check_unit_families

    check_unit_families(specs, catalog, args.model)
    pipe, params = load_pipeline(args, pipeline_class, params, check, lambda model: (model.native_size,) * 2,
                                 infotext_keys)
    if specs:
        from dataclasses import replace

        from pipelines.controlnet import ControlNetTextToImage
        from webui.cli.controlnet_units import built_units

        params = replace(params, controlnets=built_units(specs, catalog, pipe))
        if ip_fields:
            from pipelines.ip_adapter_controlnet import ControlNetIPAdapterTextToImage

            pipe = ControlNetIPAdapterTextToImage.from_pipeline(pipe)
        elif hires is None:
            pipe = ControlNetTextToImage.from_pipeline(pipe)
    use_unit_store(pipe, ip_store)  # the units' adapter files, read by their check: not read again
    from webui.cli.infotext_flags import infotext_writing_of

    if ip_fields and (plot is not None or script is not None):  # every cell / line reuses one encoding
        from pipelines.ip_adapter_reuse import ReferenceEmbeddings

        params = ReferenceEmbeddings().params_with_embeds(pipe, params)
    if plot is not None:
        from webui.cli.xyz_flags import run_xyz_plot

        return run_xyz_plot(pipe if hires is None else HiresFix(pipe), params, plot, output, infotext_writing_of(args),
                            model=plot_model, **script_image_context(args), **grid_font_context(args))
    if script is not None:
        from webui.cli.prompt_script_flags import run_prompt_script

        return run_prompt_script(*script, pipe if hires is None else HiresFix(pipe), params, output, args,
                                 infotext_writing_of(args))
    return generate_and_save(pipe if hires is None else HiresFix(pipe), params, output, output_is_file,
                             writing=infotext_writing_of(args))


def refuse_ip_adapter_with(*, script=None, refiner: bool = False, units_only: bool = False) -> None:
    """--ip-adapter (and IP-Adapter units: `units_only` when no --ip-adapter is given) runs on single generations,
    batches (--input-dir), X/Y/Z plots and prompt scripts; refuse what it cannot run with rather than drop one of
    them: `script` (the chosen `webui.cli.img2img_scripts.Img2ImgScript`) when it is Loopback or SD upscale
    (`pipelines.ip_adapter_reuse.SCRIPTS_REFUSING_IMAGE_PROMPTS`), a refiner."""
    from pipelines.ip_adapter_reuse import SCRIPTS_REFUSING_IMAGE_PROMPTS, STALE_REFERENCE_REASON

    other = None
    if script is not None and script.module.TITLE in SCRIPTS_REFUSING_IMAGE_PROMPTS:
        other = f"{script.flag} ({script.module.TITLE}: {STALE_REFERENCE_REASON}); run them as separate generations"
    elif refiner:
        other = "--refiner (the refiner's UNet has no adapter layers) yet; run them as separate generations"
    if other is not None:
        what = "an IP-Adapter unit (a unit with an ip-adapter module)" if units_only else "--ip-adapter"
        raise ValueError(f"{what} cannot be combined with {other}.")


def seed_resize_size(text: str) -> tuple[int, int]:
    """`--seed-resize-from WxH` as (width, height); the sizes are checked by the pipeline with the other sizes."""
    width, separator, height = text.lower().partition("x")
    if not separator or not width.strip().isdigit() or not height.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT, e.g. 512x768")
    return int(width), int(height)


def generation_fields(args: argparse.Namespace) -> dict:
    """The Txt2ImgParams fields the shared flags set (`add_generation_flags`; A1111's defaults for flags not given,
    the model's recommended ones replace some after the load, see `load_pipeline`), --style applied to the prompts."""
    from pipelines.params import Txt2ImgParams
    from webui.cli.infotext_flags import infotext_options_of
    from webui.cli.sampler_parameter_flags import sampler_parameters_of
    from webui.cli.speedup_flags import speedup_params_of

    d = Txt2ImgParams()
    if args.style or args.styles_file:
        args.prompt, args.negative = _with_styles(args, _or(args.negative, d.negative_prompt))
    return dict(
        prompt=args.prompt, negative_prompt=_or(args.negative, d.negative_prompt), steps=_or(args.steps, d.steps),
        cfg_scale=_or(args.cfg, d.cfg_scale),
        width=d.width if args.width is None else args.width, height=d.height if args.height is None else args.height,
        seed=_or(args.seed, d.seed), batch_size=args.batch_size, batch_count=args.batch_count,
        subseed=_or(args.subseed, d.subseed), subseed_strength=_or(args.subseed_strength, d.subseed_strength),
        seed_resize_from_w=(args.seed_resize_from or (0, 0))[0], seed_resize_from_h=(args.seed_resize_from or (0, 0))[1],
        sampler=_or(args.sampler, d.sampler), schedule_type=_or(args.schedule_type, d.schedule_type), eta=args.eta,
        ensd=_or(args.ensd, d.ensd), rng_source=_or(args.rng_source, d.rng_source),
        clip_skip=_or(args.clip_skip, d.clip_skip), loras=list(args.lora),
        emphasis=_or(args.emphasis, d.emphasis),
        comma_padding_backtrack=_or(args.comma_padding_backtrack, d.comma_padding_backtrack),
        sdxl_clip_l_skip=bool(args.sdxl_clip_l_skip),
        s_min_uncond=_or(args.ngms, d.s_min_uncond), s_min_uncond_all=bool(args.ngms_all_steps),
        skip_early_cond=_or(args.skip_early_cfg, d.skip_early_cond),
        refiner=args.refiner, refiner_config_dir=args.refiner_config_dir,
        refiner_switch_at=_or(args.refiner_switch_at, d.refiner_switch_at),
        refiner_switch_by_sample_steps=bool(args.refiner_switch_by_sample_steps),
        use_old_scheduling=bool(args.use_old_scheduling), tiling=bool(args.tiling),
        sampler_parameters=sampler_parameters_of(args), infotext_options=infotext_options_of(args),
        restore_faces=bool(args.restore_faces),
        face_restoration_model=_or(args.face_restoration_model, d.face_restoration_model),
        code_former_weight=_or(args.code_former_weight, d.code_former_weight),
        save_images_before_face_restoration=bool(args.save_before_face_restoration),
        **speedup_params_of(args),
    )


def check_before_load(args: argparse.Namespace, params, check) -> tuple[Path, bool]:
    """Every check that needs no model, before the (slow) load: `check(params)` (the Python API's, its messages in
    flag terms), the approximation and other flags, and the output target, proven writable; returns the latter."""
    from webui.cli.flag_names import errors_in_flag_terms
    from webui.cli.generate_checks import check_generate_args

    with errors_in_flag_terms():  # `--cfg must be in [0, 100.0]`, not the field name cfg_scale
        check(params)
    check_approximation_args(args)
    check_generate_args(args, params.prompt)
    return output_target(args.output)


def load_pipeline(args: argparse.Namespace, pipeline_class, params, check, default_size, infotext_keys=None):
    """(pipeline, params): the model loaded as `pipeline_class`, the flags left out filled with the model's
    recommended steps/CFG/sampler/clip skip and `default_size(model)` (width, height), each change checked with
    `check`; then --preset/--backend/--vae-tiling and the approximations installed, with their one-line notes.
    `infotext_keys` (an --infotext's own keys): what the loaded model cannot reproduce of it is warned about."""
    from dataclasses import replace

    from pipelines.base import recommended_for
    from pipelines.optimize import load_options_for

    pipe = pipeline_class.from_pretrained(args.model, device=args.device, lora_dir=args.lora_dir,
                                          hypernetwork_dir=args.hypernetwork_dir,
                                          embeddings_dir=args.embeddings_dir, vae=args.vae, config_dir=args.config_dir,
                                          **load_options_for(args.preset, args.device, args.backend))
    print(f"Loaded {pipe.model.description} from {args.model}", file=sys.stderr)
    if infotext_keys is not None:
        from webui.cli.generate_infotext import warn_about_model

        warn_about_model(pipe, infotext_keys, vae_given=args.vae is not None)
    chosen = {"steps": args.steps, "cfg_scale": args.cfg, "sampler": args.sampler,  # None: the model's, else A1111's
              "clip_skip": args.clip_skip}
    recommended = {k: v for k, v in recommended_for(pipe.model, type(params)).items() if chosen[k] is None}
    if recommended:
        params = replace(params, **recommended)
        check(params)
        listed = ", ".join(f"{k}={v}" for k, v in recommended.items())
        print(f"Using the model's recommended {listed} (its mixkit_generation.json); "
              "--steps/--cfg/--sampler/--clip-skip override", file=sys.stderr)
    if args.width is None or args.height is None:
        width, height = default_size(pipe.model)
        params = replace(params, width=args.width or width, height=args.height or height)
        check(params)
    if args.preset != "exact" or args.backend != "torch" or args.vae_tiling:
        from pipelines.optimize import optimize

        tiling = {"vae_tiling": True} if args.vae_tiling else {}
        print(optimize(pipe, args.preset, args.backend, **tiling).summary(), file=sys.stderr)
    from pipelines.approx import ApproximationReport

    approximation = ApproximationReport()
    if args.taesd is not None or args.deepcache is not None or args.tome is not None or args.int8:
        from pipelines.approx import Int8Calibration, approximate

        int8 = Int8Calibration(width=params.width, height=params.height, steps=params.steps, cfg_scale=params.cfg_scale,
                               sampler=params.sampler, vae_decoder=VAE_DECODER_CHOICES[args.int8_vae_decoder]
                               ) if args.int8 else False
        approximation = approximate(pipe, taesd=args.taesd, deepcache=args.deepcache, tome=args.tome, int8=int8)
    warning = approximate_warning(approximation, pipe.model, params)
    if warning:
        print(warning, file=sys.stderr)
    return pipe, params


def generate_and_save(pipe, params, output: Path, output_is_file: bool, save=None, writing=None) -> int:
    """Run `pipe(params)` with a progress bar and Ctrl-C as A1111's Interrupt, save the images, print their paths;
    the exit code (130 when interrupted, whatever was made kept). `save(result)` -> paths replaces the naming of
    `output` (the img2img batch names each result after its input)."""
    result = run_with_progress(lambda **hooks: pipe(params, **hooks), params.steps * params.batch_count)
    if save is not None:
        paths = save(result)
    else:
        paths = result.save_as(output, writing) if output_is_file else result.save(output, writing)
    return report_written(paths, result.interrupted, f"kept {len(result.images)} of {params.total_images} image(s)")


VAE_DECODER_CHOICES = {"auto": None, "on": True, "off": False}  # --int8-vae-decoder -> Int8Calibration.vae_decoder


def _or(value, default):
    return default if value is None else value


def approximate_warning(approximation, model, params=None) -> str:
    """The CLI's one APPROXIMATE line: what `approximate()` installed, plus VAE tiling, which `optimize()`
    installs (--vae-tiling) and labels approximate (`VAE tiling:` in the infotext), plus the params' HyperTile (per
    call, `--hypertile`); empty for exact output."""
    from pipelines.approx import ApproximationReport
    from pipelines.approx.labels import OptimizationLabels, model_labels
    from pipelines.hires import HiresParams

    tiling = OptimizationLabels(vae_tiling=model_labels(model).vae_tiling).approximations()
    hypertile = getattr(params, "hypertile", None)
    hires = isinstance(params, HiresParams)
    if hypertile is not None and (hypertile.unet_in(hires) or hypertile.vae):
        tiling.append(hypertile.describe(hires_second_pass=hires))
    return ApproximationReport(applied=[*approximation.applied, *tiling]).warning()


def check_approximation_args(args: argparse.Namespace) -> None:
    """Range-check --deepcache / --tome, and what --int8 needs, before the model load (the same checks
    `approximate` runs)."""
    from pipelines.approx.deepcache import check_deepcache_interval
    from pipelines.approx.tome_unet import check_tome_ratio

    for flag, value, check in (("--deepcache", args.deepcache, check_deepcache_interval),
                               ("--tome", args.tome, check_tome_ratio)):
        if value is not None:
            try:
                check(value)
            except ValueError as error:
                raise ValueError(f"{flag}: {error}") from None
    if (args.tome or 0) > 0 and args.backend != "torch":
        raise ValueError(f"--tome changes the diffusers UNet's attention, which --backend {args.backend} replaces with "
                         "a fixed graph; use --backend torch for --tome")
    if (args.deepcache or 1) > 1 and args.backend == "torch.compile":
        raise ValueError("--deepcache changes the UNet's control flow, which --backend torch.compile fixes; "
                         "use --backend torch or openvino for --deepcache")
    vae_decoder = getattr(args, "int8_vae_decoder", "auto")
    if vae_decoder != "auto" and not getattr(args, "int8", False):
        raise ValueError(f"--int8-vae-decoder {vae_decoder} needs --int8 (it says whether --int8 covers the VAE decoder)")
    if getattr(args, "int8", False):
        if vae_decoder == "on" and args.backend != "openvino":
            raise ValueError("--int8-vae-decoder on needs --backend openvino (on the torch backend --int8 quantizes "
                             "the UNet only)")
        if args.backend == "openvino":
            from mixkit.runtime.openvino_int8 import require_nncf

            require_nncf()
        elif args.backend == "torch":
            from mixkit.runtime.torch_int8 import require_torchao

            require_torchao()
            if (args.deepcache or 1) > 1:
                raise ValueError("--int8 on --backend torch compiles one fixed graph, which DeepCache's shallow branch "
                                 "cannot run on; use --backend openvino for --int8 with --deepcache")
            if args.batch_size != 1:
                raise ValueError("--int8 on --backend torch compiles its graph for one image at a time; "
                                 "use --batch-count instead of --batch-size, or --backend openvino")
        else:
            raise ValueError(f"--int8 compiles its own int8 graph; use --backend openvino (cached across runs) or "
                             f"--backend torch, not --backend {args.backend}")


# Names that say "a file", not "a folder": -o cat.png writes cat.png (a .jpg/.webp is refused: PNG holds the infotext).
FILE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


def output_target(value: str) -> tuple[Path, bool]:
    """(path, is_file) for -o: an image file name (unless a folder of that name exists, or the name ends in a
    slash) or a folder, proven writable before any generation work."""
    from pipelines.generation import check_png_file_name

    path = Path(value)
    named_as_folder = value.endswith(("/", os.sep))  # `-o shots.png/`: the user says folder
    if path.suffix.lower() in FILE_SUFFIXES and not path.is_dir() and not named_as_folder:
        check_png_file_name(path)
        ensure_writable_folder(path.parent)
        return path, True
    return ensure_writable_folder(path), False


def ensure_writable_folder(folder: str | os.PathLike, choose: str = "choose another with -o") -> Path:
    """Prove the output folder writable before any generation (or training) work, by writing a probe file (the
    permission bits say nothing for root or a read-only mount). Folders made for the probe are removed again:
    saving creates them, so a run that fails before it leaves nothing behind. `choose` ends the error message:
    how to name another folder on this command."""
    import tempfile

    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"Output path {path} exists and is not a folder.")
    made = [parent for parent in (path, *path.parents) if not parent.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".mixkit-write-test-"):
            pass
    except OSError as error:
        raise PermissionError(f"Output folder {path} is not writable ({error.strerror or error}); {choose}.") from None
    finally:
        for created in made:  # innermost first
            with contextlib.suppress(OSError):
                created.rmdir()
    return path
