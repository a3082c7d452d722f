"""Settings of a CLIP contrastive fine-tuning run, as a typed dataclass that round-trips to JSON."""

from __future__ import annotations

from dataclasses import dataclass

from mixkit.training.config_checks import (check_caption_files, check_int_in, check_mixed_precision,
                                           check_non_negative_numbers, check_positive_ints)
from mixkit.training.config_json import JsonConfig


@dataclass
class ClipTrainingConfig(JsonConfig):
    """`model` is a transformers CLIP folder (model + processor); `output` a folder written at the end."""

    model: str
    dataset: str
    output: str
    batch_size: int = 8
    max_steps: int = 100
    learning_rate: float = 1e-5
    weight_decay: float = 0.1
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
        check_positive_ints(self, ("batch_size", "max_steps"))
        if self.batch_size < 2:  # each pair's negatives are the batch's other pairs: one pair learns nothing
            raise ValueError(f"batch_size must be at least 2 for contrastive training (the other pairs of a batch "
                             f"are each pair's negatives), got {self.batch_size}")
        check_non_negative_numbers(self, ("learning_rate", "weight_decay"))
        if self.learning_rate == 0:
            raise ValueError("learning_rate must be > 0, got 0")
        check_mixed_precision(self)
        check_int_in(self, "checkpoint_every", 0, 10**9, "(0: only at stop_at_step)")
        check_int_in(self, "seed", 0, 2**63 - 1)
