"""Create and train A1111 hypernetworks (its Train tab's "Create hypernetwork" and "Train hypernetwork").

Training keeps the whole model frozen and unchanged: the hypernetwork's MLPs are put on every attention's key/value
projections through `apply_hypernetworks`, the same forward generation uses (strength 1, as A1111 trains), the shared
`run_denoising_loop` trains them (deterministic data order and noise, so resume is exact), and the result is written
atomically as A1111's `.pt`, its `step` counted on from the starting file's.

A continued file goes on from its step: the data order, noise and dropout draws are those of its step onwards, and
its `.pt.optim` (A1111's optimizer state, `hn_optimizer_state`) restores the optimizer, so N steps and then M more
equal N + M steps in one run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from pathlib import Path
from typing import Callable

import torch

from mixkit.data import BucketedImageDataset
from mixkit.hypernetworks.create import TrainableHypernetwork
from mixkit.training.a1111_learn_rate import parse_learn_rate, rate_at, schedule_end
from mixkit.training.dataset_scan import scan_dataset, scan_path
from mixkit.training.denoising_loop import ConditionedDenoiser
from mixkit.training.frozen_model_run import (load_frozen_model, optimizer_with_schedule, put_back_on_failure,
                                              resume, start_run, train_attached)
from mixkit.training.hn_config import HypernetworkCreateConfig, SDHypernetworkConfig
from mixkit.training.hn_optimizer_state import load_optimizer_state, read_optimizer_state, save_optimizer_state
from mixkit.training.optimizers import make_optimizer
from mixkit.training.training_result import TrainingResult
from mixkit.training.training_state import architecture_fingerprint
from mixkit.training.validation_loss import held_out_records

logger = logging.getLogger(__name__)


def create_hypernetwork(config: HypernetworkCreateConfig, *, stop_at_step: int | None = None) -> TrainingResult:
    """Write a new, untrained hypernetwork (`config.output`, step 0), as A1111's "Create hypernetwork" does.

    `stop_at_step` is accepted for the `mixkit train` command's sake and must be None (nothing to stop)."""
    config.check()
    if stop_at_step is not None:
        raise ValueError("creating a hypernetwork takes no steps; leave out --stop-at-step")
    output = Path(config.output).expanduser()
    hypernetwork = TrainableHypernetwork.new(output.stem, config, config.seed)
    hypernetwork.save(output, step=0)
    logger.info("Created hypernetwork %r (widths %s, layer structure %s) at %s", output.stem, hypernetwork.widths,
                hypernetwork.shape.layer_structure, output)
    return TrainingResult(output=output, steps=0)


def attention_context_widths(unet) -> list[int]:
    """The key/value input widths of `unet`'s attentions: the widths a hypernetwork's MLPs must have to apply."""
    from diffusers.models.attention_processor import Attention

    return sorted({m.to_k.in_features for m in unet.modules()
                   if isinstance(m, Attention) and isinstance(m.to_k, torch.nn.Linear)})


def checkpoint_identity(model_source, model) -> tuple[str | None, str]:
    """(sd_checkpoint, sd_checkpoint_name) as A1111 v1.10 records the model a hypernetwork was trained on: a
    single-file checkpoint's short hash (the first 10 hex digits of its SHA-256) and its file stem; a diffusers
    folder or hub id has no one file to hash, so no hash and its name."""
    path = Path(str(model_source)).expanduser()
    if path.is_file():
        from mixkit.io.hashing import sha256_file

        return sha256_file(path)[:10], path.stem
    return None, getattr(model, "name", None) or path.name


def dropout_seed(seed: int, hypernetwork_step: int) -> int:
    """The global torch seed for the dropout of the hypernetwork's step `hypernetwork_step` (Dropout draws from
    torch's global generator). Hashed so it never equals the seed of that step's noise generator
    (`denoising_loop`), whose draws would otherwise repeat as the dropout masks."""
    digest = hashlib.sha256(f"hypernetwork-dropout:{seed}:{hypernetwork_step}".encode()).hexdigest()
    return int(digest[:15], 16)


