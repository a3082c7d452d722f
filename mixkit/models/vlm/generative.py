"""BLIP-2, InstructBLIP and LLaVA: image-conditioned text generation (captions, VQA).

Batches are padded the way each language model needs: decoder-only LMs (OPT, Vicuna, Llama) on
the left, so every row's last real token sits at the end where generation continues; encoder-
decoder LMs (Flan-T5) on the right, since their encoder attends bidirectionally under a mask.
Decoding is greedy by default so a batch of N gives what N single calls give. On CPU in fp32 the
large linears are routed through oneDNN for the few-row products of batched decoding
(`mixkit.runtime.cpu_linear`), which is where batching pays on a CPU.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from mixkit.models.vlm.family import GENERATIVE_TASKS, VLM_FAMILIES, VisionLanguageAdapter, check_texts
from mixkit.models.vlm.templates import BLIP2_QUESTION_FORMAT, LLAVA_CAPTION_PROMPT, LLAVA_CHAT_FORMAT
from mixkit.runtime.cpu_linear import onednn_small_batch_linears

DEFAULT_GENERATION = {"do_sample": False, "num_beams": 1}
DEFAULT_MAX_NEW_TOKENS = 20
_LENGTH_OPTIONS = ("max_length", "max_new_tokens")


def generation_options(user: dict) -> dict:
    """`generate()` keyword arguments: the user's, over mixkit's greedy defaults, in transformers' semantics.

    The default length (20 new tokens) is added only when the user gave neither `max_length` nor
    `max_new_tokens`: transformers lets `max_new_tokens` win over `max_length`, so adding it next to a
    user's `max_length` would silently override it. A `generation_config` is the user's whole
    statement and gets no defaults.
    """
    if "generation_config" in user:
        return dict(user)
    options = {**DEFAULT_GENERATION, **_checked_counts(user)}
    if not any(user.get(name) is not None for name in _LENGTH_OPTIONS):
        options["max_new_tokens"] = DEFAULT_MAX_NEW_TOKENS
    return options


COUNT_OPTIONS = {"max_new_tokens": 1, "max_length": 1, "min_new_tokens": 0, "min_length": 0, "num_beams": 1,
                 "num_beam_groups": 1, "top_k": 0, "no_repeat_ngram_size": 0}
"""transformers' generation options that count something -> their least value. transformers takes other types
through and fails deep inside (num_beams=2.5: a `repeat_interleave` TypeError) or not at all."""


def _checked_counts(user: dict) -> dict:
    """`user` with its counts checked (integers, numpy's too, at or above their least value) and made plain ints."""
    import numbers

    checked = dict(user)
    for name, least in COUNT_OPTIONS.items():
        value = user.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        checked[name] = int(value)
    return checked


def check_return_sequences(options: dict) -> int:
    """The number of texts per image (`num_return_sequences`, default 1); ValueError when it cannot be honoured."""
    count = options.get("num_return_sequences")
    if count is None:
        return 1
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"num_return_sequences must be a positive integer (texts per image), got {count!r}")
    beams = options.get("num_beams", 1) or 1
    if count > beams and not options.get("do_sample", False):
        raise ValueError(f"num_return_sequences={count} needs num_beams >= {count} (beam search keeps that many "
                         f"candidates) or do_sample=True; got num_beams={beams}")
    return count


