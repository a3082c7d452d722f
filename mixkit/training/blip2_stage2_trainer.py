"""BLIP-2 stage 2 (Li et al. 2023, section 3.3): connect the Q-Former to a language model.

The vision encoder stays frozen; the bridge (Q-Former, queries and the projection to the LM width)
is trained with the LM loss on the text that follows the image (captions, or answers after a
`Question: {} Short answer:` prompt). The LM is frozen as in the paper, unless
`train_language_model` is set: a tiny world has no pre-trained LM, so there the LM learns from
scratch together with the bridge. Decoder-only LMs (OPT, Llama, GPT-2 ...) are supported.
"""

from __future__ import annotations

import torch

from mixkit.io.atomic import check_new_output_folder
from mixkit.io.sources import with_shipped_folders
from mixkit.training.blip2_stage2_config import Blip2Stage2Config
from mixkit.training.training_result import TrainingResult
from mixkit.training.vlm_lm_training import LanguageModellingRun, run_language_modelling
from mixkit.training.vlm_parts import load_tokenizer, task_config_for, tokenizer_folder
from mixkit.training.vlm_samples import VlmSample, format_prompt, scan_vlm_samples


def check_tokenizer_fits(tokenizer, language_model, setting: str) -> None:
    vocab = language_model.get_input_embeddings().num_embeddings
    if len(tokenizer) > vocab:
        raise ValueError(f"{setting} has {len(tokenizer)} tokens but the language model embeds only {vocab}; "
                         "use the tokenizer the language model was built with.")


def sample_prompt(prompt: str, caption_prompt: str | None, sample: VlmSample, source: str) -> str:
    """The prompt text of one sample: `caption_prompt` for captions when given, else `prompt` (filled)."""
    if sample.question is None and caption_prompt is not None:
        return caption_prompt
    return format_prompt(prompt, sample, source)


def caption_tokenizer(tokenizer, prompt: str, source: str, caption_prompt: str | None = None):
    """sample -> (tokenizer(prompt), target ids + [eos]); the target follows a non-empty prompt after a space.

    The prompt is tokenized exactly as `load_vlm` tokenizes it at inference (special tokens, such
    as OPT's leading </s>, included), so training and use agree.
    """
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []

    def tokenize(sample: VlmSample) -> tuple[list[int], list[int]]:
        text = sample_prompt(prompt, caption_prompt, sample, source)
        target = (" " if text else "") + sample.target
        return tokenizer(text)["input_ids"], tokenizer(target, add_special_tokens=False)["input_ids"] + eos

    return tokenize


def saved_prompts(task, prompt: str, caption_prompt: str | None = None):
    """The input's task config with the trained prompt(s) as its caption prompt and/or VQA template."""
    import dataclasses

    if caption_prompt is not None:
        task = dataclasses.replace(task, caption_prompt=caption_prompt)
    if "{}" in prompt:
        return dataclasses.replace(task, vqa_template=prompt)
    return dataclasses.replace(task, caption_prompt=prompt)


def load_stage1_qformer(bridge, folder: str) -> None:
    """Copy a blip2-stage1 output's queries and Q-Former into `bridge` (the projection stays as it is)."""
    from mixkit.training.blip2_stage1_output import load_blip2_stage1

    stage1_bridge, _ = load_blip2_stage1(folder)
    source = {k: v for k, v in stage1_bridge.state_dict().items() if not k.startswith("projection.")}
    target = bridge.state_dict()
    # Stage 1 also trains the Q-Former's text path, which stage 2 does not use.
    needed = {k for k in target if not k.startswith("projection.")}
    missing = sorted(needed - set(source))
    wrong = sorted(k for k in needed & set(source) if source[k].shape != target[k].shape)
    if missing or wrong:
        raise ValueError(f"qformer_from {folder!r} does not fit the model's Q-Former (missing {missing[:3]}, "
                         f"shape mismatch {wrong[:3]}); train stage 1 with the model's Q-Former sizes.")
    with torch.no_grad():
        for name in needed:
            target[name].copy_(source[name])


def train_blip2_stage2(config: Blip2Stage2Config, *, stop_at_step: int | None = None,
                       write_at_stop: bool = False) -> TrainingResult:
    """Run (or resume) stage 2; writes a modular folder (with tokenizer/) to `config.output` at the end (and at
    `stop_at_step` with `write_at_stop`)."""
    from mixkit.models.vlm.modular import QFormerBridge, VisionLanguageModel

    # 1. Validate settings, output and data before loading the model.
    config.check()
    config = with_shipped_folders(config, ("model", "qformer_from"))
    check_new_output_folder(config.output)
    scan = scan_vlm_samples(config.dataset, missing_captions=config.missing_captions,
                            caption_extension=config.caption_extension)
    for sample in scan.samples:  # a question without '{}' in the prompt (or the reverse) fails before loading
        sample_prompt(config.prompt, config.caption_prompt, sample, config.dataset)

    # 2. Model and tokenizer; only the bridge (and optionally the LM) is trained.
    model = VisionLanguageModel.from_pretrained(config.model)
    if getattr(model.language_model.config, "is_encoder_decoder", False):
        raise ValueError(f"model {config.model!r} has an encoder-decoder LM ({model.language_model.config.model_type}); "
                         "blip2-stage2 trains decoder-only LMs (OPT, Llama, GPT-2 ...) for now.")
    tokenizer = load_tokenizer(tokenizer_folder(config.tokenizer, config.model))
    check_tokenizer_fits(tokenizer, model.language_model, "tokenizer")
    if config.qformer_from:
        if not isinstance(model.bridge, QFormerBridge):
            raise ValueError(f"qformer_from needs a model with a Q-Former bridge; {config.model!r} has a "
                             f"{model.bridge.kind!r} bridge.")
        load_stage1_qformer(model.bridge, config.qformer_from)
    model.requires_grad_(False)
    model.bridge.requires_grad_(True)
    if config.train_language_model:
        model.language_model.requires_grad_(True)
    if config.train_vision_encoder:
        model.vision_encoder.requires_grad_(True)
    torch.manual_seed(config.seed)

    # 3. Train and save; the image embeddings go before the text (no placeholders in captions).
    task = saved_prompts(task_config_for(config.model, model.vision_encoder), config.prompt, config.caption_prompt)
    with torch.no_grad():
        prefix_tokens = model.eval().encode_images(torch.zeros(1, 3, task.image_size, task.image_size)).shape[1]
    # "vision" only when trained, so checkpoints from before the option existed still resume.
    fingerprint_extra = {"lm": config.train_language_model, **({"vision": True} if config.train_vision_encoder else {})}
    run = LanguageModellingRun(
        trainer="blip2-stage2", model=model, tokenizer=tokenizer, samples=scan.samples, skipped=scan.skipped,
        tokenize=caption_tokenizer(tokenizer, config.prompt, config.dataset, config.caption_prompt),
        task=task, fingerprint_extra=fingerprint_extra, prefix_tokens=prefix_tokens,
        part_learning_rates={"vision_encoder.": config.vision_learning_rate} if config.train_vision_encoder else {},
    )
    return run_language_modelling(config, run, stop_at_step=stop_at_step, write_at_stop=write_at_stop)
