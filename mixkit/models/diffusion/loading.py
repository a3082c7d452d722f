"""Load a Stable Diffusion model from a diffusers folder, a Hugging Face id or a single file.

Components are loaded one by one with diffusers'/transformers' own classes (so real checkpoints
load exactly as those libraries load them) instead of through `DiffusionPipeline`, which would
also load safety checkers and feature extractors mixkit does not use, and would hide which
component failed.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from mixkit.errors import CheckpointFormatError, ModelNotFoundError
from mixkit.models.diffusion.components import DiffusionModel
from mixkit.models.diffusion.diffusers_folder import check_weight_files, load_diffusers_folder, read_json
from mixkit.models.diffusion.hub_files import pipeline_file_selector, vae_file_selector
from mixkit.models.diffusion.load_options import check_device, check_load_dtype, check_use_safetensors, check_variant

logger = logging.getLogger(__name__)

SINGLE_FILE_SUFFIXES = (".safetensors", ".ckpt", ".pt", ".pth", ".bin")
# A1111's "Automatic" VAE: a file named like the checkpoint with one of these endings, in its folder
# (sd_vae.find_vae_near_checkpoint, in this order). Civitai models often ship their VAE this way.
VAE_NEAR_CHECKPOINT_SUFFIXES = (".vae.pt", ".vae.ckpt", ".vae.safetensors")
# `DiffusionModel.extras` key for a VAE chosen for every checkpoint that runs, as A1111's `sd_vae` other than
# "Automatic": the chosen file's name (`vae=`), or BUILT_IN_VAE (A1111's "None", `vae_near_checkpoint=False`).
# Absent: "Automatic", the VAE that came with the checkpoint. A refiner decodes with its own VAE unless it is set
# (pipelines.refiner_vae).
VAE_SETTING_KEY = "vae_setting"
BUILT_IN_VAE = "None"


def find_vae_near_checkpoint(checkpoint: str | os.PathLike) -> Path | None:
    """The `<name>.vae.pt/.vae.ckpt/.vae.safetensors` next to a single-file checkpoint `<name>.<ext>`, or None.

    A1111 1.0's rule (exact name). Later A1111 releases take any known VAE whose file name merely starts
    with the checkpoint's name, which picks an unrelated VAE for a checkpoint called e.g. "sd"; not copied.
    """
    path = Path(checkpoint)
    if not path.is_file() or path.name.lower().endswith(VAE_NEAR_CHECKPOINT_SUFFIXES):
        return None
    for suffix in VAE_NEAR_CHECKPOINT_SUFFIXES:
        candidate = path.with_name(path.stem + suffix)
        if candidate.is_file():
            return candidate
    return None


def load_diffusion_model(source: str | os.PathLike, *, dtype=None, device: str | None = None,
                         vae: str | os.PathLike | None = None, attention: str = "auto",
                         config_dir: str | os.PathLike | None = None, unet_dtype=None,
                         vae_near_checkpoint: bool = True, variant: str | None = None,
                         use_safetensors: bool | None = None, local_files_only: bool = False,
                         revision: str | None = None) -> DiffusionModel:
    """Load SD 1.x / 2.x / SDXL base from `source` and report which family it is.

    `source` is a local diffusers folder, a single `.safetensors`/`.ckpt` file (original LDM/SGM
    layout, as shared on Civitai), or a Hugging Face id (`org/name`, `org/name@revision`), which is looked up in
    the hub cache and respects `HF_HUB_OFFLINE`. `vae` optionally overrides the model's VAE with a
    diffusers VAE folder or a single-file VAE. Without `vae`, a single file's VAE is A1111's "Automatic"
    one: `<name>.vae.safetensors` (or `.vae.pt`, `.vae.ckpt`) next to `<name>.safetensors` when there is
    one (`find_vae_near_checkpoint`), else the checkpoint's own; `vae_near_checkpoint=False` always
    keeps the checkpoint's own (A1111's "None"). `extras["vae_name"]` is the VAE file's name with its
    extension, as A1111 writes the infotext's `VAE:`; `vae=` and `vae_near_checkpoint=False` are recorded as the
    VAE chosen for every checkpoint (`VAE_SETTING_KEY`: a refiner decodes with it too, as with A1111's `sd_vae`).
    `config_dir` (single files only) is a diffusers folder whose configs replace the shipped SD 1.x/2.x/XL ones (see
    `load_single_file`).

    `attention="auto"` routes the UNet's, VAE's and text encoders' attention through
    `mixkit.attention` (kernel chosen per call site, switchable with `set_attention_backend`);
    `attention="diffusers"` keeps diffusers'/transformers' own processors. What was switched is
    kept in `extras["attention"]`.

    A hub id downloads only what loads (`hub_files`: the components model_index.json names that mixkit reads,
    safetensors before .bin, variant files only for `variant`), as diffusers' `DiffusionPipeline.download`.
    diffusers' loading options mean what they mean there: `variant` ("fp16") loads a folder's `*.fp16.*` weights
    (components without them load their plain ones; a variant no component has is an error, as there);
    `use_safetensors=True` refuses .bin-only components; `local_files_only=True` uses the hub cache only;
    `revision` is the hub id's `@revision`. `dtype`/`unet_dtype` are torch.float32 (default), torch.float16 or
    torch.bfloat16, or their names; `device` must exist on this machine. All options are checked before anything
    is read or downloaded.

    `unet_dtype` (default: `dtype`) loads the UNet in another dtype than the text encoders and VAE (the
    fast preset's bfloat16 UNet next to float32 ones), so the UNet is never held in float32 first.

    Loading aims at one copy of the weights in memory: single files are read memory-mapped
    (safetensors) into modules built on the meta device and assigned in place; diffusers folders
    load with `low_cpu_mem_usage=True` (meta init, no random-init copy); `benchmarks/load_memory.py`
    measures the peak against a naive load.
    """
    from mixkit.attention.install import check_attention_mode, install_attention

    # 1. Every option checked before anything is read or downloaded
    check_attention_mode(attention)
    if not isinstance(vae_near_checkpoint, bool):
        raise TypeError(f"vae_near_checkpoint must be True or False, got {vae_near_checkpoint!r}")
    if not isinstance(local_files_only, bool):
        raise TypeError(f"local_files_only must be True or False, got {local_files_only!r}")
    dtype = check_load_dtype("float32" if dtype is None else dtype, "dtype")
    unet_dtype = check_load_dtype(unet_dtype, "unet_dtype") if unet_dtype is not None else None
    device = check_device(device)
    choice = {"variant": check_variant(variant), "use_safetensors": check_use_safetensors(use_safetensors)}
    source = with_revision(source, revision)

    # 2. Resolve and load
    path = _resolve(source, pipeline_file_selector(**choice), local_files_only=local_files_only)
    hub_name = _hub_repo_name(source)
    if config_dir is not None and not path.is_file():
        raise ValueError(f"config_dir={str(config_dir)!r} only applies to single-file checkpoints; {path} is a folder "
                         "with its own configs: drop config_dir")
    if path.is_file():
        from mixkit.models.diffusion.single_file import load_single_file

        if choice["variant"] is not None or choice["use_safetensors"]:
            raise ValueError(f"variant/use_safetensors choose among a diffusers folder's weight files; {path} is a "
                             "single-file checkpoint, which loads as it is: drop them")
        model = load_single_file(path, torch_dtype=dtype, config_dir=config_dir, unet_dtype=unet_dtype)
    else:
        model = load_diffusers_folder(path, str(source), dtype, unet_dtype or dtype, **choice)
    if hub_name is not None:
        model.name = hub_name  # the infotext's "Model:", not the snapshot folder's commit hash
    if vae is not None:
        model.extras[VAE_SETTING_KEY] = Path(str(vae)).name
    elif not vae_near_checkpoint:
        model.extras[VAE_SETTING_KEY] = BUILT_IN_VAE
    if vae is None and vae_near_checkpoint and path.is_file():
        vae = find_vae_near_checkpoint(path)
        if vae is not None:
            logger.info("Using the VAE next to the checkpoint (A1111's Automatic): %s", vae)
    if vae is not None:
        model.vae = load_vae(vae, dtype=dtype, like=model.vae.config)
        model.extras["vae_name"] = Path(str(vae)).name  # A1111: os.path.basename of the loaded VAE file
        if Path(str(vae)).is_file():
            from mixkit.io.hashing import a1111_model_hash

            model.extras["vae_hash"] = a1111_model_hash(vae)
    if device is not None:
        move_model(model, device)
    check_finite_weights(model)
    parts = [("unet", model.unet), ("vae", model.vae)]
    parts += [(f"text_encoder{'_' + str(i + 1) if i else ''}", e) for i, e in enumerate(model.text_encoders)]
    model.extras["attention"] = install_attention(parts, attention).summary()
    logger.info("Loaded %s from %s", model.description, source)
    return model


def move_model(model: DiffusionModel, device) -> None:
    for module in [model.unet, model.vae, *model.text_encoders]:
        module.to(device)


def load_vae(source: str | os.PathLike, *, dtype=None, like=None):
    """A VAE from a diffusers VAE folder (with or without a `vae/` subfolder) or a single file.

    A single file does not record its latent scaling factor (SD 1.x 0.18215, SDXL 0.13025), so
    `like` (the config of the VAE it replaces) supplies the architecture and scaling.
    """
    from diffusers import AutoencoderKL

    dtype = check_load_dtype("float32" if dtype is None else dtype, "dtype")
    path = _resolve(source, vae_file_selector())
    if path.is_file():
        from mixkit.models.diffusion.single_file import load_single_file_vae

        return load_single_file_vae(path, torch_dtype=dtype, vae_config=dict(like) if like is not None else None)
    subfolder = "vae" if (path / "vae" / "config.json").is_file() else None
    if not (path / (subfolder or "") / "config.json").is_file():
        raise ModelNotFoundError(f"{path} is not a VAE folder: it has no config.json (nor vae/config.json).")
    folder = path / (subfolder or "")
    read_json(folder / "config.json", "the VAE config")
    from mixkit.models.diffusion.diffusers_folder import DIFFUSERS_WEIGHTS, component_weights

    variant, files = component_weights(folder, DIFFUSERS_WEIGHTS)
    check_weight_files(files)
    try:
        return AutoencoderKL.from_pretrained(path, subfolder=subfolder, torch_dtype=dtype, variant=variant).eval()
    except Exception as error:  # diffusers' own errors name neither the file nor the fix
        raise CheckpointFormatError(f"VAE folder {folder} could not be loaded ({type(error).__name__}: "
                                    f"{str(error).splitlines()[0][:300] if str(error) else ''}); re-download it.") from None


def with_revision(source, revision: str | None):
    """`source` with diffusers' `revision=` folded into mixkit's hub id spelling `org/name@revision`.

    Only a hub id has revisions; one that already names a different revision after '@' is a contradiction.
    """
    if revision is None:
        return source
    from mixkit.io.sources import HUB_ID_PATTERN, parse_hub_id

    if not isinstance(revision, str) or not HUB_ID_PATTERN.match(f"a/b@{revision}"):
        raise ValueError(f"revision={revision!r} is not a branch, tag or commit name; pass e.g. revision='main'")
    parsed = None if _is_local(source) else parse_hub_id(str(source))
    if parsed is None:
        raise ValueError(f"revision={revision!r} applies to Hugging Face ids ('org/name'); {str(source)!r} is a local "
                         "path or no hub id: drop revision")
    repo, named = parsed
    if named is not None and named != revision:
        raise ValueError(f"{str(source)!r} names revision {named!r} but revision={revision!r} was passed; pass one")
    return f"{repo}@{revision}"


def _is_local(source) -> bool:
    from mixkit.io.sources import shipped_tiny_model

    return (isinstance(source, Path) or Path(str(source)).expanduser().exists()
            or shipped_tiny_model(str(source)) is not None)


def _resolve(source: str | os.PathLike, select_files, local_files_only: bool = False) -> Path:
    """A local path for `source`; a hub id downloads only the files `select_files` picks from its listing."""
    if not isinstance(source, (str, os.PathLike)) or not str(source).strip():
        raise ValueError(f"A model source must be a path or a Hugging Face id, got {source!r}.")
    path = Path(source).expanduser()
    if path.exists():
        return path
    from mixkit.io.sources import resolve_model_source

    return resolve_model_source(source, select_files=select_files, local_files_only=local_files_only)


def _hub_repo_name(source) -> str | None:
    """"name" for a hub id "org/name[@rev]" that is not a local path: what A1111-style infotexts call the model."""
    if isinstance(source, Path) or Path(str(source)).expanduser().exists():
        return None
    from mixkit.io.sources import parse_hub_id, shipped_tiny_model

    if shipped_tiny_model(str(source)) is not None:
        return None
    parsed = parse_hub_id(str(source))
    return parsed[0].split("/")[-1] if parsed else None


def load_first_tokenizer(source: str | os.PathLike):
    """The first text encoder's tokenizer of a local model, read without its weights, or None when that is not cheap.

    For checks that must agree with the model's tokenization before the heavy load (a textual-inversion token string
    in the captions). A diffusers folder's own `tokenizer/`; a single file's is the shipped CLIP vocabulary, as
    `load_single_file` builds it; a hub id, a folder without `tokenizer/` or a path that is not there gives None, and
    the caller uses the loaded model's (the load names what is wrong with the source).
    """
    from mixkit.io.sources import shipped_tiny_model

    path = shipped_tiny_model(str(source)) or Path(source).expanduser()
    if path.is_file():
        from mixkit.models.diffusion.single_file_tokenizer import load_clip_tokenizer

        return load_clip_tokenizer()
    folder = path / "tokenizer"
    if not ((folder / "tokenizer.json").is_file() or (folder / "vocab.json").is_file()):
        return None
    from transformers import CLIPTokenizer

    try:
        return CLIPTokenizer.from_pretrained(folder)
    except Exception:  # noqa: BLE001 - an unreadable tokenizer: the full load refuses it with its own message
        return None


def check_finite_weights(model: DiffusionModel) -> None:
    """Refuse a model with NaN/inf weights, naming the component and a tensor.

    Such a checkpoint (a bad merge, an fp16 overflow while converting) generates all-black images
    without any error. One `aminmax` per tensor propagates NaN and shows inf and reads each weight once:
    measured on one CPU core, 0.63 s for SD 1.5's fp16 UNet (860M values, 1.7 GB), against several seconds
    to read and convert the file; `isfinite().all()` takes about 20x as long (1.6 s per 100M values). On a
    GPU (`device=`) it runs after the move and costs milliseconds; the tiny test models take ~10-50 ms.
    """
    from mixkit.io.tensor_checks import first_non_finite

    parts = [("UNet", model.unet), ("VAE", model.vae)]
    parts += [(f"text encoder {i + 1}" if len(model.text_encoders) > 1 else "text encoder", e)
              for i, e in enumerate(model.text_encoders)]
    for what, module in parts:
        name = first_non_finite(module.state_dict())
        if name is not None:
            raise CheckpointFormatError(
                f"{model.source}: the {what} weight {name!r} contains NaN or infinite values; the checkpoint is "
                "broken (a failed merge or an fp16 overflow while converting) and would generate black images. "
                "Re-download it or use another version of the model."
            )
