"""Settings of a textual-inversion run (a new word's input vectors for SD 1.x/2.x/SDXL), as a JSON-round-tripping
dataclass. The embedding's settings carry kohya's `train_textual_inversion.py` names, so its config files read as
they are; the rest (data, steps, optimizer, schedule, validation, caching, saving) are every SD trainer's
(`SDRunOptions`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mixkit.prompts.chunking import CHUNK_TOKENS
from mixkit.training.config_checks import check_bools, check_optional_strings
from mixkit.training.config_json import JsonConfig
from mixkit.training.kohya_export import SAVE_PRECISIONS
from mixkit.training.modelspec import METADATA_TEXTS
from mixkit.training.sd_run_options import SDRunOptions

EMBEDDING_SUFFIXES = (".safetensors", ".pt")


@dataclass
class SDTextualInversionConfig(SDRunOptions, JsonConfig):
    """Everything that decides the result of a run; a .safetensors output records it (`mixkit_training_config`).

    Generation uses an embedding by its file name, so `token_string` (the word the captions and sample prompts
    write) defaults to the output's file name; the written file is `output` (`.safetensors`, kohya's format, or
    `.pt`, A1111's).
    """

    model: str
    dataset: str
    output: str
    token_string: str | None = None
    num_vectors_per_token: int = 1
    # Start from this word's input vectors (kohya's --init_word, A1111's "Initialization text"); None: zero vectors.
    init_word: str | None = None
    # Start from an existing embedding file of this model family instead (kohya's --weights).
    weights: str | None = None
    # Train on kohya's templates instead of the captions ("a photo of a <token>" / "a painting in the style of
    # <token>"), or on an A1111 template file's lines ([name], [filewords]); without any, the captions must hold the
    # token string (e.g. through caption_prefix).
    use_object_template: bool = False
    use_style_template: bool = False
    template_file: str | None = None
    # Or one of A1111's template files by name (`ti_templates.NAMED_TEMPLATES`: "subject_filewords.txt", ...).
    template_name: str | None = None
    learning_rate: float = 5e-3  # A1111's default embedding rate
    mixed_precision: str = "auto"
    output_name: str | None = None  # names the sample images (kohya's output_name); default: the output's stem
    save_precision: str = "float"  # the file's tensors: "float" (float32), "fp16" or "bf16" (kohya's save_precision)
    # kohya's save_model_as, kept so its configs read as they are: it must agree with the output's suffix (kohya's
    # output_dir setting names the file with it).
    save_model_as: str | None = None
    metadata_title: str | None = None
    metadata_author: str | None = None
    metadata_description: str | None = None
    metadata_license: str | None = None
    metadata_tags: str | None = None

    def resolved_token_string(self) -> str:
        return self.token_string if self.token_string is not None else Path(self.output).stem

    def check(self) -> None:
        """Raise ValueError/TypeError naming the first setting out of range."""
        self.check_sd_training(positive_ints=("num_vectors_per_token",))
        if self.num_vectors_per_token > CHUNK_TOKENS:
            raise ValueError(f"num_vectors_per_token must be at most {CHUNK_TOKENS} (one prompt chunk holds "
                             f"{CHUNK_TOKENS} tokens), got {self.num_vectors_per_token}")
        token = self.resolved_token_string()
        if not isinstance(token, str) or not token.strip() or token != token.strip():
            raise ValueError(f"token_string must be a word without surrounding spaces, like 'sks_dog', got {token!r}")
        for name in ("init_word", "weights", "template_file", "template_name"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"{name} must be a non-blank string or None, got {value!r}")
        if self.init_word is not None and self.weights is not None:
            raise ValueError("init_word and weights both set the starting vectors; keep one")
        check_bools(self, ("use_object_template", "use_style_template"))
        chosen = [name for name in ("use_object_template", "use_style_template", "template_file", "template_name")
                  if getattr(self, name)]
        if len(chosen) > 1:
            raise ValueError(f"{' and '.join(chosen)} each choose the training captions; keep one")
        if self.template_name is not None:
            from mixkit.training.ti_templates import NAME, NAMED_TEMPLATES

            if not any(NAME in line for line in NAMED_TEMPLATES.get(self.template_name)):  # unknown: lists the names
                raise ValueError(f"template_name {self.template_name!r} has no {NAME} in its lines (it is for "
                                 "hypernetworks), so the embedding would appear in no caption and never train; pick "
                                 "subject.txt, subject_filewords.txt, style.txt or style_filewords.txt")
        SAVE_PRECISIONS.get(self.save_precision)
        if self.save_model_as is not None:
            suffix = Path(self.output).suffix.lower()
            if f".{self.save_model_as}" not in EMBEDDING_SUFFIXES or f".{self.save_model_as}" != suffix:
                raise ValueError(f"save_model_as {self.save_model_as!r} must be 'safetensors' or 'pt' and match the "
                                 f"output's suffix {suffix!r}; remove it or change output")
        check_optional_strings(self, (*METADATA_TEXTS, "output_name"))

    def caption_templates(self):
        """The run's `CaptionTemplates`, or None when it trains on the captions as they are."""
        from mixkit.training.ti_templates import (NAMED_TEMPLATES, OBJECT_TEMPLATES, STYLE_TEMPLATES,
                                                  CaptionTemplates, read_template_file)

        if self.use_object_template:
            lines = OBJECT_TEMPLATES
        elif self.use_style_template:
            lines = STYLE_TEMPLATES
        elif self.template_file:
            lines = read_template_file(self.template_file)
        elif self.template_name:
            lines = NAMED_TEMPLATES.get(self.template_name)
        else:
            return None
        return CaptionTemplates(lines, self.resolved_token_string())
