"""Settings of a BLIP-2 stage-2 run (bridge into a language model), as a typed dataclass that round-trips to JSON."""

from __future__ import annotations

from dataclasses import dataclass

from mixkit.training.config_checks import (check_caption_files, check_mixed_precision, check_non_negative_numbers,
                                           check_positive_ints)
from mixkit.training.config_json import JsonConfig
from mixkit.training.lr_schedules import LR_SCHEDULES

# BLIP-2's prompt for VQA fine-tuning and zero-shot VQA (OPT models); "" is its captioning prompt.
BLIP2_VQA_PROMPT = "Question: {} Short answer:"


def check_prompt(name: str, value) -> None:
    if not isinstance(value, str) or value.count("{}") > 1:
        raise ValueError(f"{name} must be a string with at most one '{{}}' (the question's place), got {value!r}; "
                         f"e.g. {BLIP2_VQA_PROMPT!r}")


def check_language_modelling(config) -> None:
    """Rules the image-to-text trainers share: sizes, rates, precision, checkpoints."""
    check_positive_ints(config, ("batch_size", "max_steps", "max_text_length"))
    check_non_negative_numbers(config, ("learning_rate", "weight_decay"))
    if config.learning_rate == 0:
        raise ValueError("learning_rate must be > 0, got 0")
    check_mixed_precision(config)
    LR_SCHEDULES.get(config.lr_schedule)
    for name in ("checkpoint_every", "warmup_steps"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")


@dataclass
class Blip2Stage2Config(JsonConfig):
    """`model`: a folder saved by `VisionLanguageModel.save_pretrained`; `output`: a new folder of the same kind.

    `tokenizer` defaults to `<model>/tokenizer`. `qformer_from` takes the Q-Former and queries of a
    `blip2-stage1` output (the paper's stage 1 -> stage 2 hand-over). `prompt` is prepended and not
    supervised; `{}` in it is filled with the question of VQA samples (JSONL `question`/`answer`).
    `caption_prompt` (when set) is the prompt of caption samples, so one dataset can mix captions
    and VQA lines, as a model that should both caption and answer needs.
    """

    model: str
    dataset: str
    output: str
    tokenizer: str | None = None
    qformer_from: str | None = None
    prompt: str = ""
    caption_prompt: str | None = None
    train_language_model: bool = False
    # The paper keeps the image encoder frozen (it is a large pre-trained ViT); a small tower trained
    # here contrastively can learn from the captions what contrast never asked of it (where things are).
    train_vision_encoder: bool = False
    vision_learning_rate: float = 1e-5  # the tower's rate when train_vision_encoder is on
    max_text_length: int = 32
    batch_size: int = 8
    max_steps: int = 100
    learning_rate: float = 1e-4
    weight_decay: float = 0.05
    warmup_steps: int = 0
    lr_schedule: str = "constant"  # after warm-up: "constant", "cosine" or "linear" (LAVIS's linear_warmup_cosine_lr)
    seed: int = 0
    missing_captions: str = "folder_name"
    # kohya's caption_extension: `photo.png` is captioned by `photo<caption_extension>` (kohya's default: .caption)
    caption_extension: str = ".txt"
    mixed_precision: str = "no"
    checkpoint_every: int = 0
    checkpoint_dir: str | None = None
    resume_from: str | None = None

    def check(self) -> None:
        """Raise ValueError naming the first setting out of range."""
        check_caption_files(self)
        check_language_modelling(self)
        check_prompt("prompt", self.prompt)
        if self.caption_prompt is not None:
            check_prompt("caption_prompt", self.caption_prompt)
            if "{}" in self.caption_prompt:
                raise ValueError(f"caption_prompt must not contain '{{}}' (captions have no question), got {self.caption_prompt!r}")
        check_non_negative_numbers(self, ("vision_learning_rate",))
        for name in ("train_language_model", "train_vision_encoder"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
