"""`mixkit webui`: the Gradio web UI and the A1111-compatible HTTP API in one local server."""

from __future__ import annotations

import argparse
import os

DEFAULT_MODEL_ENV = "MIXKIT_MODEL"
DEFAULT_SETTINGS_FILE = "mixkit-webui-settings.json"


def add_parser(subparsers) -> None:
    from pipelines.params import DEFAULT_MAX_SCRIPT_IMAGES

    p = subparsers.add_parser(
        "webui", help="start the web UI and the A1111-compatible HTTP API",
        description="Serve the mixkit web UI at http://127.0.0.1:PORT/ and the A1111 API at /sdapi/v1/. "
                    "Binds to localhost unless --listen; --listen requires --auth (or --insecure-no-auth).")
    p.add_argument("--model", action="append", default=[], metavar="SOURCE",
                   help=f"a model the server may load (repeatable; the first is loaded at start): diffusers folder, "
                        f".safetensors file or hub id (default: ${DEFAULT_MODEL_ENV}, else the built-in mixkit-tiny-sd)")
    p.add_argument("--models-dir", default=None, help="folder whose checkpoints and diffusers folders are offered too")
    p.add_argument("--port", type=int, default=7860, help="port (default: 7860)")
    p.add_argument("--listen", action="store_true", help="bind to all interfaces (0.0.0.0) instead of 127.0.0.1")
    p.add_argument("--auth", default=None, metavar="USER:PASS[,USER2:PASS2]",
                   help="require HTTP Basic auth for the UI and the API; several users comma-separated, as A1111's --api-auth")
    p.add_argument("--max-image-pixels", type=int, default=None, metavar="N",
                   help="largest input image (img2img, Extras, ControlNet, AppFlow) in pixels "
                        "(default: 4x the generation cap, 16,777,216)")
    p.add_argument("--max-script-images", type=int, default=None, metavar="N",
                   help="most images one script job (X/Y/Z plot, Prompt matrix, Prompts from file, Loopback, SD "
                        "upscale) may generate in all; larger jobs get HTTP 422 before queueing "
                        f"(default: {DEFAULT_MAX_SCRIPT_IMAGES:,})")
    p.add_argument("--insecure-no-auth", action="store_true", help="allow --listen without --auth (trusted networks only)")
    p.add_argument("--allowed-hosts", default=None, metavar="NAME[,NAME2]",
                   help="host names a server bound to localhost answers to besides localhost/127.0.0.1 (a reverse "
                        "proxy's public name; * for any); other Host headers get 400 (DNS-rebinding guard)")
    p.add_argument("--cors-allow-origins", default=None, metavar="ORIGIN[,ORIGIN2]",
                   help="origins of other web pages allowed to call the API from a browser, e.g. http://localhost:3000 "
                        "(as A1111's flag); other pages' cross-origin POSTs get 403")
    p.add_argument("--queue", type=int, default=8, metavar="N",
                   help="how many requests may wait behind the running one; more get HTTP 503 (default: 8)")
    p.add_argument("--output-dir", default="outputs", help="where generated images are saved (default: ./outputs)")
    p.add_argument("--lora-dir", default=None, help="folder of LoRA files for <lora:name:w> tags and the LoRA tab")
    p.add_argument("--embeddings-dir", default=None, help="folder of textual-inversion embeddings")
    p.add_argument("--hypernetwork-dir", default=None, metavar="FOLDER",
                   help="folder of A1111 hypernetwork .pt files for <hypernet:name:strength> tags, where the Train "
                        "tab and /sdapi/v1/create|train/hypernetwork write (A1111's models/hypernetworks; default: "
                        "none, the tags are then skipped with a warning)")
    p.add_argument("--training-data-dir", default=None, metavar="FOLDER",
                   help="the folder whose subfolders the Train tab and /sdapi/v1/train/embedding|hypernetwork may read as "
                        "datasets (default: none, training refused); clients name a folder below it, never another "
                        "path")
    p.add_argument("--styles-file", default=None, metavar="CSV",
                   help="an A1111 styles.csv: the styles API requests may name (A1111's --styles-file)")
    p.add_argument("--vae-dir", default=None, help="folder of VAEs for Settings (.safetensors, .pt, .ckpt files or diffusers VAE folders; "
                        "a checkpoint's side-car *.vae.* files are offered too)")
    p.add_argument("--controlnet-dir", default=None, help="folder of ControlNet models (files or diffusers folders)")
    add_upscaler_folder_flags(p)
    add_face_restorer_folder_flags(p)
    p.add_argument("--appflow-config", default=None, metavar="JSON",
                   help='models for AppFlow apps: {"app": {"role": "model source"}} (default: each app\'s default models)')
    p.add_argument("--interrogate-clip-model", default="mixkit-tiny-clip", metavar="MODEL",
                   help="the CLIP that ranks the word lists of Interrogate CLIP / POST /sdapi/v1/interrogate: a "
                        "transformers CLIP folder or hub id, e.g. openai/clip-vit-large-patch14 (default: the built-in "
                        "mixkit-tiny-clip)")
    p.add_argument("--interrogate-categories-dir", default=None, metavar="DIR",
                   help="folder of word lists (*.txt, one term a line; NAME.topN.txt appends its N best), as A1111's "
                        "interrogate/ folder (default: built-in shapes, colours and sizes lists)")
    p.add_argument("--deepdanbooru-models-path", default=None, metavar="FOLDER",
                   help="folder holding A1111's DeepDanbooru tagger model-resnet_custom_v3.pt (its "
                        "models/torch_deepdanbooru) for Interrogate DeepBooru (default: DeepBooru not offered)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cpu)")
    p.add_argument("--preview-every", type=int, default=5, metavar="STEPS", help="live preview every N steps (0: off)")
    p.add_argument("--api-only", action="store_true", help="serve the HTTP API without the Gradio UI")
    p.add_argument("--ui-settings-file", default=DEFAULT_SETTINGS_FILE, metavar="JSON",
                   help="where Settings changes (sampler defaults, performance preset, ...) are saved and read back at "
                        f"start (default: ./{DEFAULT_SETTINGS_FILE}; '' to keep them in memory only)")
    p.set_defaults(func=run)


