"""The task API (caption, answer) for mixkit's own modular `VisionLanguageModel` folders.

A folder written by `save_modular_vlm` has `config.json` with model_type "mixkit-vlm"; `load_vlm`
finds this family through that type like any transformers family. The image embeddings go
before the prompt (BLIP-2's layout), or where the prompt holds the model's image token (LLaVA's
'USER: <image>\n... ASSISTANT:'). Decoder-only batches are padded on the left, seq2seq batches
on the right, and decoding is greedy by default, so a batch of N gives what N single calls give.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mixkit.models.vlm.family import VLM_FAMILIES
from mixkit.models.vlm.generative import GenerativeAdapter, pad_token_rows
from mixkit.models.vlm.modular.task_config import (
    MODULAR_MODEL_TYPE,
    QFORMER_TOKENIZER_FOLDER,
    TASK_CONFIG_NAME,
    TOKENIZER_FOLDER,
    ModularTaskConfig,
)


@dataclass
class ModularProcessor:
    """The non-weight half of a modular VLM folder: tokenizers and the task config."""

    tokenizer: Any
    task: ModularTaskConfig
    qformer_tokenizer: Any = None


def _load_tokenizer(folder: Path, name: str) -> Any:
    from transformers import AutoTokenizer

    from mixkit.errors import ModelNotFoundError

    path = folder / name
    if not path.is_dir():
        raise ModelNotFoundError(f"{str(folder)!r} has no {name}/ folder; save the model with save_modular_vlm(model, "
                                 f"folder, tokenizer=...) so the tokenizer travels with it")
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


@VLM_FAMILIES.register("modular")
class ModularVlmAdapter(GenerativeAdapter):
    """mixkit's `VisionLanguageModel` (any vision tower + bridge + LM) saved by `save_modular_vlm`."""

    family = "modular"
    model_types = (MODULAR_MODEL_TYPE,)

    def __init__(self, model: Any, processor: ModularProcessor, **kwargs: Any) -> None:
        super().__init__(model, processor, **kwargs)
        self._image_token_count: int | None = None
        self.caption_prompt = processor.task.caption_prompt
        self.question_format = processor.task.vqa_template

    @classmethod
    def from_folder(cls, folder: Path, *, source: str, device: torch.device, dtype: torch.dtype,
                    attn_implementation: str = "sdpa", **_: Any) -> "ModularVlmAdapter":
        from mixkit.models.vlm.modular.bridges import QFormerBridge
        from mixkit.models.vlm.modular.model import VisionLanguageModel

        task = ModularTaskConfig.from_file(folder / TASK_CONFIG_NAME)
        model = VisionLanguageModel.from_pretrained(folder)
        tokenizer = _load_tokenizer(folder, TOKENIZER_FOLDER)
        qformer_tokenizer = _load_tokenizer(folder, QFORMER_TOKENIZER_FOLDER) if model.bridge.takes_instruction else None
        model = model.set_attn_implementation(attn_implementation).to(device=device, dtype=dtype).eval()
        if dtype != torch.float32 and isinstance(model.bridge, QFormerBridge):
            model.bridge.keep_qformer_in_fp32()
        return cls(model, ModularProcessor(tokenizer, task, qformer_tokenizer), device=device, dtype=dtype,
                   source=source)

    @property
    def decoder_only(self) -> bool:
        return not self.model.language_model.config.is_encoder_decoder

    def _pad_id(self) -> int:
        tokenizer = self.processor.tokenizer
        for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id):
            if candidate is not None:
                return candidate
        return 0  # masked out anyway; the tokenizer simply has no padding token

    def _pixel_values(self, images: list) -> torch.Tensor:
        from mixkit.models.vlm.modular.image_processing import images_to_pixel_values

        task = self.processor.task
        pixels = images_to_pixel_values(images, task.image_size, task.image_mean, task.image_std)
        return pixels.to(self.device, self.dtype)

    @property
    def image_token_count(self) -> int:
        """How many LM positions one image fills (Q-Former queries, or MLP patch tokens), measured once."""
        if self._image_token_count is None:
            size = self.processor.task.image_size
            with torch.no_grad():
                probe = self.model.encode_images(torch.zeros(1, 3, size, size, device=self.device, dtype=self.dtype))
            self._image_token_count = probe.shape[1]
        return self._image_token_count

    def _expand_image_token(self, ids: list[int], prompt: str) -> list[int]:
        """A prompt holding the image token (LLaVA's 'USER: <image>\\n...') gets the image there, else in front.

        The one token becomes one placeholder per image embedding, as LLaVA's processor does.
        """
        image_token = self.model.image_token_index
        count = ids.count(image_token) if image_token is not None else 0
        if count == 0:
            return ids
        if count > 1:
            raise ValueError(f"prompt {prompt!r} holds the image token {count} times; one image per prompt, "
                             "so write it once (or leave it out to put the image before the text)")
        at = ids.index(image_token)
        return ids[:at] + [image_token] * self.image_token_count + ids[at + 1:]

    def _model_inputs(self, images: list, prompts: list[str]) -> dict:
        tokenizer = self.processor.tokenizer
        rows = [self._expand_image_token(tokenizer(prompt)["input_ids"], prompt) for prompt in prompts]
        if len({(self.model.image_token_index in row) for row in rows}) > 1:
            raise ValueError(f"either every prompt holds the image token or none does; got {prompts}")
        side = "left" if self.decoder_only else "right"
        input_ids, attention_mask = pad_token_rows(rows, self._pad_id(), side)
        inputs = {"pixel_values": self._pixel_values(images), "input_ids": input_ids.to(self.device),
                  "attention_mask": attention_mask.to(self.device)}
        if self.model.bridge.takes_instruction:
            limit = self.model.bridge.config.qformer.max_position_embeddings
            instruction = self.processor.qformer_tokenizer(prompts, padding=True, truncation=True, max_length=limit,
                                                           return_tensors="pt")
            inputs["instruction_ids"] = instruction["input_ids"].to(self.device)
            inputs["instruction_mask"] = instruction["attention_mask"].to(self.device)
        return inputs

    def generation_options(self, generation: dict) -> dict:
        """Caller's options over greedy defaults; the saved tokenizer's end and padding tokens."""
        tokenizer = self.processor.tokenizer
        options = dict(generation)
        if tokenizer.eos_token_id is not None:
            options.setdefault("eos_token_id", tokenizer.eos_token_id)
        options.setdefault("pad_token_id", self._pad_id())
        return options

    @torch.no_grad()
    def _generate_batch(self, images: list, prompts: list[str], options: dict) -> list[str]:
        # The modular model generates from embeddings, so decoder-only output holds only new tokens.
        output = self.model.generate(**self._model_inputs(images, prompts), **self.generation_options(options))
        return [text.strip() for text in self.processor.tokenizer.batch_decode(output, skip_special_tokens=True)]
