"""Settings of a MiniGPT-4 projection-training run, as a typed dataclass that round-trips to JSON."""

from __future__ import annotations

from dataclasses import dataclass

from mixkit.training.blip2_stage2_config import check_language_modelling
from mixkit.training.config_checks import check_caption_files
from mixkit.training.config_json import JsonConfig


@dataclass
class MiniGPT4Config(JsonConfig):
    """Either `blip2` (modular BLIP-2 folder: vision + Q-Former reused) and `language_model` (a
    transformers causal-LM folder, the chat LM), or `init_from` (a MiniGPT-4 folder this trainer
    wrote, to continue, e.g. the paper's second stage on curated descriptions). Only the linear layer
    is trained. `tokenizer` defaults to the LM folder (or `<init_from>/tokenizer`). A sample's
    question (JSONL `question`/`answer`) or else `instruction` fills the chat template; the target
    is followed by `end_text` so the model learns where an answer ends.
    """

    dataset: str
    output: str
    blip2: str | None = None
    language_model: str | None = None
    init_from: str | None = None
    tokenizer: str | None = None
    instruction: str = "Describe this image in detail."
    end_text: str = "###"
    max_text_length: int = 160
    batch_size: int = 12
    max_steps: int = 100
    learning_rate: float = 1e-4
    weight_decay: float = 0.05
    warmup_steps: int = 0
    lr_schedule: str = "constant"  # after warm-up: "constant", "cosine" or "linear" (MiniGPT-4's stage 1 uses cosine)
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
        if self.init_from and (self.blip2 or self.language_model):
            raise ValueError("set either init_from (continue a MiniGPT-4 folder) or blip2 + language_model, not both")
        if not self.init_from and not (self.blip2 and self.language_model):
            raise ValueError("minigpt4 needs blip2 (modular BLIP-2 folder) and language_model (causal LM folder), "
                             f"or init_from; got blip2={self.blip2!r}, language_model={self.language_model!r}")
        if not isinstance(self.instruction, str) or not self.instruction.strip():
            raise ValueError(f"instruction must be a non-empty string, got {self.instruction!r}")
        if not isinstance(self.end_text, str):
            raise ValueError(f"end_text must be a string (MiniGPT-4 uses '###'), got {self.end_text!r}")