def add_upscaler_folder_flags(parser) -> None:
    """A1111's upscaler model folders, shared by `webui`, `extras` and `generate` (hires fix)."""
    parser.add_argument("--esrgan-models-path", default=None, metavar="FOLDER",
                        help="A1111's models/ESRGAN: ESRGAN .pth/.safetensors files (4x-UltraSharp, Remacri ...), "
                             "each an upscaler named by its file name")
    parser.add_argument("--realesrgan-models-path", default=None, metavar="FOLDER",
                        help="A1111's models/RealESRGAN: Real-ESRGAN files; its release files get A1111's names "
                             "(RealESRGAN_x4plus.pth is 'R-ESRGAN 4x+', realesr-general-x4v3.pth 'R-ESRGAN General 4xV3')")
    parser.add_argument("--swinir-models-path", default=None, metavar="FOLDER",
                        help="A1111's models/SwinIR: SwinIR files (classical x2/x3/x4/x8, lightweight, Real-SwinIR), "
                             "each an upscaler named by its file name; A1111's 'SwinIR 4x' (its SwinIR_4x.pth) is "
                             "found by either name")
    parser.add_argument("--dat-models-path", default=None, metavar="FOLDER",
                        help="A1111's models/DAT: DAT files (DAT, DAT-S, DAT-2, DAT-light, community 4x DAT models), "
                             "each an upscaler named by its file name; DAT_x2/x3/x4.pth are A1111's 'DAT x2/x3/x4'")
    parser.add_argument("--scunet-models-path", default=None, metavar="FOLDER",
                        help="A1111's models/ScuNET: SCUNet denoisers (same size; A1111 runs them once, then resizes), "
                             "each an upscaler named by its file name; scunet_color_real_gan/psnr.pth are A1111's "
                             "'ScuNET GAN' / 'ScuNET PSNR'")


