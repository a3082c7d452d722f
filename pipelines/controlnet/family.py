"""Which model family a ControlNet or a checkpoint belongs to, read from its config or its tensor names and shapes.

A ControlNet only fits the UNet family it was trained with: its cross-attention layers take that family's text
embeddings (768 wide for SD 1.x, 1024 for SD 2.x, 2048 for SDXL, 1280 for the SDXL refiner) and an SDXL one also
takes SDXL's added pooled-text and size embedding. Both can be read without loading any weights: from a diffusers
config, or from a single file's tensor shapes (a safetensors header; `attn2.to_k` is the first cross-attention
projection, whose input width is the text width; `label_emb` / `add_embedding` is SDXL's added embedding). The
web server reads them before it queues a job, so a ControlNet of the wrong family is refused at once with both
families named, instead of failing inside the job (`webui.controlnet_models`, `webui.server_state`).

A pickled single file (`.ckpt`, `.pt`, `.pth`) has no header: `mixkit.io.checkpoint_shapes` unpickles it onto the
meta device with mixkit's one safe reader (the globals scan, then `torch.load(weights_only=True)`), so tensors keep
their shapes and no storage is kept. A zip archive (torch >= 1.6) is read through its small `data.pkl` only; a legacy
(pre-zip) stream, which old ControlNet `.pth` releases use, is walked to its end, holding at most one tensor's bytes
at a time, so it is checked too rather than left to the job.
A Hugging Face id is read from the hub cache only (its config.json or unet/config.json): a check made before a job is
queued never downloads; a model not in the cache is left to the check made when it loads.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

# Known text widths without / with SDXL's added embedding -> the family's name.
KNOWN_FAMILIES = {(768, False): "SD 1.x", (1024, False): "SD 2.x", (2048, True): "SDXL", (1280, True): "SDXL refiner"}
CROSS_ATTENTION_KEY = "attn2.to_k.weight"  # the same name in the diffusers and the original (ldm) layouts
ADDED_EMBEDDING_KEYS = ("label_emb.", "add_embedding.")  # ldm / diffusers names of SDXL's added embedding


@dataclass(frozen=True)
class ModelFamily:
    """A UNet family as a ControlNet sees it: the text width its cross-attention takes, and SDXL's added embedding."""

    cross_attention_dim: int
    added_embedding: bool

    @property
    def label(self) -> str:
        known = KNOWN_FAMILIES.get((self.cross_attention_dim, self.added_embedding))
        if known:
            return known
        kind = "SDXL-like" if self.added_embedding else "SD-like"
        return f"{kind} (cross-attention width {self.cross_attention_dim})"


def family_of_config(config: Any) -> ModelFamily:
    """The family of a diffusers UNet or ControlNet config (an object with attributes, or a dict)."""
    get = config.get if isinstance(config, Mapping) else lambda name, default=None: getattr(config, name, default)
    stated = width = get("cross_attention_dim")
    if isinstance(width, (list, tuple)) and width:  # a per-block width; the families here use one width throughout
        width = width[0]
    # a config.json is text anyone can write (a hub cache, a models folder): a width that is no positive whole
    # number is the file's fault and must say so, not surface as an IndexError or OverflowError
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"a config whose cross_attention_dim is {stated!r}, not a positive whole number (or a list "
                         "of them); the model's config.json is broken")
    return ModelFamily(width, get("addition_embed_type") is not None)


def family_of_shapes(shapes: Mapping[str, Any]) -> ModelFamily | None:
    """The family of a state dict given as tensor name -> shape (either layout); None if it has no cross-attention
    (not a UNet or ControlNet this can tell)."""
    widths = [shape for name, shape in sorted(shapes.items()) if name.endswith(CROSS_ATTENTION_KEY)]
    if not widths or len(widths[0]) != 2:
        return None
    added = any(part in name for name in shapes for part in ADDED_EMBEDDING_KEYS)
    return ModelFamily(int(widths[0][1]), added)


def read_family(source: str | Path) -> ModelFamily | None:
    """The family of a ControlNet or checkpoint without loading its weights: a diffusers folder's config (a
    ControlNet's config.json, or a pipeline's unet/config.json), a single file's tensor shapes (a safetensors header,
    or a pickle's shapes read onto the meta device: `mixkit.io.checkpoint_shapes`, zip and legacy pickles alike), or
    a Hugging Face id's config in the hub cache. None when the source holds none of these or names no
    cross-attention; ValueError/OSError for a file that cannot be read (an unsafe pickle is refused, never run)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return _family_of_configs(lambda name: path / name if (path / name).is_file() else None)
    if not path.is_file():
        return None if isinstance(source, Path) else _hub_cache_family(str(source))
    from mixkit.io.key_shapes import checkpoint_shapes

    return family_of_shapes(checkpoint_shapes(path))


# Where a diffusers ControlNet (config.json) or pipeline (unet/config.json) states its UNet's config.
CONFIG_FILES = ("config.json", "unet/config.json")


def _family_of_configs(find: Callable[[str], Path | None]) -> ModelFamily | None:
    """The family of the first of CONFIG_FILES `find` returns a file for that states a cross-attention width."""
    for name in CONFIG_FILES:
        config = find(name)
        if config is not None:
            try:
                values = json.loads(Path(config).read_text(encoding="utf-8"))
                if isinstance(values, dict) and values.get("cross_attention_dim") is not None:
                    return family_of_config(values)
            except ValueError as error:  # bad JSON (JSONDecodeError, UnicodeDecodeError) or a bad width
                raise ValueError(f"{str(config)!r}: {error}") from None
    return None


def _hub_cache_family(source: str) -> ModelFamily | None:
    """The family of a Hugging Face id ("org/name" or "org/name@revision") from its configs in the hub cache (the
    HF_HUB_CACHE folder, as `mixkit.io.sources` downloads to); None, without any network request, when they are
    not cached or `source` is no hub id."""
    from mixkit.io.sources import parse_hub_id

    hub_id = parse_hub_id(source)
    if hub_id is None:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    repo_id, revision = hub_id
    cache_dir = os.environ.get("HF_HUB_CACHE") or None

    def cached(name: str) -> Path | None:
        found = try_to_load_from_cache(repo_id, name, cache_dir=cache_dir, revision=revision)
        return Path(found) if isinstance(found, str) else None  # None / _CACHED_NO_EXIST: not in the cache

    return _family_of_configs(cached)


def check_same_family(label: str, name: str, controlnet: ModelFamily, model: ModelFamily, model_name: str) -> None:
    """ValueError naming the unit, the ControlNet and both families when the ControlNet is for another family."""
    if controlnet == model:
        return
    raise ValueError(
        f"{label}: ControlNet {name!r} is made for {controlnet.label} models, but the checkpoint {model_name!r} is "
        f"{model.label}; pick a ControlNet made for {model.label} models, or switch to a checkpoint of the "
        f"{controlnet.label} family.")
