"""Which files of a Hugging Face diffusers repo mixkit downloads: the ones it loads, nothing else.

A hub repo such as `runwayml/stable-diffusion-v1-5` holds, next to the pipeline mixkit loads, 4-7 GB
single-file checkpoints, `.fp16` and non-EMA variants, `.bin` duplicates of every `.safetensors` file,
flax/ONNX exports and a safety checker: tens of GB a whole-repo snapshot would fetch. diffusers'
`DiffusionPipeline.download` fetches only the component folders named in `model_index.json`, safetensors
before `.bin`, variant files only when `variant=` asks for them. This module applies the same rule, using
`choose_weight_files` (the rule the folder loader applies) so that what is downloaded is exactly what loads.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Callable

from mixkit.errors import ModelNotFoundError
from mixkit.models.diffusion.diffusers_folder import (
    DIFFUSERS_WEIGHTS, TRANSFORMERS_WEIGHTS, check_variant_found, choose_weight_files, weight_variants,
)
from mixkit.models.diffusion.recommended import RECOMMENDED_FILE

MODEL_INDEX = "model_index.json"
# The components `load_diffusers_folder` reads, with the weight-file stems of their library (None: no weights).
# Others a model_index.json may name (safety_checker, feature_extractor, image_encoder) are never loaded.
LOADED_COMPONENTS = {
    "unet": DIFFUSERS_WEIGHTS, "vae": DIFFUSERS_WEIGHTS,
    "text_encoder": TRANSFORMERS_WEIGHTS, "text_encoder_2": TRANSFORMERS_WEIGHTS,
    "tokenizer": None, "tokenizer_2": None, "scheduler": None,
}
TOP_LEVEL_FILES = (MODEL_INDEX, RECOMMENDED_FILE)


def pipeline_files(repo: str, filenames: list[str], model_index: dict, *, variant: str | None = None,
                   use_safetensors: bool | None = None) -> list[str]:
    """The repo paths among `filenames` (a repo listing) that `load_diffusers_folder` will read.

    `model_index.json` (and mixkit's recommended settings), then per loaded component named in `model_index`:
    a model's config.json and the weight files `choose_weight_files` picks for `variant`, a tokenizer's or
    scheduler's files.
    """
    if MODEL_INDEX not in filenames:
        raise ModelNotFoundError(
            f"the Hugging Face repo {repo!r} has no {MODEL_INDEX}, so it is not a diffusers pipeline; nothing was "
            "downloaded. If it holds a single-file checkpoint, download that file (`hf download "
            f"{repo} FILE.safetensors`) and pass its path."
        )
    components = components_to_download(model_index)
    weighted = [component for component in components if LOADED_COMPONENTS[component] is not None]
    variants = {component: weight_variants(_names_in(filenames, component), LOADED_COMPONENTS[component])
                for component in weighted}
    check_variant_found(variant, variants, repo)  # before anything is downloaded
    chosen = [name for name in TOP_LEVEL_FILES if name in filenames]
    for component in components:
        chosen += folder_files(repo, filenames, component, LOADED_COMPONENTS[component], variant, use_safetensors)
    return sorted(chosen)


def vae_files(repo: str, filenames: list[str]) -> list[str]:
    """The repo paths `load_vae` reads from a diffusers VAE repo: its `vae/` folder if it has one, else the root."""
    folder = "vae" if "vae/config.json" in filenames else ""
    if f"{folder}/config.json".lstrip("/") not in filenames:
        raise ModelNotFoundError(f"the Hugging Face repo {repo!r} has no config.json (nor vae/config.json), so it is "
                                 "not a diffusers VAE; nothing was downloaded. For a single-file VAE, download the "
                                 f"file (`hf download {repo} FILE.safetensors`) and pass its path.")
    return sorted(folder_files(repo, filenames, folder, DIFFUSERS_WEIGHTS, None, None))


def folder_files(repo: str, filenames: list[str], folder: str, stems: tuple[str, ...] | None,
                 variant: str | None, use_safetensors: bool | None) -> list[str]:
    """One folder's files (not its subfolders'): a model folder's config.json and the weights that load (as
    diffusers: no ONNX/OpenVINO/flax exports), every file of another folder (tokenizer, scheduler)."""
    names = _names_in(filenames, folder)
    prefix = f"{folder}/" if folder else ""
    if stems is None:
        return [prefix + name for name in names]
    _, weights = choose_weight_files(names, stems, f"{repo}/{folder}".rstrip("/"), variant, use_safetensors)
    return [prefix + name for name in ["config.json", *weights] if name in names]


def _names_in(filenames: list[str], folder: str) -> list[str]:
    """The names of the files directly in `folder` ("" for the root) among a repo's `filenames`."""
    return [PurePosixPath(path).name for path in filenames if PurePosixPath(path).parent.as_posix() == (folder or ".")]


def components_to_download(model_index: dict) -> list[str]:
    """The components mixkit loads that `model_index` names with a class (`[library, class]`, not `[null, null]`)."""
    def named(entry) -> bool:
        return isinstance(entry, (list, tuple)) and len(entry) == 2 and all(isinstance(part, str) for part in entry)

    return [name for name in LOADED_COMPONENTS if named(model_index.get(name))]


def pipeline_file_selector(variant: str | None = None, use_safetensors: bool | None = None) -> Callable:
    """What `resolve_model_source(select_files=...)` calls with a repo's listing: `pipeline_files` for `variant`."""
    def select(repo: str, filenames: list[str], read_json: Callable[[str], dict]) -> list[str]:
        index = read_json(MODEL_INDEX) if MODEL_INDEX in filenames else {}
        return pipeline_files(repo, filenames, index, variant=variant, use_safetensors=use_safetensors)

    return select


def vae_file_selector() -> Callable:
    """`resolve_model_source(select_files=...)` for a diffusers VAE repo: `vae_files`."""
    def select(repo: str, filenames: list[str], read_json: Callable[[str], dict]) -> list[str]:
        return vae_files(repo, filenames)

    return select