def add_face_restorer_folder_flags(parser) -> None:
    """A1111's face restorer folders, shared by `webui`, `extras`, `generate`, `img2img` and `outpaint` (Restore
    faces)."""
    parser.add_argument("--gfpgan-models-path", default=None, metavar="FOLDER",
                        help="A1111's models/GFPGAN: GFPGANv1.4.pth (or another .pth with GFPGAN in its name) and "
                             "detection_Resnet50_Final.pth, for the 'GFPGAN' face restorer")
    parser.add_argument("--codeformer-models-path", default=None, metavar="FOLDER",
                        help="A1111's models/Codeformer: codeformer-v0.1.0.pth and detection_Resnet50_Final.pth, for "
                             "the 'CodeFormer' face restorer")


def config_from_args(args: argparse.Namespace):
    """A checked ServerConfig from the parsed flags (raises ValueError with the flag to fix)."""
    from webui.api_convert import RequestLimits
    from webui.config import ServerConfig, check_server_config
    from webui.http_guards import parse_credentials

    from webui.cli.generate_checks import check_device

    check_device(args.device)  # before any model loads, as `generate` checks it
    appflow_models = read_appflow_config(args.appflow_config) if args.appflow_config else {}
    from mixkit.tiny.shipped import DEFAULT_TEXT_TO_IMAGE

    models = list(args.model) or [os.environ.get(DEFAULT_MODEL_ENV) or DEFAULT_TEXT_TO_IMAGE]
    config = ServerConfig(
        models=models, models_dir=args.models_dir, output_dir=args.output_dir, lora_dir=args.lora_dir,
        hypernetwork_dir=args.hypernetwork_dir,
        embeddings_dir=args.embeddings_dir, training_data_dir=args.training_data_dir, styles_file=args.styles_file, vae_dir=args.vae_dir, controlnet_dir=args.controlnet_dir,
        interrogate_clip_model=args.interrogate_clip_model, interrogate_categories_dir=args.interrogate_categories_dir,
        deepdanbooru_models_path=args.deepdanbooru_models_path,
        esrgan_models_path=args.esrgan_models_path, realesrgan_models_path=args.realesrgan_models_path,
        swinir_models_path=args.swinir_models_path, dat_models_path=args.dat_models_path,
        scunet_models_path=args.scunet_models_path,
        gfpgan_models_path=args.gfpgan_models_path, codeformer_models_path=args.codeformer_models_path,
        appflow_models=appflow_models, device=args.device, port=args.port, listen=args.listen,
        auth=parse_credentials(args.auth) if args.auth is not None else None, insecure_no_auth=args.insecure_no_auth,
        allowed_hosts=_comma_list(args.allowed_hosts), cors_allow_origins=_comma_list(args.cors_allow_origins),
        queue_size=args.queue, preview_every=args.preview_every, ui=not args.api_only,
        settings_file=args.ui_settings_file or None,
        request_limits=RequestLimits(max_image_pixels=args.max_image_pixels),
        limits=generation_limits(args),
    )
    check_server_config(config)
    return config


def generation_limits(args: argparse.Namespace):
    """The server's GenerationLimits: the defaults, with `--max-script-images` when given (checked, named by its flag)."""
    from pipelines.params import GenerationLimits, check_max_script_images

    if args.max_script_images is None:
        return GenerationLimits()
    return GenerationLimits(max_script_images=check_max_script_images("--max-script-images", args.max_script_images))


def _comma_list(text: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip()) if text else ()


def read_appflow_config(path: str) -> dict[str, dict[str, str]]:
    """{"app": {"role": "source"}} from a JSON file, checked for shape (names are checked when an app runs)."""
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as error:
        raise FileNotFoundError(f"--appflow-config {path!r} cannot be read ({error.strerror}).") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"--appflow-config {path!r} is not valid JSON: {error}.") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
                                             for v in data.values()):
        raise ValueError(f'--appflow-config {path!r} must be {{"app": {{"role": "model source"}}}}.')
    return data


def run(args: argparse.Namespace) -> int:
    from webui.server import serve

    serve(config_from_args(args))
    return 0
