"""What a saved modular VLM needs beyond its weights to caption and answer: pixels and prompts.

It is written as the folder's `config.json` with `model_type` "mixkit-vlm", so `load_vlm` and any
tool that identifies models by `config.json` (AppFlow's model-kind check) recognise the folder;
the architecture itself stays in `mixkit_vlm.json` next to it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from mixkit.models.vlm.templates import BLIP2_QUESTION_FORMAT, check_template

MODULAR_MODEL_TYPE = "mixkit-vlm"
TASK_CONFIG_NAME = "config.json"
TOKENIZER_FOLDER = "tokenizer"
QFORMER_TOKENIZER_FOLDER = "qformer_tokenizer"

CLIP_IMAGE_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_IMAGE_STD = (0.26862954, 0.26130258, 0.27577711)
"""OpenAI CLIP's pixel statistics, which BLIP-2 and LLaVA reuse with their CLIP / EVA towers."""


@dataclass(frozen=True)
class ModularTaskConfig:
    """Image preprocessing and prompt templates of a modular VLM, saved beside its weights."""

    image_size: int
    image_mean: tuple[float, float, float] = CLIP_IMAGE_MEAN
    image_std: tuple[float, float, float] = CLIP_IMAGE_STD
    caption_prompt: str = ""
    vqa_template: str = BLIP2_QUESTION_FORMAT

    def __post_init__(self) -> None:
        if isinstance(self.image_size, bool) or not isinstance(self.image_size, int) or not 1 <= self.image_size <= 4096:
            raise ValueError(f"image_size must be an int in [1, 4096] pixels, got {self.image_size!r}")
        for name in ("image_mean", "image_std"):
            value = getattr(self, name)
            try:
                numbers = tuple(float(v) for v in value)
            except (TypeError, ValueError):
                numbers = ()
            if len(numbers) != 3:
                raise ValueError(f"{name} must be 3 numbers (one per RGB channel), got {value!r}")
            if name == "image_std" and min(numbers) <= 0:
                raise ValueError(f"image_std must be positive (pixels are divided by it), got {value!r}")
            object.__setattr__(self, name, numbers)
        if not isinstance(self.caption_prompt, str):
            raise TypeError(f"caption_prompt must be a string, got {type(self.caption_prompt).__name__}")
        check_template(self.vqa_template)

    def to_json(self) -> str:
        return json.dumps({"model_type": MODULAR_MODEL_TYPE, **asdict(self)}, indent=2)

    @classmethod
    def from_file(cls, path: str | Path) -> "ModularTaskConfig":
        """Read a saved config.json; errors name the file, the key and what to do."""
        from mixkit.errors import CheckpointFormatError

        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise CheckpointFormatError(f"{str(path)!r} is not a readable JSON config ({error})") from None
        if data.get("model_type") != MODULAR_MODEL_TYPE:
            raise CheckpointFormatError(
                f"{str(path)!r} has model_type {data.get('model_type')!r}, not {MODULAR_MODEL_TYPE!r}; "
                "it was not written by save_modular_vlm"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - {"model_type"})
        if unknown:
            raise CheckpointFormatError(f"{str(path)!r} has unknown keys {unknown}; known: {sorted(known)}")
        if "image_size" not in data:
            raise CheckpointFormatError(f"{str(path)!r} lacks 'image_size'; save the folder again with save_modular_vlm")
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except (TypeError, ValueError) as error:
            raise CheckpointFormatError(f"{str(path)!r}: {error}") from None
