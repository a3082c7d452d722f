"""How a web UI server is set up: what it serves, where it writes, and what it protects."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelines.params import GenerationLimits
from webui.api_convert import RequestLimits

# A1111's upscaler model folders: ServerConfig / argparse attribute -> command-line flag
UPSCALER_FOLDER_FLAGS = {"esrgan_models_path": "--esrgan-models-path",
                         "realesrgan_models_path": "--realesrgan-models-path",
                         "swinir_models_path": "--swinir-models-path", "dat_models_path": "--dat-models-path",
                         "scunet_models_path": "--scunet-models-path"}
# A1111's face restorer folders (models/GFPGAN, models/Codeformer): ServerConfig / argparse attribute -> flag
FACE_RESTORER_FOLDER_FLAGS = {"gfpgan_models_path": "--gfpgan-models-path",
                              "codeformer_models_path": "--codeformer-models-path"}
LOCALHOST = "127.0.0.1"
ALL_INTERFACES = "0.0.0.0"


@dataclass
class ServerConfig:
    models: list[str] = field(default_factory=list)  # sources the operator allows; the first is loaded at start
    models_dir: str | None = None
    output_dir: str = "outputs"
    lora_dir: str | None = None
    # A1111's --hypernetwork-dir: its .pt files are `<hypernet:name:strength>` tags and /sdapi/v1/hypernetworks;
    # create/train hypernetwork write there
    hypernetwork_dir: str | None = None
    embeddings_dir: str | None = None
    # The only folder whose subfolders remote clients may name as training datasets (`--training-data-dir`); None:
    # training refused. Create/train embedding write into `embeddings_dir` and `output_dir` only, hypernetworks into
    # `hypernetwork_dir` and `output_dir`.
    training_data_dir: str | None = None
    styles_file: str | None = None  # an A1111 styles.csv for requests' `styles` and /sdapi/v1/prompt-styles
    vae_dir: str | None = None  # VAE files / diffusers VAE folders offered as `sd_vae`
    controlnet_dir: str | None = None
    # A1111's models/ESRGAN, models/RealESRGAN, models/SwinIR and models/DAT (`--esrgan-models-path`,
    # `--realesrgan-models-path`, `--swinir-models-path`, `--dat-models-path`): every .pth/.pt/.safetensors file below
    # them is an upscaler named by its file stem, or A1111's name for Real-ESRGAN's release files ("R-ESRGAN 4x+") and
    # its DAT downloads ("DAT x4"; pipelines.model_upscale.upscaler_name; SwinIR_4x.pth keeps its stem, "SwinIR 4x"
    # resolving to it, as A1111 lists it once downloaded); the network is
    # recognised from the weights whatever the folder
    esrgan_models_path: str | None = None
    realesrgan_models_path: str | None = None
    swinir_models_path: str | None = None
    dat_models_path: str | None = None
    # A1111's models/ScuNET (`--scunet-models-path`): SCUNet denoisers; scunet_color_real_gan/psnr.pth are A1111's
    # "ScuNET GAN" / "ScuNET PSNR"
    scunet_models_path: str | None = None
    # A1111's models/GFPGAN and models/Codeformer (`--gfpgan-models-path`, `--codeformer-models-path`): the restorer
    # weights and facexlib's detection_Resnet50_Final.pth, for Restore faces and Extras (pipelines.face_restoration)
    gfpgan_models_path: str | None = None
    codeformer_models_path: str | None = None
    appflow_models: dict[str, dict[str, str]] = field(default_factory=dict)  # app -> role -> model source
    # CLIP interrogation (`--interrogate-clip-model`, `--interrogate-categories-dir`): the CLIP that ranks the word
    # lists (a shipped name, transformers CLIP folder or hub id), and an A1111 interrogate/ folder of *.txt lists
    # (None: the built-in shapes-world lists)
    interrogate_clip_model: str = "mixkit-tiny-clip"
    interrogate_categories_dir: str | None = None
    # A1111's models/torch_deepdanbooru (`--deepdanbooru-models-path`): the folder holding model-resnet_custom_v3.pt
    # for Interrogate DeepBooru (None: DeepBooru is not offered; POST /sdapi/v1/interrogate answers 501)
    deepdanbooru_models_path: str | None = None
    device: str | None = None
    port: int = 7860
    listen: bool = False
    # HTTP Basic users as ((user, password), ...) (`--auth u1:p1,u2:p2`); one (user, password) pair is accepted too
    auth: tuple[tuple[str, str], ...] | tuple[str, str] | None = None
    insecure_no_auth: bool = False
    # Host names besides localhost a server bound to localhost answers to (a reverse proxy's public name; "*": any),
    # and the origins of other pages allowed to call the API from a browser (A1111's --cors-allow-origins)
    allowed_hosts: tuple[str, ...] = ()
    cors_allow_origins: tuple[str, ...] = ()
    queue_size: int = 8
    preview_every: int = 5
    limits: GenerationLimits = field(default_factory=GenerationLimits)
    request_limits: RequestLimits = field(default_factory=RequestLimits)
    ui: bool = True  # mount the Gradio UI next to the API
    settings_file: str | None = None  # JSON file the Settings/options changes are saved to (A1111's config.json)

    @property
    def host(self) -> str:
        return ALL_INTERFACES if self.listen else LOCALHOST


def upscaler_folders(source) -> list[str]:
    """The upscaler model folders set on a ServerConfig or parsed command line, in flag order."""
    return [folder for attribute in UPSCALER_FOLDER_FLAGS if (folder := getattr(source, attribute, None))]


def check_server_config(config: ServerConfig) -> None:
    """Refuse an unsafe or impossible setup before anything is loaded or bound."""
    if config.listen and config.auth is None and not config.insecure_no_auth:
        raise ValueError("--listen exposes the server to the network: add --auth user:password, "
                         "or --insecure-no-auth if the network is trusted.")
    cap = config.request_limits.max_image_pixels
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 64 * 64):
        raise ValueError(f"--max-image-pixels must be a whole number of at least 4096 (64x64), got {cap!r}.")
    if config.auth is not None and config.insecure_no_auth:
        raise ValueError("--auth and --insecure-no-auth contradict each other; pass one of them.")
    for origin in config.cors_allow_origins:
        from webui.origin_guard import normalise_origin

        normalise_origin(origin)  # raises ValueError naming the entry
    for name in config.allowed_hosts:
        if not isinstance(name, str) or not name.strip() or "/" in name or ":" in name.strip("[]"):
            raise ValueError(f"--allowed-hosts entry {name!r} is not a host name: give names like example.com "
                             "(no scheme, no port), or * for any.")
    if config.auth is not None:
        from webui.http_guards import credential_pairs

        from pipelines.infotext_options import check_user

        for user, _ in credential_pairs(config.auth):  # raises ValueError naming the bad value
            try:
                # every generation carries its --auth user (the infotext's `User`) and refuses one it could not
                # write: such a name would be turned away on each request, so it is refused here, at the start
                check_user(user)
            except ValueError as error:
                raise ValueError(f"--auth user {user[:40]!r} cannot be used: {error}") from None
    if isinstance(config.port, bool) or not isinstance(config.port, int) or not 0 <= config.port <= 65535:
        raise ValueError(f"port must be an integer in [0, 65535] (0 = any free port), got {config.port!r}.")
    if isinstance(config.queue_size, bool) or not isinstance(config.queue_size, int) or not 0 <= config.queue_size <= 1000:
        raise ValueError(f"queue size must be an integer in [0, 1000], got {config.queue_size!r}.")
    if config.hypernetwork_dir is not None:
        from pathlib import Path

        if not Path(config.hypernetwork_dir).expanduser().is_dir():
            raise ValueError(f"--hypernetwork-dir {config.hypernetwork_dir!r} is not a folder; create it or pass the "
                             "folder holding your A1111 hypernetwork .pt files.")
    if config.training_data_dir is not None:
        from pathlib import Path

        if not Path(config.training_data_dir).expanduser().is_dir():
            raise ValueError(f"--training-data-dir {config.training_data_dir!r} is not a folder; create it or fix the "
                             "path.")
    if not isinstance(config.interrogate_clip_model, str) or not config.interrogate_clip_model.strip():
        raise ValueError("--interrogate-clip-model must name a CLIP model (a folder, hub id or mixkit-tiny-clip), "
                         f"got {config.interrogate_clip_model!r}.")
    if config.interrogate_categories_dir is not None:
        from mixkit.interrogate import read_categories

        try:
            read_categories(config.interrogate_categories_dir, dict_limit=0)  # a missing folder or an empty list
        except ValueError as error:
            raise ValueError(f"--interrogate-categories-dir: {error}") from None
    for attribute, flag in {**UPSCALER_FOLDER_FLAGS, **FACE_RESTORER_FOLDER_FLAGS,
                            "deepdanbooru_models_path": "--deepdanbooru-models-path"}.items():
        from pathlib import Path as FolderPath

        folder = getattr(config, attribute)
        if folder is not None and not FolderPath(folder).expanduser().is_dir():
            raise ValueError(f"{flag} {folder!r} is not a folder; create it or fix the path.")
    if not config.models and not config.models_dir:
        raise ValueError("No model to serve: pass --model (a diffusers folder, .safetensors file or hub id) or --models-dir.")
