"""Finding and reading IP-Adapter weights and their CLIP image encoder, in the layouts users have.

h94/IP-Adapter ships one file per adapter (`models/ip-adapter_sd15.safetensors` or `.bin`) with its image encoder
in a sibling folder (`models/image_encoder`), which is diffusers' `load_ip_adapter(source, subfolder=..,
weight_name=.., image_encoder_folder="image_encoder")` layout; A1111's ControlNet extension users keep the single
file in `models/ControlNet`. Both are read here with diffusers' argument names. Pickled `.bin` files go through
mixkit's safe checkpoint reader (`mixkit.io.loading`), never a plain `torch.load`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mixkit.errors import CheckpointFormatError, ModelNotFoundError

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
# diffusers' default `image_encoder_folder`: the encoder beside the weights (h94's `models/image_encoder`)
DEFAULT_IMAGE_ENCODER_FOLDER = "image_encoder"


@dataclass(frozen=True)
class IPAdapterSource:
    """Where one IP-Adapter's weights and image encoder are, with diffusers' `load_ip_adapter` names.

    `source`: a weights file, a folder, or a hub id ("h94/IP-Adapter"); `subfolder` and `weight_name` pick the file
    inside a folder or repo; `image_encoder_folder`: a CLIP vision folder, a hub id, or (as diffusers) a folder name
    relative to `subfolder` of the source, by default `image_encoder` beside the weights. `unit`: how errors name the
    ControlNet unit the adapter came from ("controlnet unit 1"), None for the Python API's adapters; it takes no part
    in comparing sources.
    """

    source: str | os.PathLike
    subfolder: str | None = None
    weight_name: str | None = None
    image_encoder_folder: str | os.PathLike | None = DEFAULT_IMAGE_ENCODER_FOLDER
    unit: str | None = field(default=None, compare=False)

    @classmethod
    def of(cls, value: Any) -> "IPAdapterSource":
        """`value` as a source: an IPAdapterSource as is, a path or hub id string, or a dict of these fields."""
        if isinstance(value, cls):
            return value
        if isinstance(value, (str, os.PathLike)):
            return cls(value)
        if isinstance(value, dict):
            unknown = sorted(set(value) - {"source", "subfolder", "weight_name", "image_encoder_folder"})
            if unknown or "source" not in value:
                raise ValueError(f"an ip_adapter dict takes 'source' and optionally 'subfolder', 'weight_name', "
                                 f"'image_encoder_folder'; got keys {sorted(value)}.")
            return cls(**value)
        raise TypeError(f"ip_adapter must be a file, folder or hub id (str / path), an IPAdapterSource or a dict, "
                        f"got {type(value).__name__}: {value!r}.")

    @property
    def name(self) -> str:
        """The adapter's name for the infotext: its weight file's stem ("ip-adapter_sd15")."""
        return Path(self.weight_name or os.fspath(self.source)).stem.split("/")[-1]


def resolve_weight_file(source: IPAdapterSource, local_files_only: bool = False) -> Path:
    """The local weights file of `source` (a hub file is downloaded to the HF cache), or an error saying what to pass."""
    text = os.fspath(source.source)
    local = Path(text).expanduser()
    if local.is_file():
        if source.subfolder or source.weight_name:
            raise ValueError(f"ip_adapter {text!r} is a file; subfolder= and weight_name= choose a file inside a "
                             "folder or hub repo: drop them or pass the folder.")
        return _check_suffix(local)
    if local.is_dir():
        folder = local / source.subfolder if source.subfolder else local
        if source.weight_name:
            file = folder / source.weight_name
            if not file.is_file():
                raise ModelNotFoundError(f"IP-Adapter weights {str(file)!r} do not exist; check weight_name= and "
                                         f"subfolder= (files there: {_weight_files(folder) or 'none'}).")
            return _check_suffix(file)
        candidates = _weight_files(folder)
        if len(candidates) != 1:
            raise ValueError(f"IP-Adapter folder {str(folder)!r} holds {len(candidates)} weight files "
                             f"({candidates or 'none'}); name one with weight_name= (--ip-adapter FOLDER/FILE on the "
                             "command line).")
        return _check_suffix(folder / candidates[0])
    from mixkit.io.sources import parse_hub_id

    hub = parse_hub_id(text) if not isinstance(source.source, Path) else None
    if hub is None:
        raise ModelNotFoundError(f"IP-Adapter {text!r} does not exist; pass a .safetensors/.bin file, a folder, or a "
                                 "Hugging Face id with weight_name= (e.g. 'h94/IP-Adapter', subfolder='models', "
                                 "weight_name='ip-adapter_sd15.safetensors').")
    if not source.weight_name:
        raise ValueError(f"IP-Adapter hub id {text!r} needs weight_name= (and subfolder=), as diffusers' "
                         "load_ip_adapter does: e.g. subfolder='models', weight_name='ip-adapter_sd15.safetensors'.")
    return _check_suffix(_hub_file(hub, source, local_files_only))


def read_ip_adapter_weights(file: Path) -> dict[str, dict]:
    """{"image_proj": {...}, "ip_adapter": {...}}, as diffusers' `_load_ip_adapter_weights` takes it, from an
    h94-style single file: a `.bin` holding those two dicts, or a `.safetensors` with `image_proj.` / `ip_adapter.`
    key prefixes."""
    from mixkit.io.loading import read_checkpoint

    loaded = read_checkpoint(file)
    if isinstance(loaded, dict) and isinstance(loaded.get("image_proj"), dict) and isinstance(loaded.get("ip_adapter"), dict):
        return {"image_proj": dict(loaded["image_proj"]), "ip_adapter": dict(loaded["ip_adapter"])}
    state: dict[str, dict] = {"image_proj": {}, "ip_adapter": {}}
    for key, value in (loaded.items() if isinstance(loaded, dict) else ()):
        part, _, rest = str(key).partition(".")
        if part in state and rest:
            state[part][rest] = value
    if not state["image_proj"] or not state["ip_adapter"]:
        raise CheckpointFormatError(f"{str(file)!r} is not an IP-Adapter checkpoint: it has no 'image_proj' and "
                                    "'ip_adapter' weights (h94/IP-Adapter's layout). Is it a ControlNet or LoRA file?")
    return state


def resolve_image_encoder(source: IPAdapterSource, weight_file: Path, local_files_only: bool = False) -> Path:
    """The local CLIP vision folder of `source`: an existing folder as given; else, as diffusers, a folder name beside
    the weights (`subfolder`/`image_encoder_folder` of the source), or a hub id / repo path."""
    folder = source.image_encoder_folder
    if folder is None:
        raise ValueError("image_encoder_folder=None: an IP-Adapter needs a CLIP image encoder to turn the image "
                         "prompt into embeddings; pass its folder or hub id (--ip-adapter-image-encoder), or pass "
                         "precomputed ip_adapter_image_embeds instead of ip_adapter_image.")
    text = os.fspath(folder)
    given = Path(text).expanduser()
    beside = weight_file.parent / text  # h94: models/ip-adapter_sd15.safetensors + models/image_encoder
    # beside the weights first, as diffusers reads the name: an `image_encoder` folder in the working directory
    # must not stand in for the adapter's own
    for candidate in (beside, given) if not given.is_absolute() else (given,):
        if candidate.is_dir():
            return _check_encoder_folder(candidate)
    source_text = os.fspath(source.source)
    from mixkit.io.sources import parse_hub_id

    hub = None if Path(source_text).expanduser().exists() else parse_hub_id(source_text)
    if hub is not None:  # diffusers: a bare name lives in the adapter's subfolder, a path is from the repo's root
        repo_path = Path(source.subfolder or "", text).as_posix() if "/" not in text else text
        return _hub_folder(hub[0], hub[1], repo_path, local_files_only)
    own_hub = parse_hub_id(text) if "/" in text and not isinstance(folder, Path) else None
    if own_hub is not None:
        return _hub_folder(own_hub[0], own_hub[1], None, local_files_only)
    raise ModelNotFoundError(f"IP-Adapter image encoder {text!r} not found (looked for {str(given)!r} and "
                             f"{str(beside)!r}); pass the CLIP vision folder with image_encoder_folder= "
                             "(--ip-adapter-image-encoder), e.g. h94/IP-Adapter's models/image_encoder for SD 1.5 "
                             "adapters or sdxl_models/image_encoder for SDXL ones.")


def load_image_encoder(folder: Path, device, dtype):
    """The CLIPVisionModelWithProjection of `folder` with the image processor its config implies (size, mean, std)."""
    from transformers import CLIPImageProcessor, CLIPVisionModelWithProjection

    encoder = CLIPVisionModelWithProjection.from_pretrained(folder, local_files_only=True)
    encoder = encoder.to(device=device, dtype=dtype).eval()
    processor_config = folder / "preprocessor_config.json"
    if processor_config.is_file():
        processor = CLIPImageProcessor.from_pretrained(folder, local_files_only=True)
    else:  # diffusers' default CLIPImageProcessor(), sized to the encoder (h94's 224 px; a tiny test encoder's own)
        size = encoder.config.image_size
        processor = CLIPImageProcessor(size={"shortest_edge": size}, crop_size={"height": size, "width": size})
    return encoder, processor


def _check_suffix(file: Path) -> Path:
    if file.suffix.lower() not in WEIGHT_SUFFIXES:
        raise CheckpointFormatError(f"IP-Adapter weights {str(file)!r} must be a {', '.join(WEIGHT_SUFFIXES)} file "
                                    "(h94/IP-Adapter's ip-adapter_*.safetensors / .bin).")
    return file


def _check_encoder_folder(folder: Path) -> Path:
    if not (folder / "config.json").is_file():
        raise ModelNotFoundError(f"IP-Adapter image encoder folder {str(folder)!r} has no config.json; pass a "
                                 "transformers CLIPVisionModelWithProjection folder (h94/IP-Adapter's "
                                 "models/image_encoder).")
    return folder


def _weight_files(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix.lower() in WEIGHT_SUFFIXES)


def _hub_file(hub: tuple[str, str | None], source: IPAdapterSource, local_files_only: bool) -> Path:
    from huggingface_hub import hf_hub_download

    from mixkit.io.sources import is_hub_offline

    repo, revision = hub
    try:
        return Path(hf_hub_download(repo, source.weight_name, subfolder=source.subfolder, revision=revision,
                                    local_files_only=local_files_only or is_hub_offline()))
    except Exception as error:  # huggingface_hub's many error types: one message saying what to check
        raise ModelNotFoundError(f"IP-Adapter {repo}/{source.subfolder or ''}/{source.weight_name} could not be "
                                 f"fetched from the Hugging Face hub ({type(error).__name__}: {error}); check the "
                                 "id, subfolder= and weight_name=, or download the file and pass its path.") from error


def _hub_folder(repo: str, revision: str | None, repo_path: str | None, local_files_only: bool) -> Path:
    from huggingface_hub import snapshot_download

    from mixkit.io.sources import is_hub_offline

    patterns = None if repo_path is None else [f"{repo_path}/*"]
    try:
        root = Path(snapshot_download(repo, revision=revision, allow_patterns=patterns,
                                      local_files_only=local_files_only or is_hub_offline()))
    except Exception as error:
        raise ModelNotFoundError(f"IP-Adapter image encoder {repo}/{repo_path or ''} could not be fetched from the "
                                 f"Hugging Face hub ({type(error).__name__}: {error}); pass a local CLIP vision "
                                 "folder with image_encoder_folder=.") from error
    return _check_encoder_folder(root / repo_path if repo_path else root)
