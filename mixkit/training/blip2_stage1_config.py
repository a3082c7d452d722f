"""Settings of a BLIP-2 stage-1 (Q-Former pre-training) run, as a typed dataclass that round-trips to JSON."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from mixkit.training.config_checks import (check_caption_files, check_mixed_precision, check_non_negative_numbers,
                                           check_positive_ints)
from mixkit.training.config_json import JsonConfig

# Derived from the vision encoder and the tokenizer, so not settable in `qformer`.
DERIVED_QFORMER_KEYS = ("encoder_hidden_size", "text_vocab_size")


@dataclass
class Blip2Stage1Config(JsonConfig):
    """`vision_model`: a modular folder or a transformers vision/CLIP folder (frozen); `tokenizer`: the
    Q-Former's text tokenizer (BLIP-2 uses BERT's); `qformer`: `QFormerConfig` sizes (hidden_size,
    num_hidden_layers, num_query_tokens ...). `output` receives the Q-Former and heads, which
    `blip2-stage2` reads with `qformer_from`. The Python API (`train_blip2_stage1`) takes the parts
    directly and needs only `dataset`.
    """

    dataset: str
    output: str | None = None
    vision_model: str | None = None
    tokenizer: str | None = None
    qformer: dict = field(default_factory=dict)
    embed_dim: int = 256
    max_text_length: int = 32
    image_size: int | None = None  # None: the vision encoder's config.image_size
    batch_size: int = 8
    max_steps: int = 100
    learning_rate: float = 1e-4
    weight_decay: float = 0.05
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
        from mixkit.models.vlm.modular.qformer import QFormerConfig

        check_positive_ints(self, ("batch_size", "max_steps", "embed_dim", "max_text_length"))
        if self.image_size is not None:
            check_positive_ints(self, ("image_size",))
        if self.batch_size < 2:
            raise ValueError(f"batch_size must be >= 2: ITC and ITM need in-batch negatives, got {self.batch_size}")
        check_non_negative_numbers(self, ("learning_rate", "weight_decay"))
        if self.learning_rate == 0:
            raise ValueError("learning_rate must be > 0, got 0")
        check_mixed_precision(self)
        if isinstance(self.checkpoint_every, bool) or not isinstance(self.checkpoint_every, int) or self.checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be an integer >= 0, got {self.checkpoint_every!r}")
        if not isinstance(self.qformer, dict):
            raise ValueError(f"qformer must be a JSON object of Q-Former sizes, got {self.qformer!r}")
        allowed = sorted(f.name for f in fields(QFormerConfig) if f.name not in DERIVED_QFORMER_KEYS)
        unknown = sorted(set(self.qformer) - set(allowed))
        if unknown:
            raise ValueError(f"qformer has unknown key(s) {unknown}; valid: {allowed} "
                             f"({', '.join(DERIVED_QFORMER_KEYS)} come from the vision model and tokenizer)")

    def check_paths(self) -> None:
        """What a config-driven run (`mixkit train blip2-stage1`) needs beyond `check`."""
        missing = [name for name in ("output", "vision_model", "tokenizer") if not getattr(self, name)]
        if missing:
            raise ValueError(f"blip2-stage1 needs {missing}: output (a new folder), vision_model (frozen image "
                             "encoder folder) and tokenizer (the Q-Former's text tokenizer folder).")
