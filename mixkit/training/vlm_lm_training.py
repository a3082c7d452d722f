"""The language-modelling loop shared by the BLIP-2 stage-2 and MiniGPT-4 trainers.

Both train some parts of a `VisionLanguageModel` so that the LM, reading the image through the
bridge, predicts the target text: only target tokens are supervised (image positions and the
prompt carry label -100, see `build_lm_labels`). Batch k is a pure function of (seed, k) and a
checkpoint holds the trainable weights, optimizer, schedule and RNG states (dropout in the LM), so
a resumed run reproduces an uninterrupted one. The trained model is written as a modular folder
(mixkit_vlm.json, model.safetensors, tokenizer/) assembled in a temporary folder and renamed into
place, so a failed save leaves no partial model.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from mixkit.io.atomic import atomic_output_folder
from mixkit.training.accelerator_setup import make_accelerator
from mixkit.training.losses import build_lm_labels, causal_lm_loss
from mixkit.training.lr_schedules import warmup_schedule
from mixkit.training.plain_step import finish_step
from mixkit.training.training_result import TrainingResult
from mixkit.training.training_state import architecture_fingerprint, load_training_state, restore_rng_states
from mixkit.training.vlm_samples import VlmSample, batch_for_step, image_batch

logger = logging.getLogger(__name__)

# (prompt token ids, target token ids) of one sample; the prompt is never supervised.
TokenRow = tuple[list[int], list[int]]


@dataclass
class LanguageModellingRun:
    """What a trainer prepared: the model with its trainable parts unfrozen, data, and how to tokenize."""

    trainer: str
    model: nn.Module  # a VisionLanguageModel
    tokenizer: object
    samples: list[VlmSample]
    skipped: list
    tokenize: Callable[[VlmSample], TokenRow]
    task: object  # ModularTaskConfig: pixel size and statistics, and the prompts saved with the output
    fingerprint_extra: dict
    prefix_tokens: int = 0  # image embeddings the model puts before the text (0 when placeholders are inline)
    # {"vision_encoder.": 1e-5}: parameters whose names start with a key train at that rate, the rest
    # at the config's learning_rate (a fine-tuned tower needs a far smaller step than a fresh bridge).
    part_learning_rates: dict[str, float] = field(default_factory=dict)


def collate_token_rows(rows: list[TokenRow], pad_id: int, max_length: int, source: str = "dataset"):
    """Right-padded (input_ids, attention_mask, labels); targets are cut to fit `max_length`."""
    cut = []
    for prompt, target in rows:
        if len(prompt) >= max_length:
            raise ValueError(f"{source}: a prompt is {len(prompt)} tokens, which leaves no room for the target in "
                             f"{max_length} text tokens (max_text_length, or what the LM's positions leave); "
                             "raise max_text_length or shorten the prompt / instruction.")
        cut.append((prompt, target[:max_length - len(prompt)]))
    length = max(len(p) + len(t) for p, t in cut)
    ids = torch.full((len(cut), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(cut), length), dtype=torch.long)
    for row, (prompt, target) in enumerate(cut):
        tokens = prompt + target
        ids[row, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        mask[row, :len(tokens)] = 1
    labels = build_lm_labels(ids, mask, num_query_tokens=0, prompt_lengths=[len(p) for p, _ in cut])
    return ids, mask, labels


def lm_loss(model: nn.Module, pixels: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor):
    """Next-token loss; image tokens prepended by the model (prefix mode) get label -100."""
    logits = model(pixels, ids, mask).logits
    extra = logits.shape[1] - labels.shape[1]
    if extra:
        labels = torch.cat([labels.new_full((labels.shape[0], extra), -100), labels], dim=1)
    return causal_lm_loss(logits.float(), labels)


def set_train_modes(model: nn.Module) -> None:
    """Train mode only where something is trained: frozen parts keep eval behaviour (no dropout).

    A module trains when any parameter below it is trained; parameter-free modules (dropout)
    follow their parent, since LMs often apply dropout functionally with the layer's own flag.
    """
    for module in model.modules():
        module.training = any(p.requires_grad for p in module.parameters())
    for module in model.modules():
        for child in module.children():
            if not any(True for _ in child.parameters()):
                child.training = module.training


def write_model_folder(model: nn.Module, tokenizer, task, config_json: str, output: str) -> Path:
    """Save model, task config.json, tokenizer/ and the training config in a temp folder, then rename it.

    The layout is `save_modular_vlm`'s, so `load_vlm(output)` captions and answers with it.
    """
    from mixkit.models.vlm.modular.task_config import TASK_CONFIG_NAME, TOKENIZER_FOLDER

    with atomic_output_folder(output) as temp:
        model.save_pretrained(temp)
        (temp / TASK_CONFIG_NAME).write_text(task.to_json(), encoding="utf-8")
        tokenizer.save_pretrained(temp / TOKENIZER_FOLDER)
        (temp / "mixkit_training_config.json").write_text(config_json, encoding="utf-8")
    return Path(output).absolute()


def decay_groups(parameters: list[nn.Parameter], weight_decay: float) -> list[dict]:
    """AdamW parameter groups: weight decay on weight matrices only, none on biases and norm gains.

    BLIP-2's reference training (LAVIS) exempts every parameter with fewer than 2 dimensions.
    """
    return [{"params": [p for p in parameters if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in parameters if p.ndim < 2], "weight_decay": 0.0}]


def rate_groups(named: dict[str, nn.Parameter], weight_decay: float, part_learning_rates: dict[str, float]) -> list[dict]:
    """`decay_groups` per learning rate: parameters under a prefix of `part_learning_rates` get its rate."""
    groups, rest = [], dict(named)
    for prefix, rate in part_learning_rates.items():
        chosen = [rest.pop(name) for name in [n for n in rest if n.startswith(prefix)]]
        groups += [{**group, "lr": rate} for group in decay_groups(chosen, weight_decay) if group["params"]]
    return [group for group in decay_groups(list(rest.values()), weight_decay) if group["params"]] + groups


def run_language_modelling(config, run: LanguageModellingRun, *, stop_at_step: int | None = None,
                           write_at_stop: bool = False) -> TrainingResult:
    """Train `run.model`'s unfrozen parameters for `config.max_steps`; writes `config.output` at the end, and with
    `write_at_stop` at `stop_at_step` too (beside that step's resume state: a recipe evaluating what it has)."""
    if stop_at_step is not None and not 0 < stop_at_step <= config.max_steps:
        raise ValueError(f"stop_at_step must be in 1..max_steps={config.max_steps}, got {stop_at_step}")
    accelerator = make_accelerator(mixed_precision=config.mixed_precision)
    world, rank = accelerator.num_processes, accelerator.process_index
    started = time.time()
    model = run.model
    named = {name: p for name, p in model.named_parameters() if p.requires_grad}
    if not named:
        raise ValueError(f"{run.trainer}: nothing to train, every parameter is frozen")
    optimizer = torch.optim.AdamW(rate_groups(named, config.weight_decay, run.part_learning_rates), lr=config.learning_rate)
    schedule = warmup_schedule(optimizer, config.lr_schedule, config.warmup_steps, config.max_steps)
    fingerprint = architecture_fingerprint({k: v.detach() for k, v in named.items()},
                                           {"trainer": run.trainer, **run.fingerprint_extra})

    # Resume: trainable weights, optimizer, schedule, RNGs; data order follows from the step.
    step = 0
    if config.resume_from:
        state = load_training_state(config.resume_from, fingerprint, config.max_steps)
        with torch.no_grad():
            for name, value in state["trainable"].items():
                named[name].copy_(value)
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["scheduler"])
        restore_rng_states(state["rng"])
        step = state["step"]
    set_train_modes(model)
    prepared, optimizer = accelerator.prepare(model, optimizer)

    pad_id = run.tokenizer.pad_token_id if run.tokenizer.pad_token_id is not None else 0
    # Longer inputs would index past the LM's position table deep inside transformers.
    positions = getattr(model.language_model.config, "max_position_embeddings", None)
    max_length = config.max_text_length if positions is None else min(config.max_text_length,
                                                                      positions - run.prefix_tokens)
    checkpoint_dir = Path(config.checkpoint_dir or f"{config.output}-checkpoints")
    result = TrainingResult(output=None, steps=step, first_step=step, skipped_images=list(run.skipped))
    end = stop_at_step or config.max_steps
    while step < end:
        indices = batch_for_step(len(run.samples), config.batch_size, config.seed, step * world + rank)
        samples = [run.samples[i] for i in indices]
        ids, mask, labels = collate_token_rows([run.tokenize(s) for s in samples], pad_id, max_length, config.dataset)
        pixels = image_batch([s.image for s in samples], run.task.image_size, run.task.image_mean, run.task.image_std)
        with accelerator.autocast():
            loss = lm_loss(prepared, *(t.to(accelerator.device) for t in (pixels, ids, mask, labels)))
        accelerator.backward(loss)
        step += 1
        finish_step(loss, step, accelerator=accelerator, optimizer=optimizer, schedule=schedule, result=result,
                    config=config, stop_at_step=stop_at_step, checkpoint_dir=checkpoint_dir, fingerprint=fingerprint,
                    trainable=lambda: named)
    result.steps = step
    model.eval()
    if (step == config.max_steps or (write_at_stop and step == stop_at_step)) and accelerator.is_main_process:
        result.output = write_model_folder(model, run.tokenizer, run.task, config.to_json(), config.output)
    result.seconds = time.time() - started
    if accelerator.is_main_process and result.losses:
        logger.info("%s: %d steps in %.1f s, loss %.4f -> %.4f", run.trainer, step, result.seconds,
                    result.losses[0], result.losses[-1])
    return result