def pad_token_rows(rows: list[list[int]], pad_id: int, side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) for ragged token lists, padded on `side` ('left' or 'right')."""
    width = max(len(row) for row in rows)
    ids, mask = [], []
    for row in rows:
        padding = width - len(row)
        ids.append([pad_id] * padding + row if side == "left" else row + [pad_id] * padding)
        mask.append([0] * padding + [1] * len(row) if side == "left" else [1] * len(row) + [0] * padding)
    return torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long)


class GenerativeAdapter(VisionLanguageAdapter):
    tasks = GENERATIVE_TASKS
    question_format = BLIP2_QUESTION_FORMAT
    caption_prompt = ""

    @property
    def decoder_only(self) -> bool:
        return not self.model.config.text_config.is_encoder_decoder

    def caption(self, images: Any, prompt: str | None = None, **generation: Any) -> list[str] | list[list[str]]:
        """One caption per image (with `num_return_sequences=k > 1`: one list of k captions per image, best first).

        `generation` goes to transformers' `generate` as given (e.g. `max_length`, `num_beams`);
        mixkit adds greedy decoding and 20 new tokens only where the user set nothing.
        """
        images = self._images(images)
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a string or None, got {type(prompt).__name__}")
        text = self.caption_prompt if prompt is None else prompt
        return self._generate_all(images, [text] * len(images), generation)

    def answer(self, images: Any, questions: Sequence[str], **generation: Any) -> list[str] | list[list[str]]:
        """One answer per (image, question) pair (a list of k with `num_return_sequences=k > 1`); see `caption`."""
        images = self._images(images)
        questions = check_texts(questions, "questions")
        if len(questions) != len(images):
            raise ValueError(
                f"answer() pairs each image with one question, got {len(images)} images and {len(questions)} questions"
            )
        return self._generate_all(images, [self.question_prompt(q) for q in questions], generation)

    def question_prompt(self, question: str) -> str:
        """The prompt the LM sees for one question: the family's VQA format around it."""
        return self.question_format.format(question)

    def _generate_all(self, images: list, prompts: list[str], generation: dict) -> list[str] | list[list[str]]:
        options = generation_options(generation)
        per_image = check_return_sequences(options)
        answers: list[str] = [""] * (len(images) * per_image)
        size = self.default_batch_size
        with onednn_small_batch_linears(self.model):
            for group in self._length_groups(prompts, options):
                for start in range(0, len(group), size):
                    rows = group[start:start + size]
                    texts = self._generate_batch([images[i] for i in rows], [prompts[i] for i in rows], options)
                    for n, i in enumerate(rows):
                        answers[i * per_image:(i + 1) * per_image] = texts[n * per_image:(n + 1) * per_image]
        if per_image == 1:
            return answers
        # transformers returns the k sequences of each input row next to each other, best first
        return [answers[i:i + per_image] for i in range(0, len(answers), per_image)]

    def _length_groups(self, prompts: list[str], options: dict) -> list[list[int]]:
        """Indices of the rows that may share a batch: all of them, except under `max_length` with a
        decoder-only LM, where it counts the (left-padded) prompt too, so rows batch only with rows of
        their own prompt length and get the tokens a single call gives them."""
        if options.get("max_length") is None or not self.decoder_only:
            return [list(range(len(prompts)))]
        groups: dict[int, list[int]] = {}
        for index, prompt in enumerate(prompts):
            groups.setdefault(len(self.processor.tokenizer(prompt)["input_ids"]), []).append(index)
        return list(groups.values())

    @torch.no_grad()
    def _generate_batch(self, images: list, prompts: list[str], options: dict) -> list[str]:
        inputs = self._model_inputs(images, prompts)
        prompt_length = inputs["input_ids"].shape[1]
        output = self.model.generate(**inputs, **options)
        if self.decoder_only and output.shape[1] >= prompt_length:
            output = output[:, prompt_length:]
        return [text.strip() for text in self.processor.tokenizer.batch_decode(output, skip_special_tokens=True)]

    def _pixel_values(self, images: list) -> torch.Tensor:
        pixels = self.processor.image_processor(images, return_tensors="pt")["pixel_values"]
        return pixels.to(self.device, self.dtype)

    def _query_prefixed_tokens(self, prompts: list[str]) -> dict:
        """Q image placeholder tokens (replaced by Q-Former outputs inside the model), then the prompt."""
        config, tokenizer = self.model.config, self.processor.tokenizer
        if config.image_token_index is None:
            raise ValueError(
                f"{self.source!r} has no image_token_index in config.json (a checkpoint saved before transformers 4.47); "
                "load it with a current transformers and save it again, or use an updated copy from the hub"
            )
        placeholders = [config.image_token_index] * config.num_query_tokens
        # The tokenizer's own special tokens, as Blip2Processor / InstructBlipProcessor add them: OPT's and Vicuna's
        # put their BOS first, T5's an EOS last. (Always inserting text_config.bos_token_id made a checkpoint whose
        # tokenizer adds no BOS generate other text than transformers' processor + generate on the same weights.)
        rows = [placeholders + tokenizer(p)["input_ids"] for p in prompts]
        pad_id = config.text_config.pad_token_id
        input_ids, attention_mask = pad_token_rows(rows, pad_id, "left" if self.decoder_only else "right")
        return {"input_ids": input_ids.to(self.device), "attention_mask": attention_mask.to(self.device)}


