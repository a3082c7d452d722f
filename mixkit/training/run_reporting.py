"""What an SD training run reports while it trains: loss/lr/it/s to TensorBoard, sample images to disk.

Shared by the LoRA and full fine-tune trainers (`StepReporter` is the `after_step` callback of
`run_denoising_loop`). TensorBoard goes through accelerate's `TensorBoardTracker`, written by the
main process only. Validation renders with the weights a file saved at that step would hold (LoRA hooks
attached; the EMA average when the run keeps one) and never touches the training RNG streams.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from mixkit.data.bucketing import resolution_size
from mixkit.training.validation_images import render_validation_images, save_validation_images

logger = logging.getLogger(__name__)


def require_tensorboard() -> None:
    """Raise ImportError naming `pip install tensorboard` if TensorBoard logging cannot work here."""
    try:
        import tensorboard  # noqa: F401  (torch.utils.tensorboard needs it; checked here to name the package)
        import accelerate.tracking  # noqa: F401
    except ImportError as error:
        raise ImportError(f"log_with='tensorboard' needs the tensorboard package: pip install tensorboard "
                          f"(or set log_with=None); import failed with: {error}") from None


def open_tensorboard(logging_dir: str | Path, run_name: str):
    """accelerate's TensorBoard tracker writing under `logging_dir/run_name`."""
    require_tensorboard()
    from accelerate.tracking import TensorBoardTracker

    tracker = TensorBoardTracker(run_name, str(logging_dir))
    tracker.start()
    return tracker


class StepReporter:
    """Called after every optimizer step; logs scalars and, at the run's `validation_points` (steps or epoch ends,
    `run_schedule.validation_points`), validation images.

    `enabled` is False on all but the main process, so multi-process runs write each file once. The
    TensorBoard requirement is checked at construction (before any model loads), but the event file
    is only opened at the first step, so a run that fails while loading leaves no log behind.
    `model` (the `DiffusionModel` being trained) must be set before the first step.
    """

    def __init__(self, config, *, run_dir: str | Path, run_name: str, enabled: bool, model=None,
                 validation_points: dict[int, str] | None = None) -> None:
        self.config = config
        # {step: how that step's images are numbered}; None: every `validation_every` steps.
        self.validation_points = validation_points
        self.model = model
        # kohya's `<output_dir>/sample/`; the images are named by the run (`sample_image_name`).
        self.validation_dir = Path(run_dir) / "sample"
        self.sample_prompts = config.sample_prompt_list()
        self.enabled = enabled
        self.run_name = run_name
        self.tracker = None
        self.logging_dir = Path(config.logging_dir or Path(run_dir) / "logs")
        if config.log_with == "tensorboard":
            require_tensorboard()
        self.width, self.height = resolution_size(config.resolution)  # one side, or kohya's width,height
        self.saved_images: list[Path] = []
        # Set by the trainer when it has held-out images: a no-argument function giving their loss now.
        self.held_out_loss = None
        # Set by a trainer with EMA: a context manager factory swapping in the averaged weights, so validation
        # images show the model a file saved at that step would hold (as diffusers' EMA training scripts do).
        self.averaged_weights = None
        # Modules beside the model to put in eval mode while rendering (the LoRA network: its dropouts off).
        self.eval_modules: list = []
        self.validation_losses: list[tuple[int, float]] = []

    def _open_tracker(self) -> None:
        if self.config.log_with == "tensorboard" and self.tracker is None:
            self.tracker = open_tensorboard(self.logging_dir, self.run_name)
            self.tracker.store_init_configuration(_hparams(self.config))

    def __call__(self, step: int, loss: float, learning_rate: float, seconds: float) -> None:
        if not self.enabled:
            return
        self._open_tracker()
        if self.tracker is not None:
            self.tracker.log({"loss": loss, "lr": learning_rate, "it_per_s": 1.0 / max(seconds, 1e-9)}, step=step)
        when = self.validation_when(step)
        if when is not None:
            self.validate(step, when)
        every = self.config.validation_loss_every
        if self.held_out_loss is not None and ((every and step % every == 0) or step == self.config.max_steps):
            self.record_validation_loss(step)

    def validation_when(self, step: int) -> str | None:
        """How the images made after `step` are numbered, or None when none are made then."""
        if self.validation_points is not None:
            return self.validation_points.get(step)
        every = self.config.validation_every
        return f"{step:06d}" if every and step % every == 0 else None

    def before_first_step(self, step: int) -> None:
        """The images of step 0 (kohya's `sample_at_first`) when the run starts there and asked for them."""
        when = self.validation_when(0)
        if self.enabled and step == 0 and when is not None:
            self._open_tracker()
            self.validate(0, when)

    def record_validation_loss(self, step: int) -> float | None:
        """The held-out loss at `step` (the trainer also calls this before its first step), logged and kept."""
        if not self.enabled or self.held_out_loss is None:
            return None
        self._open_tracker()
        value = self.held_out_loss()
        self.validation_losses.append((step, value))
        if self.tracker is not None:
            self.tracker.log({"validation_loss": value}, step=step)
        logger.info("Step %d: validation loss %.5f", step, value)
        return value

    def validate(self, step: int, when: str | None = None) -> list[Path]:
        """Render and save one image per sample prompt (with its kohya options) at the current weights, numbered
        by `when` in their names (default: the step)."""
        import contextlib

        config = self.config
        from mixkit.training.eval_mode import eval_mode

        with eval_mode(*self.eval_modules), \
                self.averaged_weights() if self.averaged_weights else contextlib.nullcontext():
            images = render_validation_images(
                self.model, self.sample_prompts, steps=config.validation_steps, seed=config.validation_seed,
                guidance_scale=config.validation_guidance_scale, height=self.height, width=self.width,
                encoding=config.caption_encoding())
        paths = save_validation_images(images, self.validation_dir, when or f"{step:06d}", self.run_name,
                                       [prompt.seed for prompt in self.sample_prompts])
        self.saved_images += paths
        if self.tracker is not None:
            import numpy as np

            self.tracker.log_images({"validation": np.stack([np.asarray(image) for image in images])}, step=step,
                                    dataformats="NHWC")
        logger.info("Step %d: validation images %s", step, ", ".join(p.name for p in paths))
        return paths

    def close(self) -> None:
        if self.tracker is not None:
            self.tracker.finish()
            self.tracker = None


def _hparams(config) -> dict:
    """Config values TensorBoard's hparams accept (numbers, strings, bools); lists become strings."""
    values = {}
    for key, value in vars(config).items():
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            continue
        values[key] = value if isinstance(value, (int, float, str, bool)) else str(value)
    return values
