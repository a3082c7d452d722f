"""Load the parts the vision-language trainers start from, by path, with errors that say which setting to fix.

A tokenizer is a transformers tokenizer folder; a vision encoder is either a mixkit modular
folder (mixkit_vlm.json: its vision encoder is taken) or a transformers vision folder whose
config.json has a `model_type` in `VISION_TOWERS` (CLIP, SigLIP, BLIP-2 or InstructBLIP vision),
or a full CLIP / BLIP-2 folder, whose vision half is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

from torch import nn

# Full models whose vision half loads with the matching vision class (weights under vision_model.*).
_FULL_MODEL_VISION = {"clip": "CLIPVisionModel", "siglip": "SiglipVisionModel"}


def tokenizer_folder(explicit: str | None, model_folder: str | None, setting: str = "tokenizer") -> Path:
    """`explicit` if given, else `<model_folder>/tokenizer` (where mixkit saves a model's tokenizer)."""
    if explicit:
        path = Path(explicit)
        if not path.is_dir():
            raise FileNotFoundError(f"{setting} {explicit!r} is not a folder; pass a transformers tokenizer folder.")
        return path
    if model_folder and (Path(model_folder) / "tokenizer").is_dir():
        return Path(model_folder) / "tokenizer"
    raise ValueError(f"no tokenizer: {model_folder!r} has no tokenizer/ subfolder; set {setting}=<tokenizer folder> "
                     "(the language model's transformers tokenizer).")


def load_tokenizer(folder: Path, setting: str = "tokenizer"):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as error:
        raise ValueError(f"{setting} {str(folder)!r} is not a loadable transformers tokenizer folder ({error}).") from None


def load_vision_encoder(path: str, setting: str = "vision_model") -> nn.Module:
    """A frozen-ready vision tower from a modular folder or a transformers folder (see module docstring)."""
    import transformers

    from mixkit.models.vlm.modular.model import CONFIG_NAME, VISION_TOWERS, VisionLanguageModel

    folder = Path(path)
    if (folder / CONFIG_NAME).is_file():
        return VisionLanguageModel.from_pretrained(folder).vision_encoder
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{setting} {path!r} has neither {CONFIG_NAME} (mixkit modular model) nor config.json "
                                "(transformers vision model); pass one of those folders.")
    model_type = json.loads(config_file.read_text(encoding="utf-8")).get("model_type")
    if model_type in _FULL_MODEL_VISION:
        class_name = _FULL_MODEL_VISION[model_type]
    elif model_type in VISION_TOWERS.names():
        class_name = VISION_TOWERS.get(model_type)
    else:
        valid = sorted([*VISION_TOWERS.names(), *_FULL_MODEL_VISION])
        raise ValueError(f"{setting} {path!r} has model_type {model_type!r}; supported vision models: {valid}.")
    return getattr(transformers, class_name).from_pretrained(folder)


def vision_image_size(vision_encoder: nn.Module, setting: str = "vision model") -> int:
    size = getattr(getattr(vision_encoder, "config", None), "image_size", None)
    if not isinstance(size, int) or size <= 0:
        raise ValueError(f"the {setting} has no config.image_size; set image_size in the training config.")
    return size


def task_config_for(model_folder: str | None, vision_encoder: nn.Module):
    """Pixel statistics and prompts of a modular folder (its config.json), else defaults for the vision tower.

    Training preprocesses images with the statistics inference will use, so the saved folder's
    `config.json` (written by `save_modular_vlm`) is read when it is there.
    """
    from mixkit.models.vlm.modular.task_config import MODULAR_MODEL_TYPE, TASK_CONFIG_NAME, ModularTaskConfig

    if model_folder:
        path = Path(model_folder) / TASK_CONFIG_NAME
        if path.is_file() and json.loads(path.read_text(encoding="utf-8")).get("model_type") == MODULAR_MODEL_TYPE:
            return ModularTaskConfig.from_file(path)
    return ModularTaskConfig(image_size=vision_image_size(vision_encoder))