@VLM_FAMILIES.register("blip2")
class Blip2Adapter(GenerativeAdapter):
    """BLIP-2 (`Blip2ForConditionalGeneration`) with an OPT or Flan-T5 language model."""

    family = "blip2"
    model_types = ("blip-2",)

    def _model_inputs(self, images: list, prompts: list[str]) -> dict:
        return {"pixel_values": self._pixel_values(images), **self._query_prefixed_tokens(prompts)}


@VLM_FAMILIES.register("instructblip")
class InstructBlipAdapter(GenerativeAdapter):
    """InstructBLIP: like BLIP-2, but the instruction is also fed to the Q-Former."""

    family = "instructblip"
    model_types = ("instructblip",)
    caption_prompt = "A short image description:"

    def _model_inputs(self, images: list, prompts: list[str]) -> dict:
        qformer = self.processor.qformer_tokenizer(prompts, padding=True, truncation=True, max_length=512, return_tensors="pt")
        return {
            "pixel_values": self._pixel_values(images),
            "qformer_input_ids": qformer["input_ids"].to(self.device),
            "qformer_attention_mask": qformer["attention_mask"].to(self.device),
            **self._query_prefixed_tokens(prompts),
        }


@VLM_FAMILIES.register("llava")
class LlavaAdapter(GenerativeAdapter):
    """LLaVA-1.5 style (`LlavaForConditionalGeneration`): CLIP patches through an MLP into a chat LM."""

    family = "llava"
    model_types = ("llava",)
    question_format = LLAVA_CHAT_FORMAT
    caption_prompt = LLAVA_CAPTION_PROMPT

    def caption(self, images: Any, prompt: str | None = None, **generation: Any) -> list[str]:
        images = self._images(images)
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a string or None, got {type(prompt).__name__}")
        text = self.question_prompt(self.caption_prompt if prompt is None else prompt)
        return self._generate_all(images, [text] * len(images), generation)

    def question_prompt(self, question: str) -> str:
        """The chat template around an instruction, or the prompt as given when it already holds the image token.

        transformers' LLaVA docs write whole prompts ('USER: <image>\nWhat is shown? ASSISTANT:'); wrapping one
        again put the image token in twice, which transformers refuses. mixkit's modular adapter takes such prompts
        as given too (`_expand_image_token`). One image per prompt, so the token may appear once.
        """
        token = getattr(self.processor, "image_token", None) or "<image>"
        count = question.count(token)
        if count == 0:
            return self.question_format.format(question)
        if count > 1:
            raise ValueError(f"prompt {question!r} holds the image token {token!r} {count} times; one image per "
                             f"prompt, so write it once, or pass only the instruction and the chat template "
                             f"{self.question_format!r} is added")
        return question

    def _model_inputs(self, images: list, prompts: list[str]) -> dict:
        # LLaVA's processor expands <image> into one token per patch, so it builds the ids; the LM
        # is decoder-only, hence left padding whatever the saved tokenizer says. The side is set for
        # this call only: the processor may be the caller's own (`wrap_vlm`), used later by a
        # training collator that pads on the right.
        tokenizer = self.processor.tokenizer
        saved_side = tokenizer.padding_side
        tokenizer.padding_side = "left"
        try:
            inputs = self.processor(images=images, text=prompts, padding=True, return_tensors="pt")
        finally:
            tokenizer.padding_side = saved_side
        inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        return {key: value.to(self.device) for key, value in inputs.items()}
