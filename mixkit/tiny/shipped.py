"""Where the shipped mixkit-tiny weights live, by name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mixkit.errors import ModelNotFoundError
from mixkit.registry import Registry

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
# What the CLI, AppFlow and the web UI use when no model is given: offline, a few MB, trained here.
DEFAULT_TEXT_TO_IMAGE = "mixkit-tiny-sd"
DEFAULT_CAPTIONER = "mixkit-tiny-blip2"
DEFAULT_CLIP = "mixkit-tiny-clip"


@dataclass(frozen=True)
class ShippedModel:
    folder: str
    kind: str
    recipe: str  # the `mixkit train recipe <name>` that reproduces it


SHIPPED_MODELS: Registry[ShippedModel] = Registry("shipped tiny model")
SHIPPED_MODELS.register("mixkit-tiny-sd", ShippedModel("mixkit-tiny-sd", "text-to-image (Stable Diffusion 1.x layout, 64 px)", "tiny-sd"))
SHIPPED_MODELS.register("mixkit-tiny-clip", ShippedModel("mixkit-tiny-clip", "CLIP image-text model", "tiny-clip"))
SHIPPED_MODELS.register("mixkit-tiny-blip2", ShippedModel("mixkit-tiny-blip2", "captioning / VQA (modular BLIP-2)", "tiny-blip2"))


def shipped_model_path(name: str) -> Path:
    """The folder of a shipped tiny model; unknown names list the valid ones."""
    entry = SHIPPED_MODELS.get(name)
    folder = WEIGHTS_DIR / entry.folder
    if not folder.is_dir():
        raise ModelNotFoundError(
            f"The shipped model {name!r} is missing from {WEIGHTS_DIR}; reinstall mixkit, or rebuild it with "
            f"`mixkit train recipe {entry.recipe} --set output={folder}`.")
    return folder
