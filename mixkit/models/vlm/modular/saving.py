"""`save_modular_vlm`: one folder with everything `load_vlm` needs to caption and answer.

    folder/
      config.json        model_type "mixkit-vlm", image size / mean / std, caption prompt, VQA template
      mixkit_vlm.json    the architecture (vision tower, bridge, LM configs)
      model.safetensors  the weights
      tokenizer/         the LM tokenizer (transformers `save_pretrained`)
      qformer_tokenizer/ only for instruction-aware Q-Formers (InstructBLIP)

The folder is written under a temporary name beside the target and renamed into place at the
end, so a crash or a bad argument never leaves a half-written model where a loader would find it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Sequence

from mixkit.models.vlm.modular.model import VisionLanguageModel
from mixkit.models.vlm.modular.task_config import (
    CLIP_IMAGE_MEAN,
    CLIP_IMAGE_STD,
    QFORMER_TOKENIZER_FOLDER,
    TASK_CONFIG_NAME,
    TOKENIZER_FOLDER,
    ModularTaskConfig,
)
from mixkit.models.vlm.templates import BLIP2_QUESTION_FORMAT


def _check_tokenizer(tokenizer: Any, name: str, vocab_rows: int | None) -> None:
    if not (callable(tokenizer) and hasattr(tokenizer, "save_pretrained") and hasattr(tokenizer, "batch_decode")):
        raise TypeError(f"{name} must be a transformers tokenizer (callable, with save_pretrained), "
                        f"got {type(tokenizer).__name__}")
    if vocab_rows is not None and len(tokenizer) > vocab_rows:
        raise ValueError(f"{name} has {len(tokenizer)} tokens but the model's embedding has only {vocab_rows} rows; "
                         "pass the tokenizer the model was trained with")


def _vocab_rows(module: Any) -> int | None:
    embedding = module.get_input_embeddings() if hasattr(module, "get_input_embeddings") else None
    return None if embedding is None else embedding.num_embeddings


def check_save_inputs(model: Any, tokenizer: Any, qformer_tokenizer: Any, image_size: int | None) -> int:
    """Validate the arguments of `save_modular_vlm`; returns the image size to save."""
    if not isinstance(model, VisionLanguageModel):
        raise TypeError(f"model must be a mixkit VisionLanguageModel, got {type(model).__name__}")
    _check_tokenizer(tokenizer, "tokenizer", _vocab_rows(model.language_model))
    if model.bridge.takes_instruction:
        if qformer_tokenizer is None:
            raise ValueError("this model's Q-Former reads the instruction (InstructBLIP): pass qformer_tokenizer=, "
                             "the tokenizer of the Q-Former's text input")
        _check_tokenizer(qformer_tokenizer, "qformer_tokenizer", model.bridge.config.qformer.text_vocab_size)
    elif qformer_tokenizer is not None:
        raise ValueError("qformer_tokenizer was given but this model's bridge does not read instructions; drop it")
    tower_size = getattr(model.vision_encoder.config, "image_size", None)
    if image_size is None:
        if tower_size is None:
            raise ValueError(f"{type(model.vision_encoder).__name__}'s config has no image_size; pass image_size=")
        return int(tower_size)
    if tower_size is not None and image_size != tower_size:
        raise ValueError(f"image_size={image_size!r} but the vision tower was built for {tower_size} px images; "
                         f"pass image_size={tower_size} or leave it out")
    return image_size


def save_modular_vlm(
    model: VisionLanguageModel,
    folder: str | os.PathLike,
    *,
    tokenizer: Any,
    image_size: int | None = None,
    image_mean: Sequence[float] = CLIP_IMAGE_MEAN,
    image_std: Sequence[float] = CLIP_IMAGE_STD,
    caption_prompt: str = "",
    vqa_template: str = BLIP2_QUESTION_FORMAT,
    qformer_tokenizer: Any = None,
    overwrite: bool = False,
) -> Path:
    """Save a modular VLM with its tokenizer, pixel statistics and prompts, loadable by `load_vlm`.

    `image_size` defaults to the vision tower's; prompts are tokenized at inference exactly as
    `tokenizer(text)` does (its own special tokens included), so train with the same convention.
    """
    size = check_save_inputs(model, tokenizer, qformer_tokenizer, image_size)
    task = ModularTaskConfig(image_size=size, image_mean=tuple(image_mean), image_std=tuple(image_std),
                             caption_prompt=caption_prompt, vqa_template=vqa_template)
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"{str(folder)!r} is a file; pass a folder path")
    if folder.is_dir() and any(folder.iterdir()) and not overwrite:
        raise FileExistsError(f"{str(folder)!r} exists and is not empty; pass overwrite=True to replace it")
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = folder.parent / f".{folder.name}.partial-{uuid.uuid4().hex[:8]}"
    try:
        model.save_pretrained(scratch)
        (scratch / TASK_CONFIG_NAME).write_text(task.to_json(), encoding="utf-8")
        tokenizer.save_pretrained(scratch / TOKENIZER_FOLDER)
        if qformer_tokenizer is not None:
            qformer_tokenizer.save_pretrained(scratch / QFORMER_TOKENIZER_FOLDER)
        _move_into_place(scratch, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder


def _move_into_place(scratch: Path, folder: Path) -> None:
    """Rename `scratch` to `folder`; an existing folder is set aside first and restored on failure."""
    if not folder.exists():
        os.replace(scratch, folder)
        return
    old = folder.parent / f".{folder.name}.old-{uuid.uuid4().hex[:8]}"
    os.replace(folder, old)
    try:
        os.replace(scratch, folder)
    except OSError:
        os.replace(old, folder)
        raise
    shutil.rmtree(old, ignore_errors=True)
