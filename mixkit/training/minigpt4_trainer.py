"""MiniGPT-4 (Zhu et al. 2023): train one linear layer from a frozen BLIP-2 Q-Former into a frozen chat LM.

Each sample becomes `###Human: <Img><ImageHere></Img> {instruction} ###Assistant: {target}###`:
the Q-Former's query outputs, projected, replace the `<ImageHere>` placeholders inside the prompt
(one per query), and only the target (with its end marker) is supervised. The tokenizer gets an
`<ImageHere>` special token if it lacks one; its id only marks where image embeddings go and is
never embedded by the LM. The output folder's caption prompt and VQA template are this template,
so `load_vlm(output).caption(...)` / `.answer(...)` ask the model as it was trained (`load_vlm`
widens the one `<ImageHere>` token to one placeholder per query, as training does here).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from mixkit.io.atomic import check_new_output_folder
from mixkit.io.sources import with_shipped_folders
from mixkit.training.minigpt4_config import MiniGPT4Config
from mixkit.training.training_result import TrainingResult
from mixkit.training.vlm_lm_training import LanguageModellingRun, run_language_modelling
from mixkit.training.vlm_parts import load_tokenizer, task_config_for, tokenizer_folder
from mixkit.training.vlm_samples import VlmSample, scan_vlm_samples

TRAINED_PART = "bridge.projection"


def with_image_token(tokenizer) -> int:
    """The id of `<ImageHere>`, adding it as a special token if the tokenizer does not have it."""
    from mixkit.models.vlm.modular.minigpt4 import IMAGE_HERE

    if IMAGE_HERE not in tokenizer.get_vocab():
        tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_HERE]})
    return tokenizer.convert_tokens_to_ids(IMAGE_HERE)


def chat_tokenizer(tokenizer, config: MiniGPT4Config, num_query_tokens: int, image_token_index: int):
    """sample -> (template prompt ids, target ids + end marker).

    The prompt is tokenized whole and its one `<ImageHere>` token widened to one placeholder per
    query output: what `load_vlm` does with the saved template, so the model is asked as trained.
    """
    from mixkit.models.vlm.modular.minigpt4 import minigpt4_prompt

    def tokenize(sample: VlmSample) -> tuple[list[int], list[int]]:
        ids = tokenizer(minigpt4_prompt(sample.question or config.instruction))["input_ids"]
        if image_token_index not in ids:
            raise ValueError("the tokenizer splits '<ImageHere>' into pieces; add it as a special token "
                             "(tokenizer.add_special_tokens) and save the tokenizer again.")
        at = ids.index(image_token_index)
        prompt = ids[:at] + [image_token_index] * num_query_tokens + ids[at + 1:]
        return prompt, tokenizer(" " + sample.target + config.end_text, add_special_tokens=False)["input_ids"]

    return tokenize


def _load_chat_language_model(folder: str):
    from transformers import AutoConfig, AutoModelForCausalLM

    if not (Path(folder) / "config.json").is_file():
        raise FileNotFoundError(f"language_model {folder!r} has no config.json; pass a transformers causal LM folder.")
    if getattr(AutoConfig.from_pretrained(folder), "is_encoder_decoder", False):
        raise ValueError(f"language_model {folder!r} is an encoder-decoder model; MiniGPT-4 needs a causal (chat) LM.")
    return AutoModelForCausalLM.from_pretrained(folder)


def build_model(config: MiniGPT4Config):
    """(model with only the projection trainable, tokenizer) from blip2 + language_model, or init_from."""
    from mixkit.models.vlm.modular import QFormerBridge, VisionLanguageModel
    from mixkit.models.vlm.modular.minigpt4 import build_minigpt4

    if config.init_from:
        tokenizer = load_tokenizer(tokenizer_folder(config.tokenizer, config.init_from))
        image_token_index = with_image_token(tokenizer)
        model = VisionLanguageModel.from_pretrained(config.init_from)
        if not isinstance(model.bridge, QFormerBridge) or model.image_token_index != image_token_index:
            raise ValueError(f"init_from {config.init_from!r} is not a MiniGPT-4 folder (Q-Former bridge, image token "
                             f"id {image_token_index}); start from blip2 + language_model instead.")
    else:
        tokenizer = load_tokenizer(tokenizer_folder(config.tokenizer or config.language_model, None))
        image_token_index = with_image_token(tokenizer)
        blip2 = VisionLanguageModel.from_pretrained(config.blip2)
        if not isinstance(blip2.bridge, QFormerBridge):
            raise ValueError(f"blip2 {config.blip2!r} has a {blip2.bridge.kind!r} bridge; MiniGPT-4 reuses a Q-Former.")
        model = build_minigpt4(blip2, _load_chat_language_model(config.language_model),
                               image_token_index=image_token_index, seed=config.seed)
    check_tokenizer_fits_ignoring(tokenizer, model.language_model, image_token_index)
    model.requires_grad_(False)
    model.bridge.projection.requires_grad_(True)
    return model, tokenizer, image_token_index


def check_tokenizer_fits_ignoring(tokenizer, language_model, image_token_index: int) -> None:
    """Every token id must have an LM embedding, except the placeholder (it is never embedded)."""
    vocab = language_model.get_input_embeddings().num_embeddings
    too_big = sorted(t for t, i in tokenizer.get_vocab().items() if i >= vocab and i != image_token_index)
    if too_big:
        raise ValueError(f"tokenizer has tokens the chat LM cannot embed ({too_big[:3]}..., LM vocabulary {vocab}); "
                         "use the tokenizer the language model was trained with.")


def train_minigpt4(config: MiniGPT4Config, *, stop_at_step: int | None = None) -> TrainingResult:
    """Run (or resume) MiniGPT-4 projection training; writes a modular folder (with tokenizer/) to `config.output`."""
    # 1. Validate settings, output and data before loading models.
    config.check()
    config = with_shipped_folders(config, ("blip2", "init_from"))
    check_new_output_folder(config.output)
    scan = scan_vlm_samples(config.dataset, missing_captions=config.missing_captions,
                            caption_extension=config.caption_extension)

    # 2. Model: vision, Q-Former and LM frozen; one linear layer trained.
    from mixkit.models.vlm.modular.minigpt4 import MINIGPT4_TEMPLATE, minigpt4_prompt

    model, tokenizer, image_token_index = build_model(config)
    torch.manual_seed(config.seed)
    task = dataclasses.replace(task_config_for(config.init_from or config.blip2, model.vision_encoder),
                               caption_prompt=minigpt4_prompt(config.instruction), vqa_template=MINIGPT4_TEMPLATE)
    run = LanguageModellingRun(
        trainer="minigpt4", model=model, tokenizer=tokenizer, samples=scan.samples, skipped=scan.skipped,
        tokenize=chat_tokenizer(tokenizer, config, model.bridge.num_output_tokens, image_token_index), task=task,
        fingerprint_extra={"part": TRAINED_PART},
    )
    return run_language_modelling(config, run, stop_at_step=stop_at_step)