def optimizer_class(config: SDHypernetworkConfig) -> str:
    """The torch class name of the run's optimizer (what A1111's `.optim` files record), from a throw-away one."""
    probe = make_optimizer(config.optimizer, [{"params": [torch.nn.Parameter(torch.zeros(1))]}],
                           config.learning_rate, config.optimizer_args)
    return type(probe).__name__


def _stepped_rate_schedule(config: SDHypernetworkConfig, parameters, start_step: int):
    """The optimizer at the schedule's rate for `start_step`, and a LambdaLR giving each run step the rate A1111's
    schedule gives the hypernetwork's step `start_step + step`."""
    phases = parse_learn_rate(config.learning_rate_schedule)
    base = rate_at(phases, start_step)
    optimizer = make_optimizer(config.optimizer, [{"params": parameters, "lr": base}], base, config.optimizer_args)
    # Past the schedule's end the run has already stopped (max_steps is cut there); the last rate stands in.
    last = phases[-1].rate
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: (rate_at(phases, start_step + step) or last) / base)
    return optimizer, schedule


def train_hypernetwork(config: SDHypernetworkConfig, *, stop_at_step: int | None = None, model=None,
                       should_stop: Callable[[], bool] | None = None,
                       on_step: Callable[[int, int, float], None] | None = None) -> TrainingResult:
    """Run (or resume) a hypernetwork training; writes `config.output` unless stopped early by `stop_at_step`.

    `model` lets a caller pass an already loaded `DiffusionModel` (it comes back bit-identical). `should_stop()` is
    asked before every step; once True the run ends there and writes what it reached (A1111's Interrupt), or nothing
    when no step ran. `on_step(step, max_steps, loss)` reports each finished step.
    """

    # 1. Validate settings, the starting hypernetwork and the data before loading the model.
    config.check()
    name = config.name()
    hypernetwork = (TrainableHypernetwork.from_file(config.hypernetwork) if config.hypernetwork
                    else TrainableHypernetwork.new(name, config, config.seed))
    hypernetwork.name = name
    start_step = hypernetwork.step
    if config.learning_rate_schedule is not None:
        end = schedule_end(parse_learn_rate(config.learning_rate_schedule))
        if end is not None and end <= start_step:
            raise ValueError(f"hypernetwork {config.hypernetwork!r} is at step {start_step}, where learning_rate_"
                             f"schedule {config.learning_rate_schedule!r} has already ended (step {end}); extend the "
                             "schedule or end it with a rate without a step")
        if end is not None and end - start_step < config.max_steps:
            logger.info("learning_rate_schedule ends at step %d: this run trains %d steps, not max_steps=%d", end,
                        end - start_step, config.max_steps)
            config = dataclasses.replace(config, max_steps=end - start_step)
    saved_optimizer = (read_optimizer_state(Path(config.hypernetwork).expanduser(), optimizer_class(config))
                       if config.hypernetwork else None)
    templates = config.caption_templates()
    report = scan_dataset(config)
    report.records, held_records = held_out_records(config, report.records, scan_path)
    dataset = BucketedImageDataset(report.records, config.resolution, config.bucket_settings(), source=config.dataset,
                                   loss_masks=config.masked_loss)
    setup = start_run(config, dataset, held_records, stop_at_step=stop_at_step)
    config = setup.config

    # 2. Load and freeze the whole model; the hypernetwork's MLPs are all that trains.
    model, owns_model = load_frozen_model(config, model)
    if owns_model and setup.precision in ("bf16", "fp16"):
        model.unet.to(dtype=torch.bfloat16 if setup.precision == "bf16" else torch.float16)
    widths = attention_context_widths(model.unet)
    if not set(hypernetwork.widths) & set(widths):
        raise ValueError(f"the hypernetwork's context widths {hypernetwork.widths} are none of this model's attention "
                         f"widths {widths}, so it would train nothing; set enable_sizes to some of {widths}")
    hypernetwork.requires_grad_(True).train()  # dropout on, as A1111 trains
    hypernetwork.attach(model.unet)
    with put_back_on_failure(model, hypernetwork, config):
        if config.gradient_checkpointing:
            model.unet.enable_gradient_checkpointing()
        model.unet.train()
        denoiser = ConditionedDenoiser(model, False, adapters=hypernetwork, encoding=config.caption_encoding())
        parameters = list(hypernetwork.parameters())
        if config.learning_rate_schedule is not None:
            optimizer, lr_schedule = _stepped_rate_schedule(config, parameters, start_step)
        else:
            optimizer, lr_schedule = optimizer_with_schedule(config, [{"params": parameters,
                                                                       "lr": config.learning_rate}])
        if saved_optimizer is not None:
            load_optimizer_state(optimizer, saved_optimizer)
            logger.info("Continuing the optimizer state saved beside %s", config.hypernetwork)
        raw_optimizer = optimizer  # what `.optim` files hold (the accelerate wrapper's state is the same)
        fingerprint = architecture_fingerprint(
            dict(hypernetwork.state_dict()),
            {"trainer": "hypernetwork", "name": name, "family": model.family.value,
             "shape": dataclasses.asdict(hypernetwork.shape),
             "unet": {k: v for k, v in dict(model.unet.config).items() if not k.startswith("_")}})

        # 3. Resume: MLPs, optimizer, schedule, RNGs and step.
        step = resume(config, fingerprint, optimizer, lr_schedule, hypernetwork.load_state_dict)
        # Dropout draws from torch's global generator, seeded per hypernetwork step (after each step's reporting,
        # whose sample images may draw from it too), so a resumed or continued run draws what one run drew.
        torch.manual_seed(dropout_seed(config.seed, start_step + step))
        denoiser, optimizer = setup.accelerator.prepare(denoiser, optimizer)
    output = Path(config.output).expanduser()
    checkpoint_hash, checkpoint_name = checkpoint_identity(config.model, model)

    def save(path: str | Path, at_step: int, kind: str) -> Path:
        """The `.pt` of the MLPs as they are now, its step counted on from the starting file's; files written along
        the way are `<name>-<step>.pt`, as A1111 names them."""
        file_step = start_step + at_step
        target = output if kind == "final" else output.with_name(f"{name}-{file_step}{output.suffix}")
        written = hypernetwork.save(target, step=file_step, sd_checkpoint=checkpoint_hash,
                                    sd_checkpoint_name=checkpoint_name)
        if config.save_optimizer_state:
            save_optimizer_state(written, raw_optimizer)
        return written

    def reseed_then_report(at_step: int, max_steps: int, loss: float) -> None:
        torch.manual_seed(dropout_seed(config.seed, start_step + at_step))
        if on_step is not None:
            on_step(at_step, max_steps, loss)

    # 4. Train with the shared loop; 5. write the file (main process only; atomically, also when interrupted after
    # some steps) and take the MLPs off, so the caller's model is unchanged.
    result = train_attached(
        setup, model=model, attached=hypernetwork, denoiser=denoiser, optimizer=optimizer, lr_schedule=lr_schedule,
        step=step, stop_at_step=stop_at_step, fingerprint=fingerprint, clipped=lambda: hypernetwork.parameters(),
        trainable_state=hypernetwork.state_dict, save=save, skipped_images=report.skipped,
        eval_modules=(hypernetwork,),
        rewrite_captions=(lambda captions, index: templates.captions(captions, config.seed, index))
        if templates is not None else None, should_stop=should_stop, on_step=reseed_then_report,
        save_when_interrupted=True, draw_offset=start_step)
    hypernetwork.requires_grad_(False).eval()
    if setup.accelerator.is_main_process:
        logger.info("Trained hypernetwork %r to step %d (%d steps in this run) in %.1f s; final loss %.4f; output %s",
                    name, start_step + result.steps, result.steps - result.first_step, result.seconds,
                    result.losses[-1] if result.losses else float("nan"), result.output)
    return result
